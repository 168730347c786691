"""A fitted law as one typed object and its file: `LawFit` and fit.json (`lawfit`), the schema
checks of a fit.json read back (`fit_file`), and the text `scaling fit`, `plan`, `compare` and
the report print of it (`summary`)."""
