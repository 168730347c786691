"""A fitted law as one typed object and its file: `LawFit` (`lawfit`, pure), the schema checks of
a fit.json's dict read back (`fit_schema`), fit.json and its side files on disk (`fit_file`:
`write_fit`, `load_fit`), and the text `scaling fit`, `plan`, `compare` and the report print of it
(`summary`)."""
