"""The whole fit of a set of points, as `scaling fit` makes it: one call, one `LawFit`.

    fit = fit_data(data, bootstrap=1000, seed=0)

The constants (Approach 3, `scaling.laws.fitting.fit`), their bootstrap, Approaches 1 and 2, Kaplan's
single-variable laws, the fit with N counted the other way where the points give both, and the
diagnostics with their verdict. Pure: points in, a `results.LawFit` out.
"""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from scaling.errors import UsageError
from scaling.formats import MAX_COUNT, json_safe, seed_value
from scaling.laws.checks import backtest as backtesting
from scaling.laws.checks import backtest_verdict, combined, cross_forms, diagnostics
from scaling.laws.checks.evidence import evidence, limitations
from scaling.laws.checks.holdout import holdout
from scaling.laws.checks.lack_of_fit import LackOfFit, lack_of_fit
from scaling.laws.curves import fit as curve_fit
from scaling.laws.fitting import bootstrap as resampling
from scaling.laws.fitting import fit as fitting
from scaling.laws.fitting import vpnls
from scaling.laws.fitting.fitdata import FitData
from scaling.laws.fitting.objective import EPrior
from scaling.laws.fitting.prior import prior_scale
from scaling.laws.fitting.selection import check_fittable
from scaling.laws.forms import catalog
from scaling.laws.forms.law import PARAM_NAMES, Law
from scaling.laws.optimal import allocation, approaches, kaplan
from scaling.laws.repeated import RESAMPLES as REPEATED_RESAMPLES
from scaling.laws.repeated import fit_repeated
from scaling.laws.results.fit_sections import DataSummary, FitOptions, Intervals
from scaling.laws.results.lawfit import DEFAULT_BOOTSTRAP, LawFit


def fit_data(data: FitData, *, delta: float = fitting.DEFAULT_DELTA, fixed_E: float | None = None,
             bootstrap: int = DEFAULT_BOOTSTRAP, seed: int = 0, reference_compute: float | None = None,
             grid: dict | npt.ArrayLike | None = None, curves: pd.DataFrame | None = None,
             data_constrained: bool = False, backtest: bool = True,
             E_prior: tuple | None = None, form: str | None = None, forms: bool = False) -> LawFit:
    """Fit the law to `data`, bootstrap it (`bootstrap` resamples; 0 for none), estimate the
    allocation by Hoffmann's three approaches, fit Kaplan's single-variable laws and, where the
    points give N both ways, the other convention; then diagnose it all (`LawFit.diagnostics`).

    grid: None for Hoffmann's 4,500 starts, or axis values / an array as `fit.fit_law` takes.
    reference_compute: C at which tokens per parameter is given (default: the largest 6 N D in
    the data). curves: the runs' intermediate evaluations (`curves.curves_from_store`) for
    Approach 1; without them only Approaches 2 and 3 are reported. Where runs repeat data (or with
    `data_constrained` and the unique tokens known), the data-constrained law is fitted too
    (`LawFit.repeated`, scaling.laws.repeated). backtest: refit below each extrapolation factor and
    predict the runs above (`scaling.laws.checks.backtest`; `LawFit.backtest`), which widens every
    interval beyond the data; False for the fit alone. E_prior: (mean, sd[, source]), a Gaussian prior on E
    added to the objective (`objective.EPrior`, in the objective's units by `quasi_likelihood_scale`
    of the fit without it) and carried into the bootstrap, the refits and so every interval.
    form: the one law that predicts and plans (`predict`, and `plan`: the optimum of that law's
    prediction along the compute curve). By default the fitted law itself (the Chinchilla form, or
    fixed-E with `fixed_E`): beyond the data its backtest's law, moved by the bias its backtest
    measured and widened as the error grew there. Or one form of `scaling.laws.forms.catalog`, or
    "median", the geometric median of the forms as one surface (`scaling.laws.checks.combined`),
    which then plans by its own argmin; the constants and diagnostics stay the fitted form's.
    forms: also fit every other form beside it, each with its own backtest (`scaling.laws.checks.
    cross_forms`; `LawFit.forms`), and caution where they disagree at the reference compute; a
    form chosen by `form` is fitted with them either way.
    """
    form = _check_request(data, bootstrap, seed, form=form, fixed_E=fixed_E, data_constrained=data_constrained,
                          backtest=backtest, E_prior=E_prior)
    seed = int(seed)
    data = data.canonical()
    reference_compute = _reference(reference_compute, data)
    result, prior = _fit_constants(data, delta=delta, grid=grid, fixed_E=fixed_E, E_prior=E_prior, seed=seed)
    lof = residual_structure(data, result)
    boot, future = _resampled_and_backtested(data, result, lof, prior, bootstrap=int(bootstrap), seed=seed,
                                             reference_compute=reference_compute, backtest=backtest)
    fit = _law_fit(data, result, boot, seed=seed, custom_grid=grid is not None, reference_compute=reference_compute)
    fit, extra = _allocation_by_other_routes(fit, data, result, boot, curves, bootstrap=int(bootstrap), seed=seed,
                                             delta=delta, fixed_E=fixed_E, reference_compute=reference_compute)
    fit = replace(fit, repeated=fit_repeated(data, bootstrap=min(int(bootstrap), REPEATED_RESAMPLES), seed=seed,
                                             delta=delta, grid=grid, force=data_constrained))
    # The one hold-out refit: judged by the diagnostics, kept in fit.json, printed by the report.
    check = holdout(data, result.law, fraction=diagnostics.THRESHOLDS["holdout_fraction"], delta=result.delta,
                    fixed_E=result.fixed_E, starts=result.end_points, E_prior=prior)
    fit, beyond = _checked_beyond_the_data(fit, data, result, future, form=form, forms=forms,
                                           reference_compute=reference_compute, bootstrap=int(bootstrap), seed=seed)
    return replace(fit, lack_of_fit=json_safe(lof.to_json()), holdout=check,
                   diagnostics=diagnostics.diagnose(data, result, boot, reference_compute=reference_compute,
                                                    lof=lof, holdout=check, extra=(*extra, *beyond)))


