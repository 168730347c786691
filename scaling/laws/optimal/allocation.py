"""How to split a compute budget C = 6 N D between parameters N and tokens D.

Pure functions, no I/O. Where a law plans for a family whose tokens cost c(N) = 6 kappa N^gamma
FLOPs (`Law.flops`, `scaling.train.compute`), every allocation below spends C under that
constraint, C = c(N) D, and with kappa = gamma = 1 it is C = 6 N D. Four allocations:

* `plan(law, C)`: the law's closed-form optimum (`Law.n_opt`, `Law.d_opt`, Hoffmann et al.
  2022, eq. 4) with its predicted loss.
* `numerical_optimum(law, C)`: the same optimum found a second, independent way, by minimising
  L(N, C / (6 N)) over log N with a bounded scalar minimiser. It shares nothing with the closed
  form but the law itself, so the two agreeing checks both.
* `rule_of_thumb(C, tokens_per_param=20)`: D = 20 N, the rule read off Hoffmann et al.'s
  Table 3 (70e9 parameters, 1.4e12 tokens): N = sqrt(C / (6 * 20)).
* `kaplan_allocation(C)`: Kaplan et al. 2020 (arXiv:2001.08361), Table 6 / Figure 14:
  N_opt = 1.3e9 * (C / 1 PF-day)^0.73 non-embedding parameters, with 1 PF-day = 1e15 FLOP/s
  * 86,400 s = 8.64e19 FLOP, and here D = C / (6 N).

  Kaplan's C is C_min, their "minimum compute" (non-embedding, adjusted to training at the
  critical batch size), not 6 N D of an actual run; their own Table 6 gives
  D_opt = 2e10 * C_min^0.27 tokens, about 1.8x what C / (6 N) gives. We use C / (6 N) so all
  allocations spend the same C, and count N as non-embedding parameters as Kaplan did.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import SupportsFloat, cast

import numpy as np
import numpy.typing as npt
from scipy.optimize import minimize_scalar

from scaling.errors import UsageError
from scaling.formats import sci
from scaling.laws.fitting.bootstrap import spread
from scaling.laws.fitting.fitdata import MAX_COUNT
from scaling.laws.forms.allocating import AllocatingLaw
from scaling.laws.forms.law import Law
from scaling.reading import excerpt
from scaling.train.compute import FlopsPerToken, expected_optimum

PF_DAY_FLOP = 1e15 * 86_400          # 8.64e19 FLOP
KAPLAN_N_COEFF = 1.3e9               # non-embedding parameters at C_min = 1 PF-day
KAPLAN_N_EXPONENT = 0.73
RULE_TOKENS_PER_PARAM = 20.0


@dataclass(frozen=True)
class Allocation:
    """One way to spend C FLOPs: N parameters on D tokens (C = c(N) D; 6 N D by default)."""

    method: str
    compute: float
    n: float
    d: float
    loss: float | None = None   # predicted loss, where a law is given

    @property
    def tokens_per_param(self) -> float:
        return self.d / self.n

    def to_dict(self) -> dict:
        out = asdict(self)
        out["tokens_per_param"] = self.tokens_per_param
        return out


def check_compute(compute: object) -> float:
    """A compute budget as a float; UsageError unless it is positive and finite."""
    return check_size(compute, "compute", unit=" of FLOPs")


def check_allocatable(law: Law, law_label: str | None = None) -> Law:
    """`law`, when it has a compute-optimal allocation; else a UsageError saying why not.

    N_opt and D_opt (and the inference-aware optimum) exist only for finite A, B > 0 and
    alpha, beta > 0: with an exponent at or below zero more parameters or tokens never lower
    the loss, and the closed forms divide by alpha + beta. A fit can end there (fit.json
    records what the points gave), so every allocation checks first."""
    values = {"A": law.A, "B": law.B, "alpha": law.alpha, "beta": law.beta, "E": law.E}
    bad = [f"{name} = {sci(v)}" for name, v in values.items()
           if not (math.isfinite(v) and (v > 0 or (name == "E" and v >= 0)))]
    if bad:
        raise UsageError(f"law {law_label or 'given'} has {', '.join(bad)}; a compute-optimal allocation "
                         "needs A, B, alpha and beta positive and finite (and E >= 0): choose another law")
    return law


def check_size(value: object, what: str, unit: str = "") -> float:
    """A number of parameters, tokens (or, with `unit`, FLOPs) as a float; UsageError naming `what`
    unless it is positive and finite."""
    try:
        x = float(cast(SupportsFloat, value))     # anything else raises TypeError: caught
    except (TypeError, ValueError):
        raise UsageError(f"{what} {value!r} is not a number") from None
    if not math.isfinite(x) or x <= 0:
        raise UsageError(f"{what} must be a positive, finite number{unit}, got {value!r}")
    _check_at_most(x, what, unit)
    return x


def _check_at_most(largest: float, what: str, unit: str) -> None:
    """UsageError for a count past MAX_COUNT (1e30), the bound a fitted point's N, D or FLOPs is held
    to: --compute 1e300 planned N = 1.8e135, a number no plan may state as an answer."""
    if largest > MAX_COUNT:
        raise UsageError(f"{what} must be at most {MAX_COUNT:g}{unit.removeprefix(' of')}, got {largest:g}: past "
                         "it a count is a unit slip (the largest training runs to date spent about 1e26 FLOPs)")


def check_sizes(values: npt.ArrayLike, what: str, unit: str = "") -> float | np.ndarray:
    """A number of parameters, tokens (or, with `unit`, FLOPs) as a float, or an array of them as a
    float array: what the notebook view's `predict` and `plan` broadcast over. UsageError naming
    `what` unless each is a real number from 1 to MAX_COUNT: a bool is no count (True was N = 1),
    nor is text, None, a complex number or a ragged list, and below 1 (1e-300 predicted a loss of
    9e104) or past MAX_COUNT no count is a model's."""
    one = np.ndim(values) == 0 if not isinstance(values, (list, tuple)) else False
    try:
        x = np.asarray(values)
        if x.dtype.kind == "O":             # ints past int64 (10**400), None, mixed types: as floats or refused
            x = np.asarray(values, dtype=float)
    except OverflowError:
        raise UsageError(f"{what} must be at most {MAX_COUNT:g}{unit.removeprefix(' of')}, got a number past a "
                         "float's range") from None
    except (TypeError, ValueError):
        raise UsageError(f"{what} {excerpt(values)} {'is not a number' if one else 'are not all numbers'} (an "
                         "array's rows must be of one length)") from None
    if x.dtype.kind not in "iuf":
        kind = {"b": "True or False", "c": "a complex number"}.get(x.dtype.kind, "text")
        raise UsageError(f"{what} {excerpt(values)} {'is not a number' if one else 'are not all numbers'}: "
                         f"{kind} is not a count")
    if not x.size:
        raise UsageError(f"{what}: no values given")
    x = x.astype(float)
    bad = ~(np.isfinite(x) & (x >= 1))
    if bad.any():
        got = float(x[bad].flat[0])
        raise UsageError(f"{what} must be {'a positive, finite number' if one else 'positive, finite numbers'}{unit}, "
                         f"got {got!r} (a count: at least 1)")
    _check_at_most(float(x.max()), what, unit)
    return float(x) if one else x


