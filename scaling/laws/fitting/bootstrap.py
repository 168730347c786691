"""Percentile bootstrap intervals for a fitted law: the Bayesian bootstrap of the points.

Besiroglu et al. resample points with replacement, which is the same as weighting each point by
how many times it was drawn (multinomial counts). The Bayesian bootstrap (Rubin 1981) weights
each point by n times a Dirichlet(1, ..., 1) draw instead: the same first-order variance, but no
weight is zero. That matters for a designed sweep: a resample of 20 runs, 4 per size, drops
every run of some size about once in 17, and those resamples, fitted on 4 sizes, make the
intervals' tails. On the verdict's calibration tables (bench/bench_diagnostics.py, seeds 0 and
1, the well-designed sweeps and every error kind) the Bayesian bootstrap calls 4 of 103
determinable sweeps `not identified` against 8 with counts, and its `trustworthy` intervals miss
the truth in 2 of 77 against 2 of 65 (seeds 0-3: 10 of 204 not identified, 3 of 140 missing).
Its 95% intervals hold the truth 95.0% (a) and 96.7% (tokens per parameter) of the time on
20-run cross grids at 0.3% scatter (counts: 100% and 96.7%); at 0.05% scatter, where the fit is
linear, 90% and 88%: there the residuals it resamples are sqrt((m - 5) / m) of the scatter,
which counts' heavier tails happened to hide (docs/diagnostics.md).

Every resample is a weighted fit on the same arrays, so all resamples (times their starts) are
fitted as one batch of the batched L-BFGS (`scaling.laws.fitting.lbfgs`). Each resample starts from the
full-data optimum and from the best other end point the full grid reached (RESAMPLE_STARTS).
Pure functions of numpy arrays, no I/O.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from scaling.errors import UsageError
from scaling.formats import whole_number
from scaling.laws.fitting.fit import TIGHT_FTOL, TIGHT_GTOL, FitResult, check_fit_inputs, fit_law, free_mask, log_points
from scaling.laws.fitting.lbfgs import lbfgs_batched
from scaling.laws.fitting.objective import (
    DEFAULT_DELTA,
    Centre,
    EPrior,
    Workspace,
    batch_rows,
    objective_batched,
    with_prior,
)
from scaling.train.compute import FlopsPerToken

MAX_RESAMPLES = 100_000
# Starts per resample: the full-data optimum and the grid's best other end point. The grid's
# other end points are, on the public tables, places along the optimum's own flat valley (within
# 1e-5 to 1e-3 of its objective), from which a resample's refit ends at the same optimum. Against
# 8 starts (Chinchilla, gadre_c4, oellm_dense, marin_moe; 400 resamples each), 2 moved the
# intervals of alpha, beta, a and E by under 1e-7 (2 resamples of Chinchilla's ended 1e-3 higher
# in the objective) at an eighth to a half of the cost (Chinchilla: 0.6 s against 4.5 s of CPU).
RESAMPLE_STARTS = 2
# The fewest resamples a fit's intervals are drawn from (0: none at all). A 95% percentile interval
# of R resamples spans about the middle (R - 1) / (R + 1) of their distribution, and the estimate
# lies outside all R of them about once in 2^(R - 1): from 1 resample the "interval" is one refit,
# which never holds the estimate; from 3, one time in 4. From 10 it is a rough but honest interval
# (82% of the spread; the estimate outside it once in 500), what a quick look or a test asks for;
# the default, 1000, is what a decision needs.
MIN_RESAMPLES = 10
LOG_FLOAT_MAX = math.log(np.finfo(float).max)
CI_NAMES = ("E", "A", "B", "alpha", "beta", "a", "b", "G", "tokens_per_param")


@dataclass(frozen=True)
class BootstrapResult:
    """Percentile intervals from refitting reweightings of the points (`resample_weights`)."""

    n_resamples: int
    seed: int
    level: float
    reference_compute: float
    intervals: dict            # name -> (lo, hi), for CI_NAMES
    samples: dict = field(repr=False)  # name -> (n_resamples,) array of fitted values
    n_starts_per_resample: int = 0
    n_converged: int = 0       # resamples whose best start met the stopping rule
    n_undefined: dict = field(default_factory=dict)  # name -> resamples where it is not finite
    # (G, a, b, tokens_per_param need alpha, beta > 0); such a quantity's interval is NaN.
    widened_by: float = 1.0    # the intervals widened this many times about the samples' median (`spread`)


def derived_quantities(theta: np.ndarray, reference_compute: float, flops: FlopsPerToken = FlopsPerToken()) -> dict:
    """E, A, B, alpha, beta, a, b, G and D_opt/N_opt at C_ref for rows of theta (vectorised), under
    the constraint C = c(N) D of `flops` (`scaling.laws.forms.law` gives the closed form)."""
    theta = np.atleast_2d(theta)
    e, la, lb, alpha, beta = theta.T
    gamma_beta = flops.gamma * beta
    s = alpha + gamma_beta
    with np.errstate(invalid="ignore", divide="ignore"):
        a_exp = beta / s
        b_exp = alpha / s
    log_c6 = math.log(reference_compute / (6.0 * flops.kappa))
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        # G and the allocation exist only for alpha, beta > 0 (NaN otherwise).
        # ... and only where A and B are floats: a resample whose A overflowed is stored as inf
        # (fit.bootstrap.csv), and `scaling plan` could not place its optimum: undefined for both.
        ok = (alpha > 0) & (beta > 0) & (la < LOG_FLOAT_MAX) & (lb < LOG_FLOAT_MAX)
        log_g = np.where(ok, (np.log(np.where(ok, alpha, 1.0)) + la - np.log(np.where(ok, gamma_beta, 1.0)) - lb)
                         / s, np.nan)
        a_exp = np.where(ok, a_exp, np.nan)
        b_exp = np.where(ok, b_exp, np.nan)
        # D_opt / N_opt = G^-(1 + gamma) (C / 6 kappa)^(b - a): G^-2 (C/6)^(b - a) for C = 6 N D
        log_tpp = -(1.0 + flops.gamma) * log_g + (b_exp - a_exp) * log_c6
        return {"E": np.exp(e), "A": np.exp(la), "B": np.exp(lb), "alpha": alpha, "beta": beta,
                "a": a_exp, "b": b_exp, "G": np.exp(log_g), "tokens_per_param": np.exp(log_tpp)}


LINEAR = ("alpha", "beta", "a", "b")    # spread linearly; every other quantity is positive: in log


def spread(values: npt.ArrayLike, factor: float, log: bool = True) -> np.ndarray:
    """`values` moved `factor` times as far from their median (in log where `log`), NaN and inf
    left as they are: a percentile interval of the result is the values' own, widened `factor`
    times about their median, so it holds the unwidened one.

    Why: points that share an error (a size's mistuned learning rate) are resampled as if each
    were independent, and the intervals come out too narrow by sqrt of the design effect
    (`scaling.laws.checks.lack_of_fit`), the factor a fit passes here. Widening each quantity's values,
    not the constants they come from, widens every interval by the same factor: moving the
    constants would move a nonlinear quantity (an extrapolated loss) unevenly, even off centre.
    A 2-D `values` (resamples x quantities) is spread column by column, about each one's median.
    """
    values = np.array(values, dtype=float)
    if factor == 1.0:
        return values
    with np.errstate(invalid="ignore", divide="ignore"):
        scale = np.log(values) if log else values
    columns = scale.reshape(len(scale), -1)          # a view: 1-D values are one column
    ok = np.isfinite(columns)
    used = ok.any(axis=0)
    mid = np.zeros(columns.shape[1])
    mid[used] = np.nanmedian(np.where(ok, columns, np.nan)[:, used], axis=0)   # the median of the finite
    moved = mid + factor * (columns - mid)
    # A resample whose constant is near the float limit already (A ~ 1e300 where its exponent ran
    # off) moves past it: inf is its value, as `percentile_intervals` expects of such a resample.
    # The rows not finite to begin with are left as they were.
    with np.errstate(over="ignore", invalid="ignore"):
        moved = np.exp(moved) if log else moved
    return np.where(ok, moved, values.reshape(columns.shape)).reshape(values.shape)


def spread_samples(samples: dict, factor: float) -> dict:
    """Each of `samples` (name -> values) spread `factor` times about its median (`spread`)."""
    return {name: spread(v, factor, log=name not in LINEAR) for name, v in samples.items()}


def resample_weights(n_points: int, n_resamples: int, seed: int) -> np.ndarray:
    """(n_resamples, n_points) weights of the Bayesian bootstrap: each row n_points times a
    Dirichlet(1, ..., 1) draw (independent standard exponentials over their mean), from
    np.random.default_rng(seed), in order r = 0, 1, .... Each row sums to n_points, as a row of
    multinomial counts would; unlike counts, no weight is zero."""
    return _draw_weights(np.random.default_rng(seed), n_points, n_resamples)


def _draw_weights(rng: np.random.Generator, n_points: int, n_resamples: int) -> np.ndarray:
    """The next `n_resamples` rows of weights from `rng`: drawn in chunks, they continue the
    sequence of one draw, so the bootstrap streams without changing a resample."""
    draws = rng.standard_exponential((n_resamples, n_points))
    return draws / draws.mean(axis=1, keepdims=True)


def percentile_intervals(samples: dict[str, np.ndarray], level: float
                         ) -> tuple[dict[str, tuple[float, float]], dict[str, int]]:
    """(intervals, n_undefined): the central `level` percentile interval of each of CI_NAMES,
    and how many samples of it are not finite (then its interval is (NaN, NaN))."""
    tail = 100.0 * (1.0 - level) / 2.0
    intervals, n_undefined = {}, {}
    for name in CI_NAMES:
        v = samples[name]
        bad = int((~np.isfinite(v)).sum())
        n_undefined[name] = bad
        # Dropping the resamples where a quantity is undefined would bias its interval: none then.
        if bad:
            intervals[name] = (math.nan, math.nan)
        else:
            lo, hi = np.percentile(v, [tail, 100.0 - tail])
            intervals[name] = (float(lo), float(hi))
    return intervals, n_undefined


def check_count(n_resamples: object, name: str = "the number of bootstrap resamples") -> None:
    """UsageError unless a fit's bootstrap count is 0 (no intervals) or a whole number from
    MIN_RESAMPLES to MAX_RESAMPLES (a bool is not one). name: what the message calls it (a flag)."""
    n_resamples = whole_number(n_resamples, name)
    if n_resamples > MAX_RESAMPLES:
        raise UsageError(f"{name} must be at most {MAX_RESAMPLES:,}; got {n_resamples} (a 95% interval's ends "
                         "settle within a few thousand resamples)")
    if n_resamples < MIN_RESAMPLES and n_resamples != 0:
        raise UsageError(f"{name} must be 0 (no intervals) or at least {MIN_RESAMPLES}; got {n_resamples} (a 95% "
                         "interval of so few refits need not hold the estimate)")


def _check_settings(n_resamples: int, level: float, widen: float) -> None:
    if not 1 <= n_resamples <= MAX_RESAMPLES:
        raise UsageError(f"the number of bootstrap resamples must be from 1 to {MAX_RESAMPLES:,} (a 95% "
                         f"interval's ends settle within a few thousand); got {n_resamples}")
    if not 0 < level < 1:
        raise UsageError(f"the interval level must be in (0, 1); got {level}")
    if not (math.isfinite(widen) and widen >= 1.0):
        raise UsageError(f"the interval widening factor must be a number >= 1; got {widen}")


def _refit_resamples(n_resamples: int, seed: int, starts: np.ndarray, points: tuple, delta: float,
                     free: np.ndarray, E_prior: EPrior | None) -> tuple[np.ndarray, int]:
    """Every resample's constants (n_resamples, 5) and how many converged. Resamples are fitted a
    chunk at a time, their weights drawn as they come: memory is bounded by the chunk (starts x
    points), not by n_resamples x starts x points."""
    log_n, log_d, log_loss = points
    rng = np.random.default_rng(seed)
    prior_rng = np.random.default_rng([seed, 1])
    per_chunk = max(1, batch_rows(log_n.size) // starts.shape[0])
    thetas, n_converged = np.empty((n_resamples, starts.shape[1])), 0
    for r0 in range(0, n_resamples, per_chunk):
        k = min(per_chunk, n_resamples - r0)
        weights = _draw_weights(rng, log_n.size, k)
        means = None if E_prior is None else E_prior.mean + E_prior.sd * prior_rng.standard_normal(k)
        thetas[r0:r0 + k], converged = _fit_resamples(weights, starts, log_n, log_d, log_loss, delta, free,
                                                      E_prior, means)
        n_converged += converged
    return thetas, n_converged


def bootstrap(n: npt.ArrayLike, d: npt.ArrayLike, loss: npt.ArrayLike,
              n_resamples: int = 1000, seed: int = 0, *, delta: float = DEFAULT_DELTA,
              fixed_E: float | None = None, reference_compute: float | None = None,
              level: float = 0.95, full_fit: FitResult | None = None, extra_starts: np.ndarray | None = None,
              flops: FlopsPerToken = FlopsPerToken(), widen: float = 1.0,
              E_prior: EPrior | None = None) -> BootstrapResult:
    """Percentile bootstrap intervals for the constants, allocation exponents and tokens/param.

    Each resample weights the points by a row of `resample_weights` (numpy Generator seeded
    with `seed`) and is refitted with the same objective. Starts, per resample: the full-data
    optimum and the best other distinct end point of the full-data grid fit (RESAMPLE_STARTS;
    constants differing by more than 1%), and `extra_starts` if given. This is a deliberate
    shortcut over running the 4,500-point grid per resample: a resample's optimum lies near the
    full-data one. tests/laws/test_fit.py checks on resamples that the full grid
    finds the same optimum (checked on 12 resamples while writing this: objectives equal to
    1e-13). All starts run the batched L-BFGS at tight tolerances (TIGHT_FTOL, TIGHT_GTOL): at
    scipy's defaults a resample can stop 1e-4 above its minimum with alpha off by 0.003, which
    would pull the resamples towards the full-data optimum and narrow the intervals. No
    per-resample scipy call.

    reference_compute: C at which tokens_per_param is evaluated (default: the largest 6 N D).
    flops: the FLOPs per token of the allocation's constraint (C = 6 N D by default).
    widen: the factor (>= 1) each interval is widened by about its samples' median (`spread`): the
    lack-of-fit tests' allowance for errors shared between points. `samples` stay as fitted.
    E_prior: the fit's prior on E (`objective.EPrior`). Each resample draws its prior's mean from
    the prior itself (mean + sd z, from a generator of its own: the weights are as without it), as
    the Bayesian bootstrap draws the runs' weights: the prior is one more piece of evidence,
    resampled. Without the draw the resamples' E would spread as the penalised estimate does
    (less than the posterior: it ignores the prior's own uncertainty); with it, for a Gaussian
    likelihood, their spread is the posterior's, 1 / (1/sd_data^2 + 1/sd^2) in variance.
    """
    _check_settings(n_resamples, level, widen)
    check_fit_inputs(n, d, loss, fixed_E, E_prior)
    log_n, log_d, log_loss = log_points(n, d, loss)
    if reference_compute is None:
        reference_compute = float(np.max(6.0 * np.exp(log_n + log_d)))
    if not (np.isfinite(reference_compute) and reference_compute > 0):
        raise UsageError(f"reference compute must be positive; got {reference_compute}")
    if full_fit is None:
        full_fit = fit_law(n, d, loss, delta=delta, fixed_E=fixed_E, E_prior=E_prior)
    starts = np.array(full_fit.local_optima[:RESAMPLE_STARTS], dtype=float)
    if extra_starts is not None:
        starts = np.vstack([starts, np.array(extra_starts, dtype=float, ndmin=2)])
    thetas, n_converged = _refit_resamples(n_resamples, seed, starts, (log_n, log_d, log_loss), delta,
                                           free_mask(fixed_E), E_prior)
    samples = derived_quantities(thetas, reference_compute, flops)
    intervals, n_undefined = percentile_intervals(spread_samples(samples, widen), level)
    return BootstrapResult(
        n_resamples=int(n_resamples), seed=int(seed), level=float(level),
        reference_compute=float(reference_compute), intervals=intervals, samples=samples,
        n_starts_per_resample=int(starts.shape[0]), n_converged=int(n_converged),
        n_undefined=n_undefined, widened_by=float(widen),
    )


def _fit_resamples(point_weights: np.ndarray, starts: np.ndarray, log_n: np.ndarray, log_d: np.ndarray,
                   log_loss: np.ndarray, delta: float, free: np.ndarray, E_prior: EPrior | None = None,
                   prior_means: np.ndarray | None = None) -> tuple[np.ndarray, int]:
    """(best theta of each resample (R, 5), how many of them converged): every resample (a row
    of `point_weights`, with the losses `log_loss`, (M,) or one row (R, M) per resample, and its
    prior's mean for E from `prior_means`) refitted from every start in one batch, the best end
    point kept."""
    R, S0 = point_weights.shape[0], starts.shape[0]
    weights = np.repeat(point_weights, S0, axis=0)      # row r*S0 + k: resample r, start k
    targets = log_loss if log_loss.ndim == 1 else np.repeat(log_loss, S0, axis=0)
    centre = Centre.of(log_n, log_d)                    # fitted in centred coordinates, as `fit_law`
    log_n, log_d = centre.points(log_n, log_d)
    x0 = np.tile(centre.to_centred(starts), (R, 1))
    means = None if prior_means is None else np.repeat(prior_means, S0)
    work = Workspace()

    def fun(x: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        f, g = objective_batched(x, log_n, log_d, targets if targets.ndim == 1 else targets[rows], delta,
                                 weights[rows], work=work)
        return with_prior(f, g, x, E_prior, None if means is None else means[rows])

    batch = lbfgs_batched(fun, x0, free=free, ftol=TIGHT_FTOL, gtol=TIGHT_GTOL)
    funs = np.where(np.isfinite(batch.fun), batch.fun, np.inf).reshape(R, S0)
    rows = np.arange(R) * S0 + np.argmin(funs, axis=1)
    return centre.from_centred(batch.x[rows]), int(batch.converged[rows].sum())