def _check_request(data: FitData, bootstrap: int, seed: int, *, form: str | None, fixed_E: float | None,
                   data_constrained: bool, backtest: bool, E_prior: tuple | None = None) -> str:
    """Everything `fit_data` is asked, checked before any fitting (each a one-line UsageError): the
    resampling, the form (returned: the one asked, or the fitted law's own), that the points can be
    fitted, the prior on E, and the unique tokens a data-constrained fit needs."""
    _check_resampling(bootstrap, seed)
    form = _check_form(form, fixed_E, backtest)
    check_fittable(data, fixed_E)
    if E_prior is not None:            # refused before the fit it would otherwise follow
        checked_E_prior(E_prior, data, fixed_E)
    if form not in (combined.NAME, cross_forms.fitted_form(fixed_E)):   # found before the fit, not after it
        needs = catalog.get(form, E=fixed_E).n_theta
        if data.n.size <= needs:
            raise UsageError(f"{data.n.size} point(s) cannot determine the {form} form's {needs} constants, which "
                             "predictions and plans would use; choose another form", options=("form",))
    if data_constrained and data.unique is None:
        raise UsageError(f"{data.source}: the data-constrained fit needs each run's unique tokens "
                         "(a run store records them; for a table give its unique-tokens column or one count)",
                         options=("unique", "unique_tokens"))
    return form


def _fit_constants(data: FitData, *, delta: float, grid: dict | npt.ArrayLike | None, fixed_E: float | None,
                   E_prior: tuple | None, seed: int) -> tuple[fitting.FitResult, EPrior | None]:
    """The law's constants (Approach 3), and the prior on E they were fitted with: a prior is scaled
    by the precision the runs give E in the fit without it (`e_prior_of`), so the fit is made twice."""
    result = _planned_with(fitting.fit_law(data.n, data.d, data.loss, delta=delta, grid=grid, fixed_E=fixed_E), data)
    if E_prior is None:
        return result, None
    prior = e_prior_of(E_prior, data, result, fixed_E, seed)
    return _planned_with(fitting.fit_law(data.n, data.d, data.loss, delta=delta, grid=grid, E_prior=prior), data), prior


