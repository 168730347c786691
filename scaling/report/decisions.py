"""The report's sections on what to train: the plan for a few budgets, what repeated data cost (the
data-constrained fit, and the loss against epochs at fixed compute), and the validation that
trained the recommended model. Like `scaling.report.sections`, each
takes the `Report` being built and writes into it.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from scaling.errors import UsageError
from scaling.formats import sci
from scaling.laws.optimal import allocation
from scaling.laws.repeated.fit import at_bound
from scaling.laws.results.summary import allocation_row
from scaling.report import decision_figures, prose
from scaling.report.drawn import drawn_law, drawn_note
from scaling.report.page import Report
from scaling.report.prose import bounds, number
from scaling.validation.result import headline


def plan(r: Report) -> None:
    fit, c_range = r.fit, r.fit.data.c_range
    r.doc.h(2, "Plan for a few budgets")
    rows, lines, intervals = [], [], False
    for c in prose.PLAN_BUDGETS:
        try:
            best = fit.plan(c)
        except UsageError as exc:          # no optimum at this budget, or one that is no model (a flat table)
            lines.append(f"C = {sci(c)}: no plan: {exc}")
            continue
        others = allocation.compare_allocations(fit.law if fit.form_entry is None else None, c)[-2:]
        intervals |= best.intervals is not None
        rows += [allocation_row(a, best.intervals) for a in (
            allocation.Allocation("law", c, float(best.n), float(best.d), float(best.loss)),
            *(replace(a, loss=fit.expected_loss(a.n, a.d)) for a in others))]
    if not rows:                           # as `scaling plan` refuses: the reasons, and no table of nothing
        r.doc.ul(lines)
        return
    r.doc.table(["C (FLOPs)", "allocation", "N (params)", "D (tokens)", "D/N", "predicted loss"], rows,
                align=["r", "l", "r", "r", "r", "r"])
    lines.insert(0, "predicted loss: each allocation's loss as the fit predicts it, as `scaling plan --fit` gives it"
                 + ("; beyond the fitted compute that is its backtest's law (fitted without the runs under 5 tokens "
                    "per parameter, moved by its bias; docs/fitting.md), whose optimum can differ from the fitted "
                    "law's" if fit.backtest is not None and fit.form_entry is None and fit.median is None else "")
                 + ("; that is the median of the forms' (the default; the forms section), at each allocation's N and D"
                    if fit.median is not None else "")
                 + "; kaplan: N = 1.3e9 (C / 8.64e19)^0.73 non-embedding parameters, D = C / (6N).")
    if fit.form_entry is not None:
        lines.append(f"law optimum: the {fit.form} form's (`--form`; numeric where it has no closed form), its loss "
                     "and every other as that form predicts them; the constants above stay the Chinchilla form's.")
    if (entry := fit.form_entry) is not None and intervals:
        lines.append(f"[lo, hi]: {100 * fit.level:g}% over the {fit.form} form's {entry.n_resamples} resamples' "
                     f"optima; the loss's includes its runs' scatter (residual RMS {entry.residual_rms:.3g}) and, "
                     "beyond the data, its backtest's growth.")
    elif fit.ci is not None and intervals:
        lines.append(f"[lo, hi]: {100 * fit.ci.level:g}% bootstrap intervals; the loss's includes the runs' "
                     f"scatter (residual RMS {fit.residual_rms:.3g}).")
    else:
        lines.append("no bootstrap samples: the law's optimum has no intervals here.")
    if c_range:
        top = c_range[1]
        lines += [f"C = {sci(c)} is {math.log10(c / top):.1f} orders of magnitude above your largest run "
                  f"({top:.3g} FLOPs): an extrapolation of the fitted form" for c in prose.PLAN_BUDGETS if c > top]
    r.doc.ul(lines)


def repeated_data(r: Report) -> None:
    """The data-constrained fit, where runs repeated data: R_D*, and the figure of what it means."""
    rep = r.fit.repeated
    if rep is None:
        return
    r.doc.h(2, "Repeated data")
    r.doc.p(f"{rep.n_repeated} runs trained past one epoch of their unique tokens (up to {rep.max_epochs:.3g}). The "
            "law above counts a repeated token as a fresh one; the data-constrained law of Muennighoff et al. (2023) "
            "scores each run at an effective data D' = U + U R_D* (1 - exp(-R/R_D*)), R = D/U - 1.")
    if rep.law.r_d_star is None:
        r.doc.p(rep.message)
        return
    r.doc.ul([f"R_D* = {rep.law.r_d_star:.3g} {bounds(rep.interval('r_d_star'), '.3g')} (published, on C4: 15.4): "
              f"a token seen for the k-th time is worth exp(-(k-1)/R_D*) of a fresh one",
              f"base law alpha {rep.law.base.alpha:.3g} {bounds(rep.interval('alpha'), '.3g')}, beta "
              f"{rep.law.base.beta:.3g} {bounds(rep.interval('beta'), '.3g')}; residual RMS {rep.residual_rms:.3g}"]
             + ([rep.message] if rep.message else []))
    interval = rep.interval("r_d_star")
    if interval is not None and at_bound(np.asarray(interval)).any():
        r.missing_figures["repeated"] = ("R_D* is not determined by these runs (its interval reaches the search's "
                                         "bound): a decay drawn from its point value would be no finding")
        return
    compute, unique = r.fit.reference_compute, rep.unique_range[1]
    assert compute is not None         # a fit records the compute its ratios are quoted at
    r.figure("repeated", decision_figures.repeated_data(rep, compute, unique),
             f"Left: the predicted loss along C = {compute:.3g} FLOPs (the fit's reference compute) with "
             f"{unique:.3g} unique tokens, against epochs, under the data-constrained law and as if every token "
             "were fresh; its minimum is the best number of epochs. Right: the worth of a repeated token, with "
             "the epochs the runs reached shaded; beyond them the decay is extrapolated.")


def validation(r: Report) -> None:
    """`scaling validate`'s runs beside the fit, when there are any: the table, the headline, the figure."""
    v = r.inputs.validation
    if v is None:
        return
    r.doc.h(2, "Validation: the recommended model, trained")
    if v.law != r.fit.law.to_dict():
        r.doc.p(f"validate.json validated another law than this fit's (refitted since): run `scaling validate` "
                f"again at C = {v.compute:.3g} to check this one.")
        return
    if v.forced:
        r.doc.p(f"**The fit's verdict was '{v.fit_verdict}'; the validation was run anyway (--force)**: it tests "
                "what the law says, not a recommendation.")
    rows = [[run.position, run.shape, sci(run.n), sci(run.d), number(run.d / run.n, ".3g"),
             number(run.predicted, ".3f"), bounds(run.interval, ".3f"), number(run.observed, ".3f"), run.status]
            for run in v.runs]
    r.doc.table(["run", "shape", "N", "D", "D/N", "predicted", f"{100 * v.level:g}% interval", "observed", "status"],
                rows, align=["l", "l", "r", "r", "r", "r", "r", "r", "l"])
    r.doc.p(headline(v) + f". Runs in {v.store}, with the sweep's recipe; they are not fit points.")
    band = None
    if r.fit.resampled is not None:
        grid = np.geomspace(min(run.n for run in v.runs) / 1.6, max(run.n for run in v.runs) * 1.6, 60)
        limits = np.array([r.fit.loss_interval(n, float(r.fit.law.flops.tokens(v.compute, n))) for n in grid])
        band = (grid, limits[:, 0], limits[:, 1])
    r.figure("validation", decision_figures.validation(v, drawn_law(r.fit), band, n_label=r.n_label),
             f"Loss along C = {v.compute:.3g} FLOPs: the fitted law (line) with its {100 * v.level:g}% prediction "
             "interval (band: the bootstrap's laws times the runs' scatter), and the three runs trained there "
             "(points; bars: each run's prediction interval)." + drawn_note(r.fit))
