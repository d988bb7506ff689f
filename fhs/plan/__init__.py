"""Layer 5 (beside bench): sizing a GPU run before it starts - the dry run on the simulated model, its totals and
table, and the simulated OpenAI-compatible server a rehearsal runs the chapters against."""
