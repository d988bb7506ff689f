"""The paper's tables that are computed from run records, no model call: Table 11's sampling pilot, Table 12's β
on development data and Appendix E.2's windows, Table 20's FHS-Seq diagnostics, the verifier's verdict shares."""