def _allocation_by_other_routes(fit: LawFit, data: FitData, result: fitting.FitResult,
                                boot: resampling.BootstrapResult | None, curves: pd.DataFrame | None, *,
                                bootstrap: int, seed: int, delta: float, fixed_E: float | None,
                                reference_compute: float) -> tuple[LawFit, list]:
    """The allocation reached another way, beside the law's: Hoffmann's Approaches 1 and 2 and VPNLS,
    Kaplan's single-variable laws, and the fit with N counted the other way where the points give
    both; with the checks that compare them to the law (for the verdict)."""
    kaplan_laws = kaplan.fit_kaplan(data.n, data.d, data.loss, param_convention=data.param_convention or "unknown")
    fit = replace(fit, approaches=allocation_approaches(fit, curves, seed=seed),
                  kaplan=json_safe(kaplan_laws.to_dict()))
    extra = [diagnostics.approaches_check(fit.approaches, result.law, fit.ci)]
    conventions = _both_conventions(data, result, boot, bootstrap=bootstrap, seed=seed, delta=delta,
                                    fixed_E=fixed_E, reference_compute=reference_compute)
    if conventions is not None and data.param_convention is not None:   # (the first implies the second)
        fit = replace(fit, param_conventions=conventions)
        extra.append(diagnostics.convention_check(conventions, data.param_convention))
    return fit, extra


def _resampled_and_backtested(data: FitData, result: fitting.FitResult, lof: LackOfFit, prior: EPrior | None, *,
                              bootstrap: int, seed: int, reference_compute: float,
                              backtest: bool) -> tuple[resampling.BootstrapResult | None, backtesting.Backtest | None]:
    """The fit's bootstrap (None for none) and its leave-future-out backtest (None without it),
    side by side: each needs only the fit, and together they are most of its cost, so the bootstrap
    runs on a second thread while this one refits the cuts (numpy leaves the GIL in the batched
    objective). BLAS is held to one thread for both (`single_threaded_blas`: its limit is global,
    and two threads setting and restoring it in turn would leave it wrong)."""
    def resample() -> resampling.BootstrapResult:
        return resampling.bootstrap(data.n, data.d, data.loss, n_resamples=bootstrap, seed=seed,
                                    delta=result.delta, fixed_E=result.fixed_E, reference_compute=reference_compute,
                                    full_fit=result, flops=data.flops, widen=lof.interval_factor, E_prior=prior)

    with fitting.single_threaded_blas(), ThreadPoolExecutor(max_workers=1) as pool:
        boot = pool.submit(resample) if bootstrap else None
        future = backtesting.backtest(data, result, delta=result.delta, fixed_E=result.fixed_E) if backtest else None
        return (None if boot is None else boot.result()), future


def _checked_beyond_the_data(fit: LawFit, data: FitData, result: fitting.FitResult,
                             future: backtesting.Backtest | None, *, form: str, forms: bool,
                             reference_compute: float, bootstrap: int, seed: int) -> tuple[LawFit, list]:
    """How the law extrapolates: the leave-future-out backtest `future` (judged by the verdict; it
    widens every interval beyond the data) and the other forms fitted beside it, each with its own;
    with their checks for the verdict."""
    side = None
    if (forms and future is not None) or form != cross_forms.fitted_form(result.fixed_E):
        side = _forms_beside(data, result, fit, future, form, reference_compute, bootstrap, seed)
        _check_chosen(side, form, result.fixed_E)
    extra = []
    if future is not None:
        median = side.combined if side is not None and form == combined.NAME else None
        fitted = cross_forms.fitted_form(result.fixed_E)
        extra += [backtest_verdict.backtest_check(future) if median is None else       # the predictor's cuts
                  backtest_verdict.median_check(median.as_backtest(future), future, fitted),
                  backtest_verdict.E_drift_check(future, fit.interval("E"), result.law.E, float(data.loss.min()))]
    if side is not None:
        extra.append(cross_forms.forms_check(side))
    return replace(fit, backtest=future, form=form, forms=side), extra


def _check_chosen(side: cross_forms.Forms, form: str, fixed_E: float | None) -> None:
    """UsageError where the form `form` chose to predict and plan with came out with no law: too few
    points for its constants, or a fit that did not converge (the median: fewer than two forms).
    A fit.json without it would plan by nothing: `plan` and `report` would fail on it later."""
    if form == cross_forms.fitted_form(fixed_E):
        return
    if form == combined.NAME and side.combined is None:
        raise UsageError("the median of the forms needs at least two forms fitted; fewer were: choose one form",
                         options=("form",))
    entry = side.entry(form)
    if form != combined.NAME and (entry is None or entry.params is None):
        why = entry.reason if entry is not None else "not fitted"
        raise UsageError(f"the {form} form, which predictions and plans would use, could not be fitted: {why}; "
                         "choose another form", options=("form",))


