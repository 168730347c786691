"""The report's sections on the law beyond its data: the leave-future-out backtest (fit.json's
"backtest") and the law's forms side by side (fit.json's "forms"), each with a table and a figure.

    backtest_section(report); forms_section(report)      # as `scaling.report.report.SECTIONS` calls them
    curves = forms_along(fit, compute)                    # each form's prediction along compute

Every number is the fit's: the forms' predictions are `FormEntry.predict` of each form's own law, its
resamples (the fitted form's: the fit's bootstrap) and its backtest, as the fit made them at the target
compute (the figure, drawn through that compute, passes through the table's numbers there).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from scaling.laws.checks.backtest import Cut, farthest
from scaling.laws.checks.backtest_text import summary_line
from scaling.laws.checks.combined import NAME as MEDIAN
from scaling.laws.checks.combined import Combined
from scaling.laws.checks.cross_forms import FormEntry, Forms, fitted_form, forms_check
from scaling.laws.checks.extrapolation import growth_text
from scaling.laws.checks.holdout import pct
from scaling.laws.checks.verdict import CAUTION
from scaling.laws.forms.form import optimum
from scaling.laws.forms.law import PARAM_NAMES
from scaling.laws.results.lawfit import LawFit
from scaling.report import beyond_figures as figs
from scaling.report.drawn import chinchilla_note
from scaling.report.page import Report

BEYOND = 1000.0      # the forms are drawn to this many times the largest fitted run's compute (or past the target)
GRID = 60            # points along compute


def _cut_row(c: Cut) -> tuple:
    """One backtest cut as the report's table row (the reason in place of the errors where not made)."""
    if not c.made:
        return (f"{c.factor:g}x", str(c.n_train), "-", str(c.n_test), c.reason or "-", "-", "-", "-", "-")
    fitted_to = "-" if c.train_max_compute is None else f"{c.train_max_compute:.3g}"
    held = "-" if c.covered is None else f"{c.covered} of {len(c.errors)}"
    bias = "-" if c.bias is None else f"{c.bias:+.2%}"
    width = pct(float(np.median(c.half_widths))) if c.half_widths else "-"
    return (f"{c.factor:g}x", str(c.n_train), fitted_to, str(c.n_test), pct(c.median_abs_error),
            pct(c.worst_abs_error), bias, held, width)


def backtest_section(r: Report) -> None:
    """The fit's leave-future-out backtest (fit.json's "backtest"): one row per extrapolation factor, the
    rule beyond the data, and the figure of every predicted run."""
    check = r.fit.backtest
    r.doc.h(2, "Backtest: how far beyond its data has the law been shown to predict?")
    if check is None:
        r.doc.p("None here: this fit.json predates the backtest (refit it for one).")
        r.missing_figures["backtest"] = "no backtest in this fit.json"
        return
    header = ["factor", "runs fitted", "fitted up to C", "runs predicted", "median error", "worst", "bias",
              f"inside the {100 * check.level:g}% interval", "median half-width"]
    if (median := r.fit.median_backtest) is not None:
        r.doc.p("The fit predicts beyond its data by the median of the forms (`--form median`; the forms section): "
                "each cut's prediction of the top budget's runs is the geometric median of the forms' cut "
                "predictions, each moved by its form's bias, its interval its own rule's, learned from these cuts "
                "(in-sample, as far as its calibration goes). This is what the verdict judges. "
                f"{summary_line(median)}.")
        r.doc.table(header, [_cut_row(c) for c in median.cuts])
        r.doc.p(f"The {fitted_form(r.fit.options.fixed_E)} form's law (the constants, the allocation and the figure "
                "below), refitted on the runs below C_top / f, predicts the same runs, as it would predict beyond "
                f"its data (docs/fitting.md). {summary_line(check)}.")
    else:
        r.doc.p(f"The law refitted on the runs below C_top / f predicts the top budget's runs, f times beyond the "
                f"compute it saw, as the fit predicts beyond its data (docs/fitting.md). {summary_line(check)}.")
    r.doc.table(header, [_cut_row(c) for c in check.cuts])
    rule = check.extrapolation
    notes = [f"Beyond the data the prediction is the law of the {check.n_trained} runs with at least "
             f"{check.min_tokens_per_param:g} tokens per parameter, moved {100 * rule.bias:+.2f}% per decade of "
             f"compute; its interval widens by {growth_text(rule)} ({rule.source})."]
    kept = [(c, e) for c, e in zip(check.cuts, check.undertrained) if c.made and e is not None]
    if kept:
        notes.append(f"The runs under {check.min_tokens_per_param:g} tokens per parameter (under-trained for their "
                     "size) are left out of the refits; kept, the cuts' median errors would be "
                     + ", ".join(f"{pct(e)} at {c.factor:g}x" for c, e in kept) + ".")
    if rule.calibration > 1:
        notes.append(f"The cuts erred more than the rule learned from their other cuts allowed: its growth is "
                     f"widened {rule.calibration:.2f}x.")
    r.doc.ul(notes)
    if not check.made:
        r.missing_figures["backtest"] = "no backtest cut could be made (see its section)"
        return
    r.figure("backtest", figs.backtest(check),
             "Every run the backtest predicted, at its cut's extrapolation factor (the runs of one cut spread "
             "side by side): the error of the prediction the fit would have made from the runs below the cut "
             f"(its refit, moved by the bias that refit's own backtest measured), with its {100 * check.level:g}% "
             "interval as a bar, red where the observed loss fell outside it; grey crosses: the refit's own "
             "prediction; black dashes: plus and minus the cut's median absolute error." + chinchilla_note(r.fit))


