"""A fitted law as one typed object, `LawFit`: what fit.json holds, in memory.

    fit = analysis.fit_data(data, bootstrap=1000)   # scaling.laws.analysis: the whole fit -> LawFit
    fit.law, fit.interval("alpha"), fit.tokens_per_param, fit.limitations
    fit.predict(1e9, 2e10), fit.plan(1e23), fit.summary()

`scaling fit` is exactly: a `scaling.laws.fitting.fitdata` loader, `apply_filters`, `analysis.fit_data`,
`fit_file.write_fit`, `summary.format_summary`. Every later stage (compare, plan, cost, report, the
CLI) takes a `LawFit`; none re-derives what the fit computed.

Pure, no I/O: `to_json` gives fit.json's dict and `from_json` reads one back (checked by
`scaling.laws.results.fit_schema`); the files themselves, fit.json with its side files written as
one unit and read back, are `scaling.laws.results.fit_file` (`write_fit`, `load_fit`). The
format, section by section: docs/fit-json.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any, overload

import numpy as np
import numpy.typing as npt

from scaling.errors import UsageError
from scaling.formats import json_safe, seed_value
from scaling.laws.checks import extrapolation as xp
from scaling.laws.checks.backtest import Backtest
from scaling.laws.checks.combined import NAME as MEDIAN
from scaling.laws.checks.combined import Combined
from scaling.laws.checks.cross_forms import FormEntry, Forms, fitted_form, form_plan
from scaling.laws.checks.holdout import Holdout
from scaling.laws.checks.verdict import Diagnostics
from scaling.laws.fitting import bootstrap as resampling
from scaling.laws.fitting import fit as fitting
from scaling.laws.fitting.fitdata import FitData
from scaling.laws.forms.form import curve_minimum
from scaling.laws.forms.law import Law
from scaling.laws.optimal import allocation
from scaling.laws.repeated import Repeated
from scaling.laws.results.decision import format_decision
from scaling.laws.results.fit_schema import KIND, VERSION, fit_fields
from scaling.laws.results.fit_sections import DataSummary, FitOptions, Intervals
from scaling.laws.results.summary import format_summary

DEFAULT_BOOTSTRAP = 1000
INTERVAL_NAMES = resampling.CI_NAMES   # what a fit has an interval of (`LawFit.interval`)


@dataclass(frozen=True)
class LawFit:
    """A fitted law L = E + A/N^alpha + B/D^beta, everything it was fitted from, and its caveats.

        f = scaling.fit("chinchilla", drop_highest_loss=5)      # or scaling.load("fits/mine")
        f.alpha, f.interval("alpha"), f.verdict, f.reasons        # a constant, its 95% interval, why
        f.plan(1e24).n, f.plan(1e24).intervals.n                  # N_opt at 1e24 FLOPs and its interval
        f.predict(7e10, 1.4e12)                                   # one run's loss; says how far beyond
        f.backtest.farthest.factor, f.backtest.farthest.median_abs_error   # how far it was tested

    What a user reads (docs/api.md): E, A, B, alpha, beta (`law`, a `Law`); a, b (N_opt ~ C^a,
    D_opt ~ C^b) and tokens_per_param at reference_compute; `interval(name)` and `intervals`, the
    95% intervals (`ci`, widened by the lack of fit's design effect); `verdict` and `reasons`
    (`diagnostics`: every check); `backtest` (its `cuts`, each one's factor, median_abs_error and
    `covered`; `farthest`, the farthest made); `holdout`; `forms` (every law form fitted, and
    `median`, the median of the forms, which predicts by default: `form`); `data` (n_points, the
    source, c_range). `predict`, `plan`, `plot` and `summary` use them.

    The attributes are fit.json's sections, and `resampled`: the bootstrap's constants, one row
    per resample (stored beside fit.json in a CSV, `fit_file.samples_path`), from which the plan
    draws intervals at any compute and the report its bootstrap distributions (`bootstrap_samples`).
    `points`, the FitData fitted, is read back from fit.points.csv where it was written beside
    fit.json (`points_file`: what `plot` draws), else None. `optimum` and `boot` (the
    `fit.FitResult` and the `bootstrap.BootstrapResult`) exist only in the process that made the
    fit; a LawFit read from a file has them as None, and nothing downstream needs them.
    """

    law: Law
    seed: int = 0
    data: DataSummary = field(default_factory=DataSummary)
    options: FitOptions = field(default_factory=FitOptions)
    a: float | None = None
    b: float | None = None
    G: float | None = None
    reference_compute: float | None = None
    tokens_per_param: float | None = None        # D_opt / N_opt at reference_compute
    ci: Intervals | None = None
    objective: float | None = None
    n_starts_at_optimum: int | None = None
    residual_rms: float | None = None
    evidence: tuple = ()
    limitations: tuple = ()
    approaches: dict | None = None
    kaplan: dict | None = None
    diagnostics: Diagnostics | None = None
    param_conventions: dict | None = None    # the fit with N counted each way, where both are known
    repeated: Repeated | None = None         # the data-constrained fit, where runs repeat data
    lack_of_fit: dict | None = None          # the F-tests of residual structure (scaling.laws.checks.lack_of_fit)
    curves: dict | None = None               # the law fitted to the training curves (scaling fit --curves)
    holdout: Holdout | None = None           # the refit without the top 20% by compute (scaling.laws.checks.holdout)
    backtest: Backtest | None = None         # leave-future-out cuts and the rule beyond the data (checks.backtest)
    form: str = "chinchilla"                 # what predict and plan's loss use (--form); scaling.fit's default: median
    forms: Forms | None = None               # every form fitted beside this one (checks.cross_forms)
    resampled: np.ndarray | None = field(default=None, repr=False, compare=False)  # (R, 5): E, A, B, alpha, beta
    points: FitData | None = field(default=None, repr=False, compare=False)
    optimum: fitting.FitResult | None = field(default=None, repr=False, compare=False)
    boot: resampling.BootstrapResult | None = field(default=None, repr=False, compare=False)

    def optimum_at(self, compute: npt.ArrayLike, seed: int = 0) -> allocation.OptimumIntervals | None:
        """Intervals of N_opt, D_opt, tokens per parameter and the predicted loss of `plan(compute)`
        (None without bootstrap samples)."""
        return self.plan(compute, seed).intervals

    @property
    def predictor(self) -> str:
        """The one law that predicts and plans, in words: the fitted form's law (beyond the data its
        backtest's), another form's (`--form`), or the median of the forms as one surface ("" for a
        law given rather than fitted, as `scaling.plan` makes of a published one)."""
        if (median := self.median) is not None:
            return f"the median of the forms ({', '.join(median.members)})"
        return "" if self.data.n_points is None else f"the {self.form} form's law"    # "": a law given, not fitted

    def planning_law(self, compute: float) -> Law:
        """The Chinchilla-form law whose optimum at `compute` is the plan by default: the fitted law
        inside the data; beyond it the backtest's law, which `expected_loss` predicts by there (its
        bias, exp(bias x), is one factor all along a compute curve, so it moves no optimum)."""
        if self.backtest is None or self.backtest.law is None or self._far(compute) <= 0:
            return self.law
        return replace(self.backtest.law, flops=self.law.flops)     # fit.json keeps its constants, not its count

    def _plan_at(self, compute: float, seed: int) -> allocation.Plan:
        """`plan` at one budget: N and D minimise `expected_loss` along the compute curve C = c(N) D
        (closed form for a Chinchilla-form law, `form.curve_minimum` for the median), so `predict`
        at the plan's N and D is the plan's loss and no run on the curve is predicted lower."""
        if (entry := self.form_entry) is not None:
            return form_plan(entry, compute, float(self._far(compute)), level=self.level, seed=seed,
                             flops=self.law.flops)
        if self.median is not None:
            try:
                n, d, _ = curve_minimum(self.expected_loss, compute, self.law.flops)
            except ValueError as exc:
                raise UsageError(f"the median of the forms: {exc}") from None
        else:
            law = self.planning_law(compute)
            for each in dict.fromkeys((self.law, law)):    # the fit itself must identify an allocation too
                if not each.has_optimum:
                    raise UsageError(f"this law has no compute-optimal allocation: alpha {each.alpha:.4g} and beta "
                                     f"{each.beta:.4g} must both be positive")
            if law is not self.law:       # (a flat table's has one that is no model: N 1e183 on D 1e-165)
                allocation.model_optimum(self.law, compute)
            n, d = (float(v) for v in allocation.model_optimum(law, compute))
        return allocation.Plan(compute, n, d, float(self.expected_loss(n, d)),
                               self._plan_intervals(compute, n, d, seed), law=self.predictor, note=self.reach(compute))

    def _plan_intervals(self, compute: float, n: float, d: float, seed: int) -> allocation.OptimumIntervals | None:
        """The plan's intervals: of N, D and tokens per parameter, the fitted law's resamples' spread
        of its optimum, moved to the plan's (the same where the fitted law plans); of the loss,
        `loss_interval` at the plan's N and D. None without bootstrap samples."""
        if self.resampled is None or self.ci is None or not self.law.has_optimum:
            return None
        best = allocation.optimum_intervals(self.law, self.resampled, compute, level=self.ci.level,
                                            noise=self.residual_rms or 0.0, seed=seed, widen=self.ci.widened_by)
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            shift_n, shift_d = n / float(self.law.n_opt(compute)), d / float(self.law.d_opt(compute))
        if not (math.isfinite(shift_n) and math.isfinite(shift_d)):
            shift_n = shift_d = 1.0

        def moved(bounds: tuple, by: float) -> tuple:
            return tuple(float(v) * by for v in bounds)

        loss = self.loss_interval(n, d, seed) or (math.nan, math.nan)
        return replace(best, n=moved(best.n, shift_n), d=moved(best.d, shift_d),
                       tokens_per_param=moved(best.tokens_per_param, shift_d / shift_n), loss=loss)

    def beyond(self, n: npt.ArrayLike, d: npt.ArrayLike) -> float | np.ndarray:
        """How many decades of compute a run of N parameters on D tokens lies beyond the largest
        fitted run (0 inside the data; 10^beyond is its extrapolation factor); broadcasts."""
        return self._far(self.law.flops.per_token(n) * np.asarray(d, dtype=float))

    @overload
    def expected_loss(self, n: float, d: float) -> float: ...
    @overload
    def expected_loss(self, n: npt.ArrayLike, d: npt.ArrayLike) -> float | np.ndarray: ...
    def expected_loss(self, n: npt.ArrayLike, d: npt.ArrayLike) -> float | np.ndarray:
        """The loss predicted for N parameters on D tokens, without an interval (`predict` gives
        one); broadcasts. By default the fitted law: its own inside the fitted compute, beyond it the
        backtest's law moved by the bias the backtest measured; a form chosen by `--form` by its own
        law (`FormEntry.predict`); `form="median"` the median of the forms' (`median`)."""
        if (entry := self.form_entry) is not None:
            center = entry.predict(n, d, self.beyond(n, d), level=self.level, noise=False)[0]
            return float(center) if np.ndim(center) == 0 else center
        if (by_median := self._median_predict(n, d, noise=False)) is not None:
            return by_median[0]
        predicted = self.law.loss(n, d)
        if self.backtest is not None:
            far = self.beyond(n, d)
            moved = (self.backtest.law or self.law).loss(n, d) * np.exp(self.backtest.extrapolation.bias * far)
            predicted = np.where(np.asarray(far) > 0, moved, predicted)
        return float(predicted) if np.ndim(predicted) == 0 else predicted

    @overload
    def _beyond(self, n: npt.ArrayLike, d: npt.ArrayLike, interval: tuple) -> tuple: ...
    @overload
    def _beyond(self, n: npt.ArrayLike, d: npt.ArrayLike, interval: None) -> None: ...
    def _beyond(self, n: npt.ArrayLike, d: npt.ArrayLike, interval: tuple | None) -> tuple | None:
        """A prediction's interval: inside the fitted compute, or without a backtest, as given;
        beyond it, about the backtest's law (the fit's, less the under-trained runs) moved by the
        bias the backtest measured, of the runs' scatter and the error's growth with the distance
        (`extrapolation.Extrapolation`), never narrower than that law's own estimation error
        (`extrapolation.at_least`); broadcasts."""
        if self.backtest is None or interval is None:
            return interval
        far = self.beyond(n, d)
        level = self.ci.level if self.ci is not None else self.backtest.level
        check = self.backtest
        _, lo, hi = check.extrapolation.widen((check.law or self.law).loss(n, d), far, level,
                                              estimation=check.estimation_sd(n, d), dof=check.dof)
        inside = np.asarray(far) <= 0
        lo, hi = np.where(inside, interval[0], lo), np.where(inside, interval[1], hi)
        return (float(lo), float(hi)) if np.ndim(lo) == 0 else (lo, hi)

    def bootstrap_samples(self) -> dict | None:
        """{name: (R,) array} of CI_NAMES over the resamples (`resampled`, at the reference compute),
        spread as `ci` was widened: the distributions behind `ci`; None without bootstrap samples."""
        if self.resampled is None or self.reference_compute is None:
            return None
        with np.errstate(divide="ignore"):          # E, A or B stored as 0 (an underflow): log -inf
            theta = np.column_stack([np.log(self.resampled[:, :3]), self.resampled[:, 3:]])
        samples = resampling.derived_quantities(theta, self.reference_compute, self.law.flops)
        return resampling.spread_samples(samples, self.ci.widened_by if self.ci is not None else 1.0)

    def loss_interval(self, n: npt.ArrayLike, d: npt.ArrayLike, seed: int = 0) -> tuple | None:
        """A prediction interval for the final loss of one run of N parameters on D tokens (None
        without bootstrap samples or where no resample predicts it): the constants' uncertainty
        and the runs' scatter; beyond the data the backtest's rule of the law that predicts (the
        fitted law's, `_beyond`; a form's, `FormEntry.predict`; the median's). None beyond the data
        of a fit whose runs lie on one compute budget: nothing there can test it. Arrays of N, D
        give arrays of bounds (NaN where none)."""
        bounds = self._loss_bounds(n, d, seed_value(seed))
        if bounds is None or not self.one_budget:
            return bounds
        beyond = np.asarray(self.beyond(n, d)) > 0
        if np.ndim(beyond) == 0:
            return None if beyond else bounds
        return tuple(np.where(beyond, math.nan, b) for b in bounds)

    @property
    def one_budget(self) -> bool:
        """Whether every fitted run lies on one compute budget (`FitData.n_budgets`; the verdict's
        n_budgets check): its law cannot be tested beyond it, and gives no interval there."""
        return self.data.n_budgets == 1

    def _loss_bounds(self, n: npt.ArrayLike, d: npt.ArrayLike, seed: int) -> tuple | None:
        """`loss_interval` before the one-budget rule."""
        if (entry := self.form_entry) is not None:
            _, lo, hi = entry.predict(n, d, self.beyond(n, d), level=self.level, noise=True, seed=seed)
            return (float(lo), float(hi)) if np.ndim(lo) == 0 else (lo, hi)
        if self.resampled is None or self.ci is None:     # no bootstrap, no intervals (the median's too, as plan's)
            return None
        if (by_median := self._median_predict(n, d)) is not None:
            return by_median[1:]
        lo, hi = allocation.loss_interval(self.resampled, n, d, level=self.ci.level,
                                          noise=self.residual_rms or 0.0, seed=seed, widen=self.ci.widened_by)
        if np.ndim(lo) == 0 and not (math.isfinite(lo) and math.isfinite(hi)):
            return None
        return self._beyond(n, d, (lo, hi))

    def reach(self, compute: float) -> str:
        """How far beyond the fitted compute `compute` lies, in words, where that matters: past the
        farthest factor the predicting law's backtest reached, or beyond a fit of one budget ("":
        inside the data, or within the tested reach)."""
        factor = 10 ** float(np.max(self._far(compute)))
        if factor <= 1.0:
            return ""
        if self.one_budget:
            return (f"{factor:.3g}x beyond the fitted compute, of a fit whose runs lie on one compute budget: "
                    "untested there, no interval")
        check = self.median_backtest or self.backtest
        tested = None if check is None else check.farthest
        if tested is None:
            return f"{factor:.3g}x beyond the fitted compute, where no backtest cut could test the law"
        if factor > tested.factor * 1.001:
            return f"{factor:.3g}x beyond the fitted compute, past the {tested.factor:g}x its backtest reached"
        return ""

    def interval(self, name: str) -> tuple[float, float] | None:
        """The bootstrap interval (lo, hi) of `name`: a constant (E, A, B, alpha, beta), a, b, G or
        tokens_per_param (at the reference compute); None where there is none (no bootstrap, or
        resamples where it is undefined). The one spelling of an interval, as `intervals` is of all."""
        if name not in INTERVAL_NAMES and (self.ci is None or name not in self.ci.stored):
            raise UsageError(f"no interval named {name!r}; the intervals are of {', '.join(INTERVAL_NAMES)}")
        return self.ci.interval(name) if self.ci is not None else None

    # The notebook's view (docs/api.md): the constants, verdict and intervals by name, a
    # prediction, a plan and the CLI's summary, each a call away from `scaling.fit`.

    E = property(lambda self: self.law.E, doc="the irreducible loss E")
    A = property(lambda self: self.law.A, doc="the parameter term's coefficient A")
    B = property(lambda self: self.law.B, doc="the data term's coefficient B")
    alpha = property(lambda self: self.law.alpha, doc="the parameter exponent alpha")
    beta = property(lambda self: self.law.beta, doc="the data exponent beta")

    @property
    def verdict(self) -> str | None:
        """"trustworthy", "use with caution" or "not identified" (docs/diagnostics.md); None for a
        fit.json written before the diagnostics."""
        return None if self.diagnostics is None else self.diagnostics.verdict

    @property
    def form_entry(self) -> FormEntry | None:
        """The form `--form` chose where it is not the Chinchilla-form law the fit's constants,
        diagnostics and verdict are of (tied, kaplan, farseer, or fixed-E as a cross-check's):
        `predict`, `plan` and the loss intervals are then its. None for the default."""
        if self.forms is None or self.form == fitted_form(self.options.fixed_E):
            return None
        return self.forms.entry(self.form)

    @property
    def median(self) -> Combined | None:
        """The median of the forms where it predicts (`--form median`; `checks.combined`): the loss
        `predict`, `plan` and `validate` give and its interval are then its, inside the data too (its
        rule's interval is the runs' scatter there), beyond it never narrower than the backtest law's
        own estimation error; `plan` is its own optimum along the compute curve."""
        return self.forms.combined if self.forms is not None and self.form == MEDIAN else None

    @property
    def median_backtest(self) -> Backtest | None:
        """The median of the forms' backtest where it predicts (`Combined.as_backtest`: its cuts, its
        intervals under its own rule), what the verdict judges; None where it does not."""
        if self.median is None or self.backtest is None:
            return None
        return self.median.as_backtest(self.backtest)

    def _median_predict(self, n: npt.ArrayLike, d: npt.ArrayLike, *, noise: bool = True) -> tuple | None:
        """(center, lo, hi) of the median of the forms for N, D where it predicts (with
        a run's scatter where `noise`, else the expected loss's); None where it did not."""
        if self.median is None or self.forms is None:
            return None
        return self.median.predict(self.forms.entries, n, d, self.beyond(n, d), floor=self.backtest, level=self.level,
                                   noise=noise)

    @property
    def level(self) -> float:
        """The level of the fit's intervals (0.95 without a bootstrap)."""
        return self.ci.level if self.ci is not None else 0.95

    def _far(self, compute: npt.ArrayLike) -> float | np.ndarray:
        """Decades of compute `compute` lies beyond the largest fitted run (0 inside the data); broadcasts."""
        if self.data.c_range is None:
            return 0.0 if np.ndim(compute) == 0 else np.zeros(np.shape(compute))
        return xp.distance(compute, float(self.data.c_range[1]))

    @property
    def reasons(self) -> tuple:
        """Why the verdict is what it is, one sentence each (empty for a trustworthy fit)."""
        return () if self.diagnostics is None else tuple(self.diagnostics.reasons)

    @property
    def intervals(self) -> dict:
        """{name: (lo, hi) or None} for every name `interval` knows: the bootstrap intervals of the
        constants, a, b, G and tokens per parameter at the reference compute; None where there is
        none (all None without bootstrap)."""
        names = dict.fromkeys((*INTERVAL_NAMES, *(() if self.ci is None else self.ci.stored)))
        return {name: self.interval(name) for name in names}

    def predict(self, n: npt.ArrayLike, d: npt.ArrayLike, seed: int = 0) -> allocation.Prediction:
        """The loss of one run of N parameters trained on D tokens (`expected_loss`: by default the
        law that predicts, `predictor`), with a 95% prediction interval that holds the constants' uncertainty
        and the runs' scatter (`loss_interval`), and how far beyond the fitted compute it lies
        (`beyond`, a factor; 1.0 inside the data). n and d broadcast as numpy's: arrays give arrays
        of losses and of bounds.

            q = f.predict(1e9, 2e10)    # Prediction(N=1e+09, D=2e+10: loss 2.5303 [...] (95% prediction interval))
            q.loss, q.interval, q.beyond"""
        n, d = allocation.check_sizes(n, "N (parameters)"), allocation.check_sizes(d, "D (tokens)")
        seed = seed_value(seed)
        if np.ndim(n) or np.ndim(d):
            try:
                n, d = np.broadcast_arrays(n, d)
            except ValueError:
                raise UsageError(f"N and D do not broadcast together: shapes {np.shape(n)} and {np.shape(d)}") from None
        interval = self.loss_interval(n, d, seed)
        beyond = 10 ** self.beyond(n, d)
        return allocation.Prediction(n, d, self.expected_loss(n, d), interval,
                                     None if interval is None or self.ci is None else self.ci.level,
                                     beyond=float(beyond) if np.ndim(beyond) == 0 else beyond, law=self.predictor,
                                     note=self.reach(self.law.flops.per_token(n) * np.asarray(d, dtype=float)))

    def plan(self, compute: npt.ArrayLike, seed: int = 0) -> allocation.Plan:
        """The compute-optimal N, D at `compute` FLOPs and the loss they reach, with 95% intervals;
        an array of budgets gives arrays. One law answers: N and D are the optimum of the loss
        `predict` gives, along the compute curve (`_plan_at`), so `predict(p.n, p.d)` is the plan's
        loss; `p.law` names that law. UsageError for a law with no optimum (alpha or beta not
        positive, or a median that keeps falling to an end of the curve).

            p = f.plan(1e24)
            p.n, p.d, p.tokens_per_param, p.loss    # floats; p.intervals.n, .d, .tokens_per_param, .loss: (lo, hi)"""
        c, seed = allocation.check_sizes(compute, "compute", unit=" of FLOPs"), seed_value(seed)
        if np.ndim(c) == 0:
            return self._plan_at(float(c), seed)
        return allocation.stacked_plans([self._plan_at(float(v), seed) for v in np.ravel(c)], np.shape(c))

    def summary(self, verbose: bool = False) -> str:
        """What `scaling fit` prints: the decision first, in about 15 lines (`format_decision`: the
        verdict and why, the law that predicts and plans, the allocation with its intervals, how far
        it was tested, what it predicts 3x and 10x beyond its runs); with `verbose`, everything
        (`format_summary`: every constant, backtest cut, form and check)."""
        return format_summary(self) if verbose else format_decision(self)

    def __repr__(self) -> str:
        law = self.law
        head = (f"LawFit(L = {law.E:.4g} + {law.A:.4g}/N^{law.alpha:.4f} + {law.B:.4g}/D^{law.beta:.4f}"
                + (f"; {self.data.n_points} points" if self.data.n_points is not None else ""))
        tail = (f"a = {'undefined' if self.a is None else format(self.a, '.4f')}"
                + ("" if self.ci is None else f", {100 * self.ci.level:g}% intervals from {self.ci.n_resamples} "
                   "resamples") + (f"; predicts and plans by {self.predictor}" if self.predictor else "")
                + f"; verdict: {self.verdict or 'none recorded'})")
        return f"{head};\n       {tail}"

    def to_json(self) -> dict:
        """fit.json's dict (strict JSON types)."""
        return {
            "kind": KIND, "version": VERSION, "seed": self.seed,
            "data": self.data.to_json(), "options": self.options.to_json(),
            "params": {k: json_safe(v) for k, v in self.law.to_dict().items()},
            "allocation": {"a": self.a, "b": self.b, "G": self.G},
            "reference_compute": self.reference_compute,
            "tokens_per_param_at_reference": self.tokens_per_param,
            "compute": json_safe(self.law.flops.to_dict()),
            "ci": None if self.ci is None else self.ci.to_json(),
            "objective": self.objective, "n_starts_at_optimum": self.n_starts_at_optimum,
            "residual_rms": self.residual_rms,
            "evidence": list(self.evidence), "limitations": list(self.limitations),
            "approaches": self.approaches, "kaplan": self.kaplan,
            **({} if self.diagnostics is None else self.diagnostics.to_json()),
            **({} if self.param_conventions is None else {"param_conventions": self.param_conventions}),
            **({} if self.repeated is None else {"repeated": self.repeated.to_json()}),
            **({} if self.lack_of_fit is None else {"lack_of_fit": self.lack_of_fit}),
            **({} if self.curves is None else {"curves": self.curves}),
            **({} if self.holdout is None else {"holdout": self.holdout.to_json()}),
            **({} if self.backtest is None else {"backtest": json_safe(self.backtest.to_json())}),
            "form": self.form, **({} if self.forms is None else {"forms": json_safe(self.forms.to_json())}),
        }

    @classmethod
    def from_json(cls, obj: dict[str, Any], where: str = "fit.json") -> LawFit:
        """The LawFit of a fit.json dict; UsageError naming `where` and the bad section
        (`fit_schema.check_fit`). Sections an older file lacks read as none."""
        return cls(**fit_fields(obj, where))
