"""Layer 6: the Jupyter Book - chapter execution, regression checks, report helpers and a chapter's runs (study)."""
