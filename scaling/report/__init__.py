"""The report stage: what a researcher reads instead of fit.json.

It owns, in the order a report is made:

    inputs     find and load a report's inputs: a LawFit (fitted here or read), its points, the run store
    holdout    the hold-out check: refit without the largest-compute points and predict them (pure)
    sections   the analyses and prose of each section, in reading order; notes: its lists and rows
    figures    the figures (frontiers: the iso-loss contours); style: their look and their files
    document   the Markdown / self-contained HTML document
    report     build_report, write_report, make_report: what `scaling report` calls

It takes a `scaling.laws.results.lawfit.LawFit` and re-derives nothing the fit computed. It imports
matplotlib; only `scaling report` loads it.
"""