def _with_samples(fit: LawFit, entry: FormEntry) -> FormEntry:
    """The entry with its resamples: the fitted form keeps none in fit.json's forms (they are the fit's
    own bootstrap, fit.bootstrap.csv), as the fit passed them to the cross-check."""
    if entry.name != fitted_form(fit.options.fixed_E) or entry.samples or fit.resampled is None:
        return entry
    return replace(entry, samples=tuple(tuple(float(v) for v in row) for row in fit.resampled),
                   sample_names=PARAM_NAMES)


def forms_along(fit: LawFit, compute: np.ndarray) -> list[figs.FormCurve]:
    """Each fitted form's prediction (center, lo, hi at the forms' level) for the headline form's
    compute-optimal run at each of `compute`, with a run's scatter and, beyond the fitted runs, its
    backtest's bias and growth: `FormEntry.predict` as the fit called it at the target compute
    (same resamples, same seed). NaN where the headline form has no optimum."""
    forms = fit.forms
    assert forms is not None and fit.data.c_range is not None
    head = forms.entry(forms.planning)
    assert head is not None
    runs = np.full((compute.size, 2), np.nan)
    for k, c in enumerate(compute):
        try:
            runs[k] = optimum(head.law, float(c))[:2]
        except ValueError:
            pass
    far = np.maximum(np.log10(compute / float(fit.data.c_range[1])), 0.0)
    ok = np.isfinite(runs[:, 0])
    out = []
    for e in forms.entries:
        if e.params is None:
            continue
        band = np.full((3, compute.size), np.nan)
        if ok.any():
            band[:, ok] = _with_samples(fit, e).predict(runs[ok, 0], runs[ok, 1], far[ok], level=forms.level,
                                                        noise=True, seed=fit.seed)
        tested = tuple((c.factor, c.median_abs_error) for c in e.cuts if c.made and c.errors)
        out.append(figs.FormCurve(e.name, compute, band[0], band[1], band[2], tested, e.residual_rms,
                                  e.name == forms.headline))
    if (median := forms.combined) is not None:       # the median of the forms, from the members drawn above
        band = np.full((3, compute.size), np.nan)
        if ok.any():
            band[:, ok] = median.predict(forms.entries, runs[ok, 0], runs[ok, 1], far[ok], floor=fit.backtest,
                                         level=forms.level)
        tested = tuple((c.factor, c.median_abs_error) for c in median.raw_cuts(forms.entries))
        out.append(figs.FormCurve(MEDIAN, compute, band[0], band[1], band[2], tested, median.extrapolation.noise,
                                  forms.headline == MEDIAN))
    return out


def _form_row(e: FormEntry, headline: str) -> tuple:
    """One form as the table's row: its law, its prediction for the target run, its own optimum there,
    its backtest at its farthest cut and its residual RMS."""
    name = f"**{e.name}** (predict, plan)" if e.name == headline else e.name
    equation = e.description.split(": ", 1)[-1]
    if e.params is None:
        return (name, equation, f"not fitted: {e.reason}", "-", "-", "-", "-")
    p, o, cut = e.prediction, e.optimum or {}, e.farthest
    loss = "-" if p is None else f"{p['loss']:.4f} [{p['lo']:.4f}, {p['hi']:.4f}]"
    best = (f"{o['n']:.3g}", f"{o['d'] / o['n']:.3g}") if "n" in o else (f"none: {o.get('reason', '-')}", "-")
    tested = "untested" if cut is None else f"{pct(cut.median_abs_error)} at {cut.factor:g}x"
    return (name, equation, loss, *best, tested, f"{e.residual_rms:.3g}")