def has_allocation(resampled: np.ndarray) -> np.ndarray:
    """Which rows of (R, 5) bootstrap constants E, A, B, alpha, beta make a law with a compute-optimal
    allocation: every constant a float, alpha and beta > 0."""
    resampled = np.asarray(resampled, dtype=float)
    return np.isfinite(resampled).all(axis=1) & (resampled[:, 3] > 0) & (resampled[:, 4] > 0)


def model_optimum(law: AllocatingLaw, compute: npt.ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """(N_opt, D_opt) of `law` at `compute` FLOPs (broadcasts); UsageError where an optimum is no
    model: below one parameter or one token, or past a float. Exponents near 0 (a fit of a flat table)
    put it at N = 1e183 on D = 1e-164, a number no plan, report or API call may state as an answer."""
    c = np.asarray(compute, dtype=float)
    try:
        with np.errstate(over="ignore", invalid="ignore"):
            n, d = np.asarray(law.n_opt(c), dtype=float), np.asarray(law.d_opt(c), dtype=float)
    except OverflowError:      # G past a float: a Python float's power raises rather than giving inf
        n, d = np.full(c.shape, math.inf), np.zeros(c.shape)
    except ValueError as exc:  # a form without a closed form: `forms.form.optimum` says why
        raise UsageError(f"the law: {exc}") from None
    bad = ~(np.isfinite(n) & np.isfinite(d) & (n >= 1.0) & (d >= 1.0))
    if bad.any():
        k = np.flatnonzero(bad.ravel())[0]
        exponents = f"alpha {law.alpha:.3g}, beta {law.beta:.3g}: " if isinstance(law, Law) else ""
        raise UsageError(f"the law's optimum at C = {c.ravel()[k]:.3g} falls at N = {n.ravel()[k]:.3g}, D = "
                         f"{d.ravel()[k]:.3g}: no model ({exponents}the points do not identify the allocation); "
                         "refit on runs whose loss falls with N and D")
    return n, d


def plan(law: Law, compute: object) -> Allocation:
    """The compute-optimal N, D of `law` at C FLOPs (closed form) and the loss it predicts;
    UsageError where the law has no allocation, or its optimum is no model (`model_optimum`)."""
    c = check_compute(compute)
    check_allocatable(law)
    n, d = (float(v) for v in model_optimum(law, c))
    return Allocation("law", c, n, d, float(law.loss(n, d)))


def numerical_optimum(law: Law, compute: object, *, xatol: float = 1e-10) -> Allocation:
    """Minimise L(N, C / c(N)) over x = ln N numerically (scipy's bounded Brent method); c(N) = 6 N
    unless the law's `flops` says otherwise.

    The objective is the reducible part A/N^alpha + B/D^beta: E does not move the argmin, and
    leaving it out keeps the flat bottom of the curve further above float rounding. It is
    convex in x, so one minimum lies in N in [1, N(D = 1 token)]. A coarse grid over that
    range brackets it first, and Brent's method then searches u = x - x_grid in the bracket:
    scipy's stopping rule adds sqrt(machine eps) * |u| to `xatol`, which would cap the
    precision at ~3e-7 relative if it searched x = ln N (~20) directly.
    """
    c = check_compute(compute)
    flops = law.flops
    if c <= 6.0 * flops.kappa:
        raise UsageError(f"compute {c:g} FLOPs cannot train even one parameter on one token ({flops.describe()})")
    log_c6 = math.log(c / (6.0 * flops.kappa))      # ln D = log_c6 - gamma x

    def reducible(x: float) -> float:
        return law.A * math.exp(-law.alpha * x) + law.B * math.exp(-law.beta * (log_c6 - flops.gamma * x))

    grid = np.linspace(0.0, log_c6 / flops.gamma, 201)
    i = int(np.argmin([reducible(x) for x in grid]))
    x0 = grid[i]
    lo, hi = (grid[max(i - 1, 0)] - x0), (grid[min(i + 1, len(grid) - 1)] - x0)
    res = minimize_scalar(lambda u: reducible(x0 + u), bounds=(lo, hi), method="bounded",
                          options={"xatol": xatol, "maxiter": 10_000})
    if not res.success:  # pragma: no cover - Brent on a convex function does not fail
        raise RuntimeError(f"numerical optimum did not converge at C={c:g}: {res.message}")
    x = x0 + res.x
    n = math.exp(x)
    d = float(flops.tokens(c, n))
    return Allocation("numerical", c, n, d, float(law.loss(n, d)))


def rule_of_thumb(compute: object, tokens_per_param: float = RULE_TOKENS_PER_PARAM,
                  law: Law | None = None) -> Allocation:
    """D = k N with C = 6 N D: N = sqrt(C / (6 k)); under the law's C = 6 kappa N^gamma D,
    N = (C / (6 kappa k))^(1 / (1 + gamma)). Loss predicted by `law` when given."""
    c = check_compute(compute)
    k = float(tokens_per_param)
    if not math.isfinite(k) or k <= 0:
        raise UsageError(f"tokens per parameter must be positive and finite, got {tokens_per_param!r}")
    n = expected_optimum(_flops(law), c, k)
    d = k * n
    return Allocation(f"{k:g} tokens/param", c, n, d, _loss(law, n, d))


def kaplan_allocation(compute: object, law: Law | None = None) -> Allocation:
    """Kaplan et al.'s N_opt = 1.3e9 (C / 8.64e19 FLOP)^0.73, D = C / (6 N) (see module doc), or
    C / c(N) under the law's compute count."""
    c = check_compute(compute)
    n = KAPLAN_N_COEFF * (c / PF_DAY_FLOP) ** KAPLAN_N_EXPONENT
    d = float(_flops(law).tokens(c, n))   # C / (6 N) to the bit when c(N) = 6 N
    return Allocation("kaplan", c, n, d, _loss(law, n, d))


def _loss(law: Law | None, n: float, d: float) -> float | None:
    return None if law is None else float(law.loss(n, d))


def _flops(law: Law | None) -> FlopsPerToken:
    return FlopsPerToken() if law is None else law.flops


def compare_allocations(law: Law | None, compute: object) -> list[Allocation]:
    """The law's optimum (when there is a law) beside the 20-tokens rule and Kaplan's split,
    each with the loss `law` predicts for it."""
    rows = [] if law is None else [plan(law, compute)]
    rows.append(rule_of_thumb(compute, law=law))
    rows.append(kaplan_allocation(compute, law=law))
    return rows



@dataclass(frozen=True)
class OptimumIntervals:
    """95% (or `level`) intervals of the compute-optimal allocation at one budget.

    n, d, tokens_per_param: percentiles of N_opt(C), D_opt(C), D_opt/N_opt over the bootstrap
    laws; where any of the `n_resamples` has no allocation (alpha or beta <= 0, or a constant
    beyond a float: `n_undefined` of them) there is no interval (NaN), the rule fit.json's
    intervals follow (`bootstrap.percentile_intervals`), so both give one interval or none; a
    bound past a float (a resample's N_opt underflowed to 0, its D_opt inf) is 0 or inf. loss:
    a prediction interval for the loss of the recommended run (the fitted law's N_opt, D_opt): the
    bootstrap laws' predictions for it, each times exp(noise * z) with z standard normal, so both
    the parameters' uncertainty and the runs' own scatter (the fit's residual RMS) are in it.
    """

    compute: float | np.ndarray
    level: float
    n: tuple
    d: tuple
    tokens_per_param: tuple
    loss: tuple
    n_undefined: int
    n_resamples: int = 0

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Plan:
    """What to train at C FLOPs: the law's optimum N, D and its predicted loss, with their
    intervals from the bootstrap (`OptimumIntervals`; None for a fit without bootstrap samples):
    `intervals.n`, `.d`, `.tokens_per_param` and `.loss`, each (lo, hi) at `intervals.level`.
    Floats for one budget; for an array of budgets, arrays of its shape (the bounds too)."""

    compute: float | np.ndarray
    n: float | np.ndarray
    d: float | np.ndarray
    loss: float | np.ndarray
    intervals: OptimumIntervals | None = None
    law: str = ""                  # the law that predicts and plans, in words ("": a published or given law)
    note: str = ""                 # how far beyond its tested reach, where it is (LawFit.reach)

    @property
    def tokens_per_param(self) -> float | np.ndarray:
        return self.d / self.n

    def __repr__(self) -> str:
        iv = self.intervals

        def show(name: str, value: float | np.ndarray, fmt: str) -> str:
            return f"{name}={_shown(value, None if iv is None else getattr(iv, name), fmt)}"

        return (f"Plan(C={_shown(self.compute, None, '.3g')}: " + ", ".join((
            show("n", self.n, ".3g"), show("d", self.d, ".3g"),
            show("tokens_per_param", self.tokens_per_param, ".3g"), show("loss", self.loss, ".4f")))
            + ("" if iv is None else f"; {100 * iv.level:g}% intervals")
            + (f"; by {self.law}" if self.law else "") + (f"; {self.note}" if self.note else "") + ")")


def stacked_plans(plans: list[Plan], shape: tuple) -> Plan:
    """One-budget plans as one plan of arrays of `shape` (its intervals' bounds too; `n_undefined`
    the most resamples without an optimum at any budget)."""
    def column(values: list) -> np.ndarray:
        return np.array(values, dtype=float).reshape(shape)

    def pair(name: str) -> tuple:
        return tuple(column([getattr(p.intervals, name)[k] for p in plans]) for k in (0, 1))

    intervals = None
    if all(p.intervals is not None for p in plans):
        first = plans[0].intervals
        assert first is not None
        intervals = OptimumIntervals(
            column([p.compute for p in plans]), first.level, pair("n"), pair("d"), pair("tokens_per_param"),
            pair("loss"), max(p.intervals.n_undefined for p in plans if p.intervals is not None), first.n_resamples)
    return Plan(column([p.compute for p in plans]), column([p.n for p in plans]),
                column([p.d for p in plans]), column([p.loss for p in plans]), intervals, plans[0].law,
                "; ".join(dict.fromkeys(p.note for p in plans if p.note)))


def _shown(value: float | np.ndarray, bounds: tuple | None, fmt: str) -> str:
    """`value` [lo, hi] in `fmt`; for arrays, a list of them (a plan or prediction that broadcast)."""
    if np.ndim(value):
        pairs = [None] * np.size(value) if bounds is None else list(zip(np.ravel(bounds[0]), np.ravel(bounds[1])))
        return "[" + ", ".join(_shown(v, pair, fmt) for v, pair in zip(np.ravel(value), pairs)) + "]"
    if bounds is not None and not all(math.isfinite(b) for b in bounds):
        return format(value, fmt) + " [no interval]"
    return format(value, fmt) + ("" if bounds is None else " [{:{f}}, {:{f}}]".format(*bounds, f=fmt))


@dataclass(frozen=True)
class Prediction:
    """The loss a law predicts for one run of N parameters on D tokens, with a prediction interval
    (`loss_interval`; None for a fit without bootstrap samples) at `level`. Floats for one run;
    arrays of the runs' broadcast shape where N or D was an array (the interval's bounds too).
    beyond: how far beyond the data the run is, its compute over the largest fitted run's (1.0
    inside the data; `LawFit.beyond` gives the same distance in decades)."""

    n: float | np.ndarray
    d: float | np.ndarray
    loss: float | np.ndarray
    interval: tuple | None = None
    level: float | None = None
    beyond: float | np.ndarray = 1.0   # the extrapolation factor: its compute over the largest fitted run's
    law: str = ""                      # the law that predicts, in words ("": a published or given law)
    note: str = ""                     # how far beyond its tested reach, where it is (LawFit.reach)

    def __repr__(self) -> str:
        shown = _shown(self.loss, None if self.level is None else self.interval, ".4f")
        kind = "" if self.interval is None or self.level is None else f" ({100 * self.level:g}% prediction interval)"
        far = f", {self.beyond:.3g}x beyond the fitted compute" if np.ndim(self.beyond) == 0 and self.beyond > 1 \
            and not self.note else ""
        by = (f"; by {self.law}" if self.law else "") + (f"; {self.note}" if self.note else "")
        return (f"Prediction(N={_shown(self.n, None, '.3g')}, D={_shown(self.d, None, '.3g')}: loss {shown}{kind}{far}"
                f"{by})")


def loss_interval(resampled: npt.ArrayLike, n: npt.ArrayLike, d: npt.ArrayLike, *, level: float = 0.95,
                  noise: float = 0.0, seed: int = 0, widen: float = 1.0) -> tuple:
    """A prediction interval for the loss of one run of N parameters on D tokens, from `resampled`
    (an (R, 5) array of bootstrap constants E, A, B, alpha, beta): each resample's law predicts
    L(N, D), times exp(noise * z) with z standard normal, so both the constants' uncertainty and
    the runs' own scatter (noise: the fit's residual RMS in log loss) are in it; the laws'
    predictions are spread `widen` times about their median first (`bootstrap.spread`: the fit's
    ci.widened_by). A resample whose constants overflowed (A = inf where its exponent ran off)
    predicts nothing and is left out.

    n and d broadcast as numpy's: (lo, hi) are floats for numbers, arrays of their shape for
    arrays, each run's interval as its own call would give it (the same z for every run)."""
    resampled = np.asarray(resampled, dtype=float)
    finite = np.isfinite(resampled).all(axis=1)
    z = np.random.default_rng(seed).standard_normal(finite.size)
    shape = np.broadcast(n, d).shape
    laws = Law(*resampled.T[:, :, None])                       # (R, 1) constants against the runs
    n_runs, d_runs = (np.broadcast_to(v, shape).ravel() for v in (n, d))
    with np.errstate(over="ignore", invalid="ignore"):  # inf constants: dropped as not finite below
        predicted = spread(laws.loss(n_runs, d_runs), widen)   # (R, runs)
        losses = (predicted * np.exp(noise * z)[:, None])[finite]
    return _percentiles(losses, level, shape)


def _percentiles(values: np.ndarray, level: float, shape: tuple = ()) -> tuple:
    """(lo, hi) percentiles of (R, ...) values over their first axis, each of `shape` (a float for
    ()); NaN where there are no values."""
    values = np.asarray(values, dtype=float)
    if not len(values):
        bounds = np.full((2, *shape), math.nan)
    else:
        q = (50 * (1 - level), 50 * (1 + level))
        with np.errstate(invalid="ignore"):
            bounds = np.percentile(values, q, axis=0)
        # Between two infinite order statistics (a resample's N_opt underflowed to 0, its D_opt and
        # D/N inf) the interpolation is inf - inf, NaN: the bound is then the outer one, inf.
        outer = np.stack([np.percentile(values, q[0], axis=0, method="lower"),
                          np.percentile(values, q[1], axis=0, method="higher")])
        bounds = np.where(np.isnan(bounds) & ~np.isnan(outer), outer, bounds).reshape(2, *shape)
    return (float(bounds[0]), float(bounds[1])) if shape == () else (bounds[0], bounds[1])


def optimum_intervals(law: Law, resampled: npt.ArrayLike, compute: npt.ArrayLike, *, level: float = 0.95,
                      noise: float = 0.0, seed: int = 0, widen: float = 1.0) -> OptimumIntervals:
    """Intervals of the optimum at C from `resampled`, an (R, 5) array of bootstrap constants in
    the order E, A, B, alpha, beta (see `OptimumIntervals`), each widened `widen` times about its
    median (`bootstrap.spread`, as the fit's own). A resample whose constants overflowed or whose
    alpha, beta <= 0 has no allocation, and counts in `n_undefined`. An array of budgets gives
    arrays of bounds (and of `compute`), each budget's as its own call would."""
    c = check_sizes(compute, "compute", unit=" of FLOPs")
    shape = np.shape(c)
    resampled = np.asarray(resampled, dtype=float)
    ok = has_allocation(resampled)
    e, a, b, alpha, beta = resampled[ok].T[:, :, None]
    laws = Law(e, a, b, alpha, beta, flops=law.flops)      # one law per resample, against the budgets
    budgets = np.ravel(c)
    check_allocatable(law)
    # A resample far from the fit (alpha ~ 1e4) can put its N_opt below the smallest float: 0,
    # and its D_opt inf; the percentiles take them as the extremes they are.
    with np.errstate(invalid="ignore", divide="ignore", over="ignore", under="ignore"):
        n_opt = np.asarray(laws.n_opt(budgets))               # (resamples with an allocation, budgets)
        d_opt = law.flops.tokens(budgets, n_opt)
        ratio = d_opt / n_opt
    n_best, d_best = law.n_opt(c), law.d_opt(c)
    loss = loss_interval(resampled, n_best, d_best, level=level, noise=noise, seed=seed, widen=widen)
    undefined = int((~ok).sum())
    nan = _percentiles(np.empty((0, *shape)), level, shape)
    n, d, tpp = (nan,) * 3 if undefined else \
        tuple(_percentiles(spread(v, widen), level, shape) for v in (n_opt, d_opt, ratio))
    return OptimumIntervals(c, level, n, d, tpp, loss, undefined, int(ok.size))
