"""Leave-future-out backtest: how far beyond its own runs has this law been shown to predict?

    check = backtest(data, full_fit)            # refit below each cut, predict the top budget's runs
    check.cuts[2].median_abs_error, check.extrapolation.growth
    print(format_backtest(check))

A law exists to predict a run larger than any in the sweep, so every fit is judged the way it will
be used. For each extrapolation factor f in FACTORS the runs are cut at C_top / f (`future_split`:
by planned budget where the runs have budgets, else by compute), the law is refitted on the runs
below the cut by the same Huber/L-BFGS fit, and it predicts the runs of the top budget: runs f
times beyond the compute it saw. The errors at each cut say how far out the law has been tested
and with what error; their growth with the distance (in decades of compute) is what widens every
interval beyond the data (`Extrapolation`), learned from this table's own cuts and shrunk towards
what the public tables' development half showed (bench/bench_backtest.py) where the table has few.

Beyond the data a prediction is made by the law refitted without the under-trained runs
(`UNDERTRAINED_TPP`), moved by the bias its backtest measured (as far as the cuts' refits measured
it precisely, `table_bias`; else the public tables' pessimism where the runs are under-trained on
the whole, none where not), with an interval of the runs' scatter and the error's growth with
distance, and of an unknown bias where E sits far below the runs (`rule_beyond`), never narrower
than that law's own estimation error (`floor_covariance`, `extrapolation.at_least`). Each cut's
prediction and interval are the ones the fit would have made from the runs below the cut: its
refit, moved and widened by the rule learned from that refit's own inner cuts (nested: no cut
sees the runs it is judged on). Pure: arrays in, numbers out.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Protocol, TypeVar

import numpy as np
import numpy.typing as npt

from scaling.errors import UsageError
from scaling.laws.checks.extrapolation import LEVEL, Extrapolation, rule_beyond
from scaling.laws.checks.precision import dof_left, estimation_sd, floor_covariance, law_covariance, prediction_sd
from scaling.laws.fitting import fit as fitting
from scaling.laws.fitting.fitdata import FitData
from scaling.laws.fitting.objective import EPrior
from scaling.laws.forms.form import FormLaw
from scaling.laws.forms.law import Law

FACTORS = (2.0, 3.0, 10.0, 30.0)
TOP_BAND = 2.0            # without budgets, the "top budget" is the runs within 2x of the third largest compute
TOP_RUNS = 3
MIN_TRAIN_RUNS = 8        # fewer runs below a cut cannot be trusted to place five constants
MIN_TRAIN_SIZES = 3
# Runs with fewer tokens per parameter are under-trained for their size (a long warmup, an early
# checkpoint, a model far too large for its budget): the law's form does not describe them, and on
# the public tables they drag E to its bound or above the larger runs' losses. They stay in the fit
# (its constants are as they were), but the law that predicts beyond the data and the backtest's
# refits leave them out (`trained`): on the public tables such runs drove E to its bound (Porian et
# al.'s long-warmup configurations) or above the larger runs' losses (docs/fitting.md, "Predictions
# beyond the data").
UNDERTRAINED_TPP = 5.0
# Starts for a cut's refit: the full fit's distinct end points and this coarse grid (432 starts),
# in place of Hoffmann's 4,500: a cut's optimum can lie far from the full fit's (E moves), so its
# end points alone are not enough; the coarse grid finds the basin, the polish the optimum.
COARSE_GRID = {"log_e": (-1.0, 0.0, 1.0), "log_a": (0.0, 5.0, 10.0, 20.0), "log_b": (0.0, 5.0, 10.0, 20.0),
               "alpha": (0.3, 0.6, 1.2), "beta": (0.3, 0.6, 1.2)}


@dataclass(frozen=True)
class Cut:
    """One leave-future-out cut: the law refitted on the runs below C_top / factor predicts the top
    budget's runs. errors: (predicted - observed) / observed per predicted run, the prediction as
    the fit makes it beyond its data (moved by the bias of the refit's own backtest); raw_errors:
    the refitted law's own; distances: how many decades of compute each lies beyond the refit's
    largest; covered: how many fell inside their interval (None without one); reason: why the cut
    could not be made (then no rows); prediction_sd: the sd of each run's log prediction owed to
    estimating the law from the cut's runs alone (`with_precision`; empty where not measured);
    n_sizes: the distinct model sizes among the runs below the cut (0 where not recorded)."""

    factor: float
    n_train: int
    n_test: int
    train_max_compute: float | None = None
    test_compute: float | None = None
    errors: tuple = ()
    distances: tuple = ()
    half_widths: tuple = ()        # each interval's half-width relative to its center
    covered: int | None = None
    law: Law | None = None
    reason: str | None = None
    raw_errors: tuple = ()
    prediction_sd: tuple = ()
    n_sizes: int = 0

    @property
    def made(self) -> bool:
        return self.reason is None

    @property
    def fewest(self) -> bool:
        """Whether the runs below the cut are the fewest a cut takes (MIN_TRAIN_RUNS runs or
        MIN_TRAIN_SIZES sizes): its refit has few degrees of freedom and errs far out by its own
        estimation error (`extrapolation.at_least`)."""
        return self.made and (self.n_train <= MIN_TRAIN_RUNS or 0 < self.n_sizes <= MIN_TRAIN_SIZES)

    def _abs(self) -> np.ndarray:
        return np.abs(np.asarray(self.errors, dtype=float))

    @property
    def median_abs_error(self) -> float | None:
        return float(np.median(self._abs())) if self.errors else None

    @property
    def worst_abs_error(self) -> float | None:
        return float(np.max(self._abs())) if self.errors else None

    @property
    def bias(self) -> float | None:
        """The median signed error: positive when the law predicted losses higher than observed."""
        return float(np.median(self.errors)) if self.errors else None

    @property
    def log_residuals(self) -> np.ndarray:
        """log(observed / predicted) of each run, as the refitted law itself predicted it."""
        return -np.log1p(np.asarray(self.raw_errors or self.errors, dtype=float))

    def to_json(self) -> dict:
        out = {"factor": self.factor, "n_train": self.n_train, "n_test": self.n_test,
               "train_max_compute": self.train_max_compute, "test_compute": self.test_compute,
               "median_abs_error": self.median_abs_error, "worst_abs_error": self.worst_abs_error,
               "bias": self.bias, "covered": self.covered, "reason": self.reason,
               "median_half_width": float(np.median(self.half_widths)) if self.half_widths else None,
               "errors": list(self.errors), "raw_errors": list(self.raw_errors), "distances": list(self.distances),
               "half_widths": list(self.half_widths), "prediction_sd": list(self.prediction_sd),
               "n_sizes": self.n_sizes, "params": None if self.law is None else self.law.to_dict()}
        return out

    @classmethod
    def from_json(cls, obj: dict) -> Cut:
        params = obj.get("params")
        return cls(float(obj["factor"]), int(obj["n_train"]), int(obj["n_test"]), obj.get("train_max_compute"),
                   obj.get("test_compute"), tuple(obj.get("errors") or ()), tuple(obj.get("distances") or ()),
                   tuple(obj.get("half_widths") or ()), obj.get("covered"),
                   None if params is None else Law.from_dict(params), obj.get("reason"),
                   tuple(obj.get("raw_errors") or ()), tuple(obj.get("prediction_sd") or ()),
                   int(obj.get("n_sizes") or 0))


@dataclass(frozen=True)
class Backtest:
    """The leave-future-out cuts of one fit, and the extrapolation rule learned from them.

        f.backtest.farthest.factor, f.backtest.farthest.median_abs_error   # e.g. 30.0, 0.018
        [(c.factor, c.reason) for c in f.backtest.cuts if not c.made]      # cuts not made, and why

    `cuts`: every factor tried (2x, 3x, 10x, 30x), a `Cut` each; `made`: those the runs allowed;
    `farthest`: the farthest made (None: the law was not tested beyond its data); `extrapolation`:
    the rule beyond the data (bias and widening per decade of compute); `law`: the law that
    predicts there (refitted to the runs of at least `min_tokens_per_param` tokens per parameter).
    """

    cuts: tuple
    extrapolation: Extrapolation
    level: float = LEVEL
    by: str = "budget"                       # how the top runs were chosen: "budget" or "compute"
    law: Law | None = None                   # the law that predicts beyond the data (fitted to `n_trained` runs)
    n_trained: int = 0                       # runs with >= UNDERTRAINED_TPP tokens per parameter
    min_tokens_per_param: float = UNDERTRAINED_TPP
    undertrained: tuple = ()                 # the cuts' median errors with the under-trained runs kept (or None)
    covariance: tuple = ()                   # `law`'s free constants' covariance (`floor_covariance`; () not measured)
    n_sizes: int = 0                         # distinct model sizes among the `n_trained` runs

    @property
    def dof(self) -> float:
        """The degrees of freedom `law`'s fit left: its runs less its free constants."""
        return dof_left(self.n_trained, self.covariance)

    def estimation_sd(self, n: npt.ArrayLike, d: npt.ArrayLike) -> np.ndarray:
        """The sd of `law`'s log prediction at (n, d) owed to estimating it from its runs
        (`precision.estimation_sd`); 0 where not measured."""
        return estimation_sd(self.law, self.covariance, n, d)

    @property
    def made(self) -> tuple:
        """The cuts that were made and predicted at least one run."""
        return tuple(c for c in self.cuts if c.made and c.errors)

    @property
    def farthest(self) -> Cut | None:
        """The cut at the largest factor the data allow (None when no cut could be made)."""
        return farthest(self.cuts)

    def to_json(self) -> dict:
        return {"level": self.level, "by": self.by,
                "extrapolation": self.extrapolation.to_json(), "cuts": [c.to_json() for c in self.cuts],
                "law": None if self.law is None else self.law.to_dict(), "n_trained": self.n_trained,
                "min_tokens_per_param": self.min_tokens_per_param,
                "undertrained_kept": [{"factor": c.factor, "median_abs_error": e}
                                      for c, e in zip(self.cuts, self.undertrained)],
                "covariance": [list(row) for row in self.covariance], "n_sizes": self.n_sizes}

    @classmethod
    def from_json(cls, obj: dict) -> Backtest:
        law = obj.get("law")
        return cls(tuple(Cut.from_json(c) for c in obj["cuts"]),
                   Extrapolation.from_json(obj["extrapolation"]), float(obj.get("level", LEVEL)),
                   str(obj.get("by", "budget")), None if law is None else Law.from_dict(law),
                   int(obj.get("n_trained", 0)), float(obj.get("min_tokens_per_param", UNDERTRAINED_TPP)),
                   tuple(u.get("median_abs_error") for u in obj.get("undertrained_kept") or ()),
                   tuple(tuple(float(v) for v in row) for row in obj.get("covariance") or ()),
                   int(obj.get("n_sizes") or 0))


def farthest(cuts: Iterable[Cut]) -> Cut | None:
    """The made cut (one that predicted at least one run) at the largest factor; None where none was made."""
    return max((c for c in cuts if c.made and c.errors), key=lambda c: c.factor, default=None)


def future_split(compute: npt.ArrayLike, budgets: npt.ArrayLike | None, factor: float) -> tuple[np.ndarray,
                 np.ndarray, float]:
    """(train indices, test indices, C_top): the test runs are the top budget's (the runs within
    TOP_BAND of the TOP_RUNS-th largest compute where there are no budgets); the train runs those whose budget
    (compute) is at most C_top / factor, C_top the top budget (the smallest compute of the top band)."""
    c = np.asarray(compute, dtype=float)
    if budgets is not None:
        b = np.asarray(budgets, dtype=float)
        top = float(b.max())
        test = np.flatnonzero(b >= top * (1 - 1e-9))
        train = np.flatnonzero(b <= top / factor * (1 + 1e-9))
    else:
        third = np.sort(c)[::-1][min(TOP_RUNS, c.size) - 1]
        test = np.flatnonzero(c >= third / TOP_BAND)
        top = float(c[test].min())
        train = np.flatnonzero(c <= top / factor * (1 + 1e-9))
    return train, test, top


def trained(data: FitData, idx: npt.ArrayLike, min_tpp: float = UNDERTRAINED_TPP) -> np.ndarray:
    """The indices among `idx` of runs with at least `min_tpp` tokens per parameter."""
    idx = np.asarray(idx, dtype=int)
    return idx[data.d[idx] / data.n[idx] >= min_tpp]


def median_tpp(data: FitData, idx: npt.ArrayLike) -> float:
    """The median tokens per parameter of the runs `idx`: how well trained a table is on the whole."""
    idx = np.asarray(idx, dtype=int)
    return float(np.median(data.d[idx] / data.n[idx]))


def too_small(data: FitData, train: np.ndarray) -> str | None:
    sizes = np.unique(data.n[train]).size
    if train.size < MIN_TRAIN_RUNS or sizes < MIN_TRAIN_SIZES or np.unique(data.d[train]).size < 2:
        return (f"too few runs: {train.size} run(s) at {sizes} size(s) below the cut (at least "
                f"{MIN_TRAIN_RUNS} runs at {MIN_TRAIN_SIZES} sizes are needed)")
    return None


def one_budget(data: FitData, train: np.ndarray) -> str | None:
    """Why a cut of runs on one compute budget is not made: its refit can place the optimum at that
    budget but not how it moves with compute, so its errors beyond it say nothing of the law's (in
    simulation such cuts' calibration factors of 1.9-6.1 gave intervals 4-16x the error)."""
    if np.unique(data.budget_levels()[train]).size >= 2:
        return None
    return "the runs below the cut lie on one compute budget (at least two are needed to test scaling beyond them)"


def refit(n: np.ndarray, d: np.ndarray, loss: np.ndarray, *, delta: float, fixed_E: float | None,
          starts: np.ndarray | None = None, coarse: bool = True, E_prior: EPrior | None = None) -> fitting.FitResult:
    """The law refitted to a cut's runs from `starts` (end points of a fit of more runs) and, with
    `coarse`, the coarse grid too (a nested cut starts from its parent cut's end points alone)."""
    grid = [fitting.grid_from_axes(COARSE_GRID)] if coarse or starts is None else []
    if starts is not None:
        grid.append(np.array(starts, dtype=float, ndmin=2))
    return fitting.fit_law(n, d, loss, delta=delta, grid=np.vstack(grid), fixed_E=fixed_E, n_polish=2, E_prior=E_prior,
                            grid_maxiter=fitting.GRID_MAXITER)


def fit_cut(data: FitData, factor: float, *, delta: float, fixed_E: float | None, starts: np.ndarray | None = None,
            coarse: bool = True, min_tpp: float = UNDERTRAINED_TPP,
            E_prior: EPrior | None = None) -> tuple[Cut, fitting.FitResult | None]:
    """One cut without intervals, and its refit (None where the cut cannot be made): the refit,
    on the runs below the cut with at least `min_tpp` tokens per parameter, and its errors on all
    the top budget's runs."""
    return cut_with(data, factor, lambda n, d, loss: refit(n, d, loss, delta=delta, fixed_E=fixed_E, starts=starts,
                                                           coarse=coarse, E_prior=E_prior), min_tpp)


class Refitted(Protocol):
    """What a cut's refit returns: a fit whose law predicts (a `fitting.FitResult`, a form's `FormFit`)."""

    @property
    def law(self) -> FormLaw: ...


R = TypeVar("R", bound=Refitted)


def cut_with(data: FitData, factor: float, refit_runs: Callable[[np.ndarray, np.ndarray, np.ndarray], R],
             min_tpp: float = UNDERTRAINED_TPP) -> tuple[Cut, R | None]:
    """`fit_cut` for any law form: `refit_runs(n, d, loss)` fits the runs below the cut (a
    UsageError from it becomes the cut's reason). The cut keeps the refit's law where it is a
    Chinchilla-form `Law` (backtest_verdict.E_drift_check reads it), else only its errors."""
    train, test, top = future_split(data.compute, data.budgets, factor)
    train = trained(data, train, min_tpp)
    cut = Cut(float(factor), int(train.size), int(test.size), test_compute=top,
              n_sizes=int(np.unique(data.n[train]).size))
    reason = too_small(data, train) or one_budget(data, train)
    if reason is None:
        try:
            result = refit_runs(data.n[train], data.d[train], data.loss[train])
        except UsageError as exc:
            reason = f"the runs below the cut do not bound the law: {exc}"
    if reason is not None:
        return replace(cut, reason=reason), None
    law = result.law
    cmax = float(data.compute[train].max())
    predicted = law.loss(data.n[test], data.d[test])
    return replace(cut, train_max_compute=cmax, law=law if isinstance(law, Law) else None,
                   errors=tuple(float(v) for v in (predicted - data.loss[test]) / data.loss[test]),
                   distances=tuple(float(v) for v in np.log10(data.compute[test] / cmax))), result


def cut_errors(data: FitData, factor: float, *, delta: float, fixed_E: float | None,
               starts: np.ndarray | None = None) -> Cut:
    """One cut without intervals (`fit_cut`)."""
    return fit_cut(data, factor, delta=delta, fixed_E=fixed_E, starts=starts)[0]


def with_precision(data: FitData, cut: Cut, result: fitting.FitResult | None, *,
                   fixed_E: float | None) -> Cut:
    """`cut` with the sd of each predicted run's log loss owed to estimating the law from the runs
    below the cut alone (`law_covariance`, `prediction_sd`). On simulated sweeps it is about the
    spread of the refits over the scatter's draws (tests). A refit of few runs at few sizes
    predicts far beyond them with an error of its own: that error is the refit's, not the law's,
    and says nothing of how the full fit will err. inf where the runs cannot separate the
    constants."""
    if result is None or not cut.made:
        return cut
    train, test, _ = future_split(data.compute, data.budgets, cut.factor)
    train = trained(data, train)
    cov = law_covariance(result, data.n[train], data.d[train], fixed_E=fixed_E)
    if cov is None:
        return replace(cut, prediction_sd=(math.inf,) * test.size)
    return replace(cut, prediction_sd=tuple(float(v) for v in prediction_sd(result.law, cov, data.n[test],
                                                                            data.d[test])))


def _interval_cut(data: FitData, cut: Cut, result: fitting.FitResult, *, delta: float, fixed_E: float | None,
                  level: float, tokens_per_param: float) -> Cut:
    """`cut` with each predicted run as the fit would have predicted it from the runs below the
    cut (a median of `tokens_per_param`): its refit (`result`) moved and widened by the rule
    learned from the refit's own inner backtest (nested: no cut sees the runs it is judged on)."""
    train, test, _ = future_split(data.compute, data.budgets, cut.factor)
    sub = data.take(trained(data, train))
    cov = floor_covariance(result, sub.n, sub.d, fixed_E=fixed_E)
    estimation, dof = estimation_sd(result.law, cov, data.n[test], data.d[test]), dof_left(len(sub), cov)
    inner = [with_precision(sub, *fit_cut(sub, f, delta=delta, fixed_E=fixed_E, starts=result.end_points,
                                          coarse=False, E_prior=result.E_prior), fixed_E=fixed_E) for f in FACTORS]
    rule = rule_beyond(inner, tokens_per_param=tokens_per_param, E=None if fixed_E is not None else result.law.E,
                       lowest_loss=float(sub.loss.min()), noise=result.residual_rms)
    errors, covered, widths = [], 0, []
    for j, i in enumerate(test):
        center, lo, hi = rule.widen(float(result.law.loss(data.n[i], data.d[i])), cut.distances[j], level,
                                    estimation=estimation[j], dof=dof)
        errors.append((center - data.loss[i]) / data.loss[i])
        covered += int(lo <= data.loss[i] <= hi)
        widths.append((hi - lo) / 2 / center)
    return replace(cut, errors=tuple(float(e) for e in errors), raw_errors=cut.errors, covered=covered,
                   half_widths=tuple(float(w) for w in widths))


def backtest(data: FitData, full_fit: fitting.FitResult, *, delta: float = fitting.DEFAULT_DELTA,
             fixed_E: float | None = None, level: float = LEVEL,
             factors: Iterable[float] = FACTORS) -> Backtest:
    """The leave-future-out cuts at each of `factors` (see the module's docstring), each with its
    interval's coverage, and the extrapolation rule learned from them for the full fit. The cuts
    refit and predict the runs with at least UNDERTRAINED_TPP tokens per parameter (all the runs
    where fewer than MIN_TRAIN_RUNS at MIN_TRAIN_SIZES sizes have that many): the runs the law
    beyond the data is fitted to and meant to predict."""
    runs = trained(data, np.arange(len(data)))
    base = data if runs.size == len(data) or too_small(data, runs) else data.take(runs)
    cuts, kept = [], []
    made: dict[bytes, tuple[Cut, float | None]] = {}     # the cuts made so far, by the runs below them
    for f in factors:
        below = future_split(data.compute, data.budgets, f)[0]     # all the runs below, the under-trained too
        if (same := made.get(below.tobytes())) is not None:
            # The runs below this cut are an earlier cut's (the 2x and 3x cuts of budgets 3x apart): its
            # refits, nested cuts and errors again, a fifth of the backtest's cost made twice.
            cuts.append(replace(same[0], factor=float(f)))
            kept.append(same[1])
            continue
        cut, result = fit_cut(base, f, delta=delta, fixed_E=fixed_E, starts=full_fit.end_points,
                              E_prior=full_fit.E_prior)
        if result is not None:
            cut = _interval_cut(base, with_precision(base, cut, result, fixed_E=fixed_E), result, delta=delta,
                                fixed_E=fixed_E, level=level, tokens_per_param=median_tpp(data, below))
        cuts.append(cut)
        # The cut of all the runs, the under-trained kept (errors only): what leaving them out changed.
        kept.append(fit_cut(data, f, delta=delta, fixed_E=fixed_E, starts=full_fit.end_points, coarse=False,
                            min_tpp=0.0, E_prior=full_fit.E_prior)[0].median_abs_error)
        made[below.tobytes()] = cuts[-1], kept[-1]
    best = full_fit
    if base is not data:
        try:
            best = refit(base.n, base.d, base.loss, delta=delta, fixed_E=fixed_E, starts=full_fit.end_points,
                         E_prior=full_fit.E_prior)
        except UsageError:
            base = data                       # the trained runs do not bound the law: the fit's own law
    rule = rule_beyond(cuts, tokens_per_param=median_tpp(data, np.arange(len(data))),
                       E=None if fixed_E is not None else best.law.E, lowest_loss=float(base.loss.min()),
                       noise=best.residual_rms)
    cov = floor_covariance(best, base.n, base.d, fixed_E=fixed_E)
    return Backtest(tuple(cuts), rule, level,
                    "budget" if data.budgets is not None else "compute", replace(best.law, flops=full_fit.law.flops),
                    len(base), UNDERTRAINED_TPP, tuple(kept),
                    () if cov is None else tuple(tuple(float(v) for v in row) for row in cov),
                    int(np.unique(base.n).size))