def _reference(reference_compute: float | None, data: FitData) -> float:
    """C at which tokens per parameter is given: the largest compute in the data unless given."""
    if reference_compute is None:
        return float(data.compute.max())
    if not (math.isfinite(reference_compute) and reference_compute > 0):
        raise UsageError(f"the reference compute must be a positive number of FLOPs; got {reference_compute!r}")
    if reference_compute > MAX_COUNT:       # 1e300 was taken, and flipped the verdict
        raise UsageError(f"the reference compute must be at most {MAX_COUNT:g} FLOPs, as every count is; "
                         f"got {reference_compute:g}")
    return float(reference_compute)


def _forms_beside(data: FitData, result: fitting.FitResult, fit: LawFit, future: backtesting.Backtest | None,
                  form: str, reference_compute: float, bootstrap: int, seed: int) -> cross_forms.Forms:
    """Every law form fitted beside the fit, with at most as many resamples as the fit's own."""
    return cross_forms.cross_check(data, result, fit.resampled, future, headline=form,
                                   target_compute=reference_compute, seed=seed,
                                   resamples=min(bootstrap, cross_forms.CROSS_CHECK_RESAMPLES),
                                   headline_resamples=min(bootstrap, cross_forms.HEADLINE_RESAMPLES))


def checked_E_prior(E_prior: tuple, data: FitData, fixed_E: float | None) -> EPrior:
    """The prior (mean, sd[, source]) on E, unscaled; UsageError where it is not two positive
    numbers below the lowest loss (the sd at most it: `fit.check_fit_inputs`), or E is also fixed."""
    try:
        mean, sd = (float(v) for v in E_prior[:2])
        source = str(E_prior[2]) if len(E_prior) > 2 else None
        if len(E_prior) not in (2, 3):
            raise ValueError
    except (TypeError, ValueError):
        raise UsageError("the prior on E must be two numbers, its mean and standard deviation; "
                         f"got {E_prior!r}") from None
    prior = EPrior(mean, sd, 1.0, source)
    fitting.check_fit_inputs(data.n, data.d, data.loss, fixed_E, prior)
    return prior


def e_prior_of(E_prior: tuple, data: FitData, result: fitting.FitResult, fixed_E: float | None,
               seed: int = 0) -> EPrior:
    """The prior (mean, sd[, source]) on E as the objective carries it: scaled to the precision the
    runs give E in the fit without it (`prior.prior_scale`); UsageError as `checked_E_prior`."""
    prior = checked_E_prior(E_prior, data, fixed_E)
    return replace(prior, scale=prior_scale(data.n, data.d, data.loss, result, seed))


def _check_form(form: str | None, fixed_E: float | None, backtest: bool) -> str:
    """The form that predicts and plans: `form`, or where none is asked the fitted law's own (the
    Chinchilla form, fixed-E where E is pinned); UsageError for an unknown one, one that contradicts
    `fixed_E`, or the median without the backtest (its interval and its members' biases are
    backtests)."""
    if form is None:
        return cross_forms.fitted_form(fixed_E)
    if form == combined.NAME:
        if not backtest:
            raise UsageError("the median of the forms predicts by its members' backtests: it needs the backtest",
                             options=("form",))
        return form
    catalog.get(form, E=fixed_E)       # UsageError naming the known forms, or fixed-E without its E
    if form == catalog.DEFAULT and fixed_E is not None:
        raise UsageError("the chinchilla form fits E and a fixed E pins it: give the form fixed-E with E pinned, "
                         "or leave E free")
    return form


def _check_resampling(bootstrap: int, seed: int) -> None:
    """The bootstrap's count (`resampling.check_count`) and the seed (`seed_value`)."""
    resampling.check_count(bootstrap)
    seed_value(seed)


