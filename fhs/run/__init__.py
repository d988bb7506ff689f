"""Layer 4: running a method over a dataset - inputs loaded once, the runner, records, evaluation and profiles."""
