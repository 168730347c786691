"""The report a researcher reads: figures, tables and the hold-out check, as Markdown or HTML.

Imports matplotlib; only `scaling report` loads it.
"""