def _law_fit(data: FitData, result: fitting.FitResult, boot: resampling.BootstrapResult | None, *, seed: int,
             custom_grid: bool, reference_compute: float) -> LawFit:
    """The LawFit of the Approach-3 fit and its bootstrap: the law, its allocation at
    `reference_compute`, the intervals, the evidence and limitations (the sections drawn from the
    other approaches, the diagnostics and the refits are added to it after)."""
    law = result.law
    identified = law.has_optimum
    ci = None
    if boot is not None:
        ci = Intervals(boot.level, boot.n_resamples,
                       {name: [json_safe(lo), json_safe(hi)] for name, (lo, hi) in boot.intervals.items()},
                       widened_by=boot.widened_by)
    return LawFit(
        law=law, seed=seed, data=DataSummary.of(data),
        options=FitOptions(delta=result.delta, grid="custom" if custom_grid else "hoffmann",
                           n_starts=result.n_starts, fixed_E=result.fixed_E,
                           E_prior=None if result.E_prior is None else result.E_prior.to_json(),
                           bootstrap=0 if boot is None else boot.n_resamples),
        a=json_safe(law.a) if identified else None, b=json_safe(law.b) if identified else None,
        G=json_safe(law.G) if identified else None, reference_compute=float(reference_compute),
        tokens_per_param=_tokens_per_param(law, reference_compute) if identified else None,
        ci=ci, objective=result.objective, n_starts_at_optimum=result.n_starts_at_optimum,
        residual_rms=result.residual_rms, evidence=tuple(evidence(data, result, boot)),
        limitations=tuple(limitations(data, result, boot, reference_compute)),
        points=data, optimum=result, boot=boot,
        resampled=None if boot is None else np.column_stack([boot.samples[k] for k in PARAM_NAMES]))


def _tokens_per_param(law: Law, compute: float) -> float | None:
    """D_opt / N_opt at `compute`; None where the optimum is no model (`allocation.model_optimum`:
    a flat table's 1e-217 is not an answer; the bracketing check says why)."""
    try:
        n, d = allocation.model_optimum(law, compute)
    except UsageError:
        return None
    return float(d / n)


def _both_conventions(data: FitData, result: fitting.FitResult, boot: resampling.BootstrapResult | None, *,
                      bootstrap: int, seed: int, delta: float, fixed_E: float | None,
                      reference_compute: float) -> dict | None:
    """The allocation with N counted each way, where the points give both (None where not): this
    fit's, and a refit of the points counted the other way."""
    other = data.counted_other_way()
    if other is None or data.param_convention is None:
        return None
    conventions = {data.param_convention: convention_summary(result, boot, reference_compute),
                   other.param_convention: _other_convention(other, bootstrap, seed, delta, fixed_E,
                                                             reference_compute)}
    return json_safe(conventions)


def residual_structure(data: FitData, result: fitting.FitResult) -> LackOfFit:
    """The lack-of-fit tests of a fit's residuals (`scaling.laws.checks.lack_of_fit`), made before its
    bootstrap: the intervals are widened by what they find shared between points."""
    return lack_of_fit(data.n, data.d, data.loss, result.law.loss(data.n, data.d), compute=data.compute,
                       budgets=data.budgets, n_params=4 if result.fixed_E is not None else 5)


def _planned_with(result: fitting.FitResult, data: FitData) -> fitting.FitResult:
    """The fit with its law's allocation under the points' compute count, C = c(N) D."""
    return replace(result, law=replace(result.law, flops=data.flops))


OTHER_CONVENTION_RESAMPLES = 200   # enough for the side-by-side interval; the main fit keeps its own


def convention_summary(result: fitting.FitResult, boot: resampling.BootstrapResult | None,
                       reference_compute: float) -> dict:
    """alpha, beta, a and tokens per parameter of one fit, with intervals where bootstrapped."""
    law = result.law
    iv = boot.intervals if boot is not None else {}
    identified = law.has_optimum
    return {"alpha": law.alpha, "beta": law.beta, "a": law.a if identified else None,
            "tokens_per_param": float(law.tokens_per_param(reference_compute)) if identified else None,
            **{f"{k}_ci": list(iv[k]) if k in iv else None for k in ("alpha", "beta", "a", "tokens_per_param")},
            "n_resamples": boot.n_resamples if boot is not None else 0}


