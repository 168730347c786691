"""The report's sections on what to train: the plan for a few budgets, what repeated data cost (the
data-constrained fit, and the loss against epochs at fixed compute), and the validation that
trained the recommended model. Like `scaling.report.sections`, each
takes the `Report` being built and writes into it.
"""

from __future__ import annotations

import numpy as np

from scaling.errors import UsageError
from scaling.formats import sci
from scaling.laws.repeated.fit import at_bound
from scaling.laws.results.lawfit import LawFit
from scaling.laws.results.summary import allocation_row, plan_rows
from scaling.report import decision_figures, prose
from scaling.report.drawn import drawn_law, drawn_note
from scaling.report.page import Report
from scaling.report.prose import bounds, number
from scaling.validation.result import headline


def plan(r: Report) -> None:
    fit = r.fit
    top = fit.data.c_range[1] if fit.data.c_range else None
    measure = fit.law.flops.name
    r.doc.h(2, "Plan for a few budgets")
    r.doc.p(f"Budgets relative to your runs: 1x, 3x, 10x and 30x the largest fitted run's compute (as far as the "
            "backtest reaches), and any given with `scaling report --compute`; every C is counted as the fit counts "
            f"it: {fit.law.flops.describe()}.")
    rows, lines, intervals, largest_n = [], [], False, 0.0
    for c in r.budgets:
        try:
            best = fit.plan(c)
        except UsageError as exc:          # no optimum at this budget, or one that is no model (a flat table)
            lines.append(f"C = {sci(c)}: no plan: {exc}")
            continue
        intervals |= best.intervals is not None
        allocations = plan_rows(fit, best)
        largest_n = max(largest_n, *(a.n for a in allocations))
        rows += [[prose.beyond_runs(c, top), *allocation_row(a, best.intervals)] for a in allocations]
    if not rows:                           # as `scaling plan` refuses: the reasons, and no table of nothing
        r.doc.ul(lines)
        return
    r.doc.table(["beyond the runs", f"C ({measure})", "allocation", "N (params)", "D (tokens)", "D/N",
                 "predicted loss"], rows, align=["l", "r", "l", "r", "r", "r", "r"])
    lines.insert(0, "predicted loss: each allocation's loss as the fit predicts it, as `scaling plan --fit` gives it"
                 + ("; beyond the fitted compute that is its backtest's law (fitted without the runs under 5 tokens "
                    "per parameter, moved by its bias; docs/fitting.md), whose optimum can differ from the fitted "
                    "law's" if fit.backtest is not None and fit.form_entry is None and fit.median is None else "")
                 + ("; that is the median of the forms' (the default; the forms section), at each allocation's N and D"
                    if fit.median is not None else "")
                 + f"; kaplan: N = 1.3e9 (C / 8.64e19)^0.73 non-embedding parameters, D = {_tokens_rule(fit)}, "
                   "as the comparison with published laws below splits it.")
    if fit.form_entry is not None:
        lines.append(f"law optimum: the {fit.form} form's (`--form`; numeric where it has no closed form), its loss "
                     "and every other as that form predicts them; the constants above stay the Chinchilla form's.")
    lines.append(_interval_note(fit) if intervals else "no bootstrap samples: the law's optimum has no intervals here.")
    lines += _count_caution(fit, largest_n)
    r.doc.ul(lines)


def _tokens_rule(fit: LawFit) -> str:
    """D of a split of C, in the fit's count of C."""
    return "C / (6N)" if fit.law.flops.is_six_n else f"C / c(N) ({fit.law.flops.name}, as every C here)"


def _interval_note(fit: LawFit) -> str:
    """What the loss's interval holds, with the scatter (residual RMS) of the law that gives it: the
    chosen form's, the median of the forms', or the fitted law's inside the runs and the backtest's
    law's beyond them."""
    level = f"[lo, hi]: {100 * fit.level:g}%"
    if (entry := fit.form_entry) is not None:
        return (f"{level} over the {fit.form} form's {entry.n_resamples} resamples' optima; the loss's includes its "
                f"runs' scatter (residual RMS {entry.residual_rms:.3g}) and, beyond the data, its backtest's growth.")
    if (median := fit.median) is not None:
        return (f"{level} bootstrap intervals of N, D and D/N; the loss's is the median of the forms' own rule: the "
                f"runs' scatter about it (residual RMS {median.extrapolation.noise:.3g}, its forms' median) and, "
                "beyond the data, its backtest's growth.")
    text = f"{level} bootstrap intervals; the loss's includes the runs' scatter (residual RMS {fit.residual_rms:.3g})"
    if fit.backtest is not None:
        text += (f" at the largest run, and beyond it the scatter about the backtest's law (residual RMS "
                 f"{fit.backtest.extrapolation.noise:.3g}) with the error's growth with the distance")
    return text + "."


def _count_caution(fit: LawFit, largest_n: float) -> list[str]:
    """A caution where the plan's models are larger than those c(N) was fitted on: C's count there is
    an extrapolation too (6ND differs from it by c(N) / 6N)."""
    flops, n_range = fit.law.flops, fit.data.n_range
    if flops.is_six_n or not n_range or largest_n <= float(n_range[1]):
        return []
    ratio = float(flops.per_token(largest_n)) / (6.0 * largest_n)
    lo, hi = (float(v) for v in n_range)
    return [f"C's count c(N) = 6 x {flops.kappa:.4g} N^{flops.gamma:.4g} was fitted on models of {lo:.3g}-{hi:.3g} "
            f"parameters; the plan's largest model ({largest_n:.3g}) is beyond them, where "
            f"c(N) is extrapolated: there it counts {ratio:.3g}x 6N, so the same run is {1 / ratio:.3g}x its C "
            "counted as 6ND."]


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