def _median_row(median: Combined, forms: Forms) -> tuple:
    """The median of the forms as the table's row: its members, its prediction, its backtest as the
    forms' rows show theirs (the geometric median of its members' refits' own errors)."""
    name = f"**{MEDIAN}** (predict, plan's loss)" if forms.headline == MEDIAN else MEDIAN
    p, cut = median.prediction, farthest(median.raw_cuts(forms.entries))
    loss = "-" if p is None else f"{p['loss']:.4f} [{p['lo']:.4f}, {p['hi']:.4f}]"
    tested = "untested" if cut is None else f"{pct(cut.median_abs_error)} at {cut.factor:g}x"
    return (name, f"geometric median of {', '.join(median.members)}", loss, "-", "-", tested,
            f"{median.extrapolation.noise:.3g}")


def _agreement(fit: LawFit) -> str:
    """One sentence: whether the forms agree about the target run (the `forms_agree` check)."""
    assert fit.forms is not None
    check = forms_check(fit.forms)
    if check.status == CAUTION:
        return f"**They disagree beyond their intervals** (the verdict's `forms_agree` caution): {check.reason}."
    if check.value is None:
        return f"They were not compared: {check.reason}."
    return f"**They agree**: {check.reason}."


def forms_section(r: Report) -> None:
    """The law's forms side by side (fit.json's "forms"): the table at the target compute, whether they
    agree, and the figure along compute with each form's backtest."""
    forms, fit = r.fit.forms, r.fit
    r.doc.h(2, "The law's forms side by side: does the prediction depend on the form?")
    if forms is None or fit.data.c_range is None:
        r.doc.p("None here: this fit was made without the other forms (or its fit.json predates them).")
        r.missing_figures["forms"] = "no forms in this fit.json"
        return
    where = f"C = {forms.target_compute:.3g} FLOPs" + (f", {10 ** forms.beyond:.3g}x beyond the largest fitted run"
                                                        if forms.beyond > 0 else ", the largest fitted run's")
    target = "" if forms.target is None else (f" (N = {forms.target['n']:.3g}, D = {forms.target['d']:.3g})")
    r.doc.p("No one form describes every table (docs/fitting.md, \"Forms as cross-checks\"), so beside the fitted "
            "law the fit fits four others by the same machinery (Huber on log residuals, multistart L-BFGS, "
            "Bayesian-bootstrap resamples) to the runs it predicts beyond the data with, each with its own backtest. "
            f"Each predicts the loss of the {forms.planning} form's compute-optimal run at {where}{target}, with its "
            f"{100 * forms.level:g}% prediction interval (its resamples, the runs' scatter and, beyond the data, "
            "its own backtest's bias and growth). Each form's backtest is its refit's own error, before the bias "
            "correction the backtest section's table includes.")
    r.doc.table(["form", "L(N, D)", f"loss of the target run [{100 * forms.level:g}% interval]", "own optimum N",
                 "own D/N", "backtest: its refit's own median error at its farthest cut", "residual RMS"],
                [_form_row(e, forms.headline) for e in forms.entries]
                + ([] if forms.combined is None else [_median_row(forms.combined, forms)]),
                align=["l", "l", "r", "r", "r", "r", "r"])
    notes = [_agreement(fit)]
    if any(e.oracle for e in forms.entries):
        notes.append("fixed-E pins E at the full table's fit: its backtest is an oracle (that E saw the runs its "
                     "cuts predict), a measure of what knowing E is worth, and the agreement leaves it out.")
    if forms.combined is not None:
        notes.append(f"{MEDIAN}: the geometric median of the predicting forms' predictions (`--form median`), its "
                     "interval from its own backtest (each cut's prediction the median of the forms' cut predictions; "
                     "docs/fitting.md, \"The median of the forms\"), beyond the data never narrower than the fitted "
                     "law's own estimation error; its backtest here, as every row's, is its "
                     "members' refits' own errors (their geometric median), before their bias corrections.")
    r.doc.ul(notes)
    top = float(fit.data.c_range[1])
    grid = np.unique(np.append(np.geomspace(float(fit.data.c_range[0]), max(BEYOND * top, 10 * forms.target_compute),
                                            GRID), forms.target_compute))
    data = r.inputs.data
    bare = [e.name for e in forms.entries if e.params is not None and not _with_samples(fit, e).samples]
    r.figure("forms", figs.forms(forms_along(fit, grid), runs=None if data is None else (data.compute, data.loss),
                                 fitted_max=top, target=forms.target_compute, headline=forms.planning,
                                 level=forms.level, compute_label=fit.law.flops.name),
             f"Left: each form's predicted loss for the {forms.planning} form's compute-optimal run along compute, "
             "from the smallest fitted run's compute to far beyond the largest (dotted), with its prediction interval "
             "(bands; bars at the target compute, the table's numbers); the fitted runs in grey lie above it, "
             "each at its own allocation. Right: each form's backtest, the median absolute error of its refit "
             "predicting the top budget's runs at each extrapolation factor."
             + (f" The bands of {', '.join(bare)} hold the runs' scatter and the distance only: no resamples "
                "of them were kept (a fit.json written before they were)." if bare else ""))