def _other_convention(other: FitData, bootstrap: int, seed: int, delta: float, fixed_E: float | None,
                      reference_compute: float) -> dict:
    """The same points fitted with N counted the other way (a smaller bootstrap)."""
    try:
        result = _planned_with(fitting.fit_law(other.n, other.d, other.loss, delta=delta, fixed_E=fixed_E), other)
    except UsageError as exc:
        return {"reason": str(exc)}
    boot = None
    if bootstrap:
        boot = resampling.bootstrap(other.n, other.d, other.loss, seed=seed, delta=delta, fixed_E=fixed_E,
                                    n_resamples=min(bootstrap, OTHER_CONVENTION_RESAMPLES),
                                    reference_compute=reference_compute, full_fit=result, flops=other.flops,
                                    widen=residual_structure(other, result).interval_factor)
    return convention_summary(result, boot, reference_compute)


def isoflop_of(data: FitData, window: float | None = approaches.WINDOW_DECADES) -> approaches.IsoFLOPResult:
    """Approach 2 on the points in their compute measure, grouped by their planned budgets where
    the sweep recorded them: by value where the budgets count compute as the fit does, else as
    labels (a store planned in 6N non-embedding, whose budgets are not iso-compute in real FLOPs)."""
    grouping: dict[str, Any] = {}
    if data.budgets is not None:
        grouping = {"budgets": np.unique(data.budgets)} if data.budgets_in_measure else {"groups": data.budgets}
    return approaches.isoflop(data.n, data.d, data.loss, compute=data.compute, flops=data.flops,
                              window=window, **grouping)


def fitted_points(fit: LawFit) -> FitData:
    """The points of a fit made in this process; ValueError for one read from fit.json (which keeps
    what was computed from them, not the points)."""
    if fit.points is None:
        raise ValueError("this needs the fitted points: refit (a fit read from fit.json does not keep them)")
    return fit.points


def allocation_approaches(fit: LawFit, curves: pd.DataFrame | None, seed: int = 0) -> dict:
    """Hoffmann et al.'s three estimates of a (N_opt ~ C^a), as in their Table 2, and VPNLS.

    Approach 1 needs training curves (only a run store has them); Approach 2 groups the points by
    compute budget; Approach 3 is the parametric fit itself; VPNLS (`scaling.laws.fitting.vpnls`) the law by
    variable projection, bootstrapped with as many resamples as the fit (at most vpnls.RESAMPLES).
    An approach the data cannot support is null in `a`, with its `reason`.
    """
    data = fitted_points(fit)
    envelope = None
    if curves is not None:
        envelope = approaches.envelope(curves[curves.run_id.isin(data.ids)], flops=data.flops).to_dict()
    bounds = fit.ci.stored if fit.ci is not None else {}    # fit.json's lists, as written
    parametric = {"method": "parametric", "a": fit.a, "b": fit.b, "a_ci": bounds.get("a"),
                  "b_ci": bounds.get("b"), "interval": "bootstrap percentile" if fit.ci is not None else None}
    return json_safe({
        "approach_1": envelope,
        "approach_2": isoflop_of(data).to_dict(),
        "approach_3": parametric,
        "vpnls": vpnls.vpnls(data.n, data.d, data.loss, flops=data.flops, seed=seed,
                             resamples=min(fit.options.bootstrap, vpnls.RESAMPLES)).to_dict(),
    })


def with_curves(fit: LawFit, runs: curve_fit.CurveRuns, *, resamples: int = curve_fit.RESAMPLES,
                seed: int = 0) -> LawFit:
    """The fit with its "curves" section: the law fitted to the training curves of the runs it was
    fitted to (and the WSD stable runs they branch from), at the same reference compute and
    compute count, with at most curve_fit.RESAMPLES resamples of whole runs; the final-loss fit's
    a and tokens per parameter (with their intervals) are repeated beside its own."""
    kept = [r for r in runs.schedules if r in set(fitted_points(fit).ids) or r not in runs.final]
    curves = curve_fit.fit_curves(runs.only(kept), resamples=min(int(resamples), curve_fit.RESAMPLES), seed=seed,
                                  reference_compute=fit.reference_compute, flops=fit.law.flops)
    beside = {"a": fit.a, "a_ci": fit.interval("a"), "tokens_per_param": fit.tokens_per_param,
              "tokens_per_param_ci": fit.interval("tokens_per_param")}
    return replace(fit, curves={**curves.to_json(), "final_loss_fit": json_safe(beside)})
