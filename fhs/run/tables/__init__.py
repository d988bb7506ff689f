"""The paper's tables that are computed from run records, no model call: Table 11's sampling pilot, Table 12's β
on development data and Appendix E.2's windows, Table 20's FHS-Seq diagnostics, the verifier's verdict shares.

One home per layer: a figure computed from records (a rate, a sweep, a choice, a tally) is a pure function over
records here, defined once; a chapter's module in ``fhs.book.chapters`` runs the chapter's rows through the study
and lays these figures out as its page's frames, figure and check. Nothing here builds a frame or draws."""
