"""Fit the data-constrained law (Muennighoff et al. 2023) to points (N, D, U, loss), with bootstrap intervals.

Pure functions of numpy arrays, no I/O; the law is in `scaling.laws.repeated.law`. The objective is
`scaling.laws.fitting.objective`'s: the summed Huber loss (delta 1e-3) of log residuals, here of
log L(N', D') at the effective N' and D', over x = (e, a, b, alpha, beta, log R_D*, log R_N*).

The route. For a fixed R_D* the effective data D' is known and the law is the ordinary
L(N, D'), so `fit_law` on (N, D', loss) finds its base constants from Hoffmann's grid of starts.
That global search runs once, at R_D* = R_START; the base constants are then refitted locally at
every value of a log grid of R_D* (and of R_N*, when it is fitted), from fit_law's distinct optima,
as one batched L-BFGS: the profile of the objective over R_D*. The best few grid points are
polished over all parameters jointly by scipy's L-BFGS-B, with log R* kept in LOG_R_BOUNDS.

On single-epoch data (D <= U everywhere) D' = D whatever R_D* is: R_D* is not determined and,
unless R_N* is asked for, the fit is exactly fit_law's on (N, D, loss).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
from scipy.optimize import minimize

from scaling.errors import UsageError
from scaling.laws.fitting.bootstrap import MAX_RESAMPLES, resample_weights
from scaling.laws.fitting.fit import (
    TIGHT_FTOL,
    TIGHT_GTOL,
    FitResult,
    check_fit_inputs,
    fit_law,
    log_points,
    single_threaded_blas,
)
from scaling.laws.fitting.lbfgs import SCIPY_GTOL, lbfgs_batched, lbfgs_in_chunks
from scaling.laws.fitting.objective import DEFAULT_DELTA, batch_rows, law_from_theta
from scaling.laws.repeated.law import RepeatedLaw, decayed, repetitions

# R* from 0.01 (a repeat is worth almost nothing) to 1e4 (repeats as good as new for any
# realistic number of epochs): the fit and the bootstrap keep log R* inside.
LOG_R_BOUNDS = (math.log(1e-2), math.log(1e4))
R_GRID = np.geomspace(1.0, 1e3, 13)     # the profile's values of R_D* (and R_N*)
R_START = float(np.sqrt(R_GRID[0] * R_GRID[-1]))   # where fit_law's global search runs
N_BASE_STARTS = 3            # fit_law's distinct optima refitted at every grid value
N_POLISH = 3                 # grid points polished jointly
LOG_EXCESS_MAX = 700.0       # N / U_N up to e^700: beyond it, R_N is not a float


@dataclass(frozen=True)
class Points:
    """The data the objective needs: log N, U_D = min(U, D), log U_D, R_D and log loss."""

    log_n: np.ndarray
    u_d: np.ndarray
    log_ud: np.ndarray
    r_d: np.ndarray
    log_loss: np.ndarray


def repeated_points(n: npt.ArrayLike, d: npt.ArrayLike, unique: npt.ArrayLike, loss: npt.ArrayLike) -> Points:
    """Checked points; UsageError unless N, D, U and loss are positive, finite and of one length."""
    log_n, _, log_loss = log_points(n, d, loss)
    u = np.asarray(unique, dtype=float).ravel()
    if u.shape != log_n.shape:
        raise UsageError(f"unique needs one value per point (got {u.size} for {log_n.size} points)")
    bad = ~np.isfinite(u) | (u <= 0)
    if bad.any():
        raise UsageError(f"unique must be positive and finite; {int(bad.sum())} value(s) are not "
                         f"(first at index {int(np.flatnonzero(bad)[0])})")
    u_d, r_d = repetitions(np.asarray(d, dtype=float).ravel(), u)
    return Points(log_n, u_d, np.log(u_d), r_d, log_loss)


def at_bound(r_star: npt.ArrayLike) -> np.ndarray:
    """Which values of R* lie at a bound of LOG_R_BOUNDS (to a relative 1e-4): not pinned by the points."""
    log_r = np.log(np.asarray(r_star, dtype=float))
    return (log_r <= LOG_R_BOUNDS[0] + 1e-4) | (log_r >= LOG_R_BOUNDS[1] - 1e-4)


def _log_star(column: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """log R* kept in LOG_R_BOUNDS, and where it was inside (its gradient is 0 outside)."""
    clipped = np.clip(column, *LOG_R_BOUNDS)
    return clipped, (clipped == column)[:, 0]


def _log_decayed(log_u: np.ndarray, r: np.ndarray, log_r_star: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """log(u + u R* (1 - e^(-r/R*))), its derivative in log R*, e^(-r/R*) and R* (1 - e^(-r/R*))."""
    r_star = np.exp(log_r_star)
    q = np.exp(-r / r_star)
    g = -r_star * np.expm1(-r / r_star)
    return log_u + np.log1p(g), (g - r * q) / (1.0 + g), q, g


def _log_effective_n(x: np.ndarray, pts: Points, log_rn: np.ndarray
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """log N', d log N'/d log R_N*, d log N'/d nu and nu = log N_opt(U_D) under each row's base law.

    N_opt(U_D) solves alpha A / N^alpha = beta B / U_D^beta (the compute-optimal split), so
    nu = (a - b + log(alpha / beta) + beta log U_D) / alpha. Only runs with N above it decay.
    """
    a, b, alpha, beta = (x[:, i:i + 1] for i in (1, 2, 3, 4))
    with np.errstate(invalid="ignore", divide="ignore"):
        nu = (a - b + np.log(alpha / beta) + beta * pts.log_ud) / alpha
    excess = pts.log_n > nu
    log_un = np.where(excess, nu, pts.log_n)
    r_n = np.expm1(np.minimum(pts.log_n - log_un, LOG_EXCESS_MAX))
    log_np, d_star, q, g = _log_decayed(log_un, r_n, log_rn)
    # N' = U_N (1 + g) with R_N = N / U_N - 1: moving U_N moves both factors.
    d_nu = np.where(excess, (1.0 + g - q * (1.0 + r_n)) / (1.0 + g), 0.0)
    return log_np, d_star, d_nu, nu


def _nu_gradient(grad: np.ndarray, c: np.ndarray, x: np.ndarray, nu: float | np.ndarray, log_ud: np.ndarray) -> None:
    """Add to grad the terms through nu, given c = d f / d nu per point (rows, points)."""
    alpha, beta = x[:, 3], x[:, 4]
    total = c.sum(axis=1) / alpha
    grad[:, 1] += total                                   # d nu / d a = 1 / alpha
    grad[:, 2] -= total                                   # d nu / d b = -1 / alpha
    grad[:, 3] += (c * (1.0 / alpha[:, None] - nu)).sum(axis=1) / alpha
    grad[:, 4] += (c * (log_ud - 1.0 / beta[:, None])).sum(axis=1) / alpha


def repeated_objective(x: np.ndarray, pts: Points, delta: float = DEFAULT_DELTA, weights: np.ndarray | None = None,
                       excess: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Summed Huber loss of log residuals of the repeated-data law and its gradient, for rows of x.

    x: (S, 7) rows of (e, a, b, alpha, beta, log R_D*, log R_N*); weights: None or (S, M) point
    weights (a bootstrap resample's); excess: whether parameters decay (R_N* fitted; else N' = N and
    log R_N* is ignored). Returns f (S,) and grad (S, 7).
    """
    x = np.atleast_2d(np.asarray(x, dtype=float))
    e, a, b, alpha, beta = (x[:, i:i + 1] for i in range(5))
    log_rd, in_d = _log_star(x[:, 5:6])
    log_dp, dd_star, _, _ = _log_decayed(pts.log_ud, pts.r_d, log_rd)
    dn_star: float | np.ndarray
    dn_nu: float | np.ndarray
    nu: float | np.ndarray
    in_n: bool | np.ndarray
    log_np, dn_star, dn_nu, nu, in_n = np.broadcast_to(pts.log_n, log_dp.shape), 0.0, 0.0, 0.0, False
    if excess:
        log_rn, in_n = _log_star(x[:, 6:7])
        log_np, dn_star, dn_nu, nu = _log_effective_n(x, pts, log_rn)
    with np.errstate(over="ignore", invalid="ignore"):
        t = np.stack([np.broadcast_to(e, log_dp.shape), a - alpha * log_np, b - beta * log_dp])
        top = t.max(axis=0)
        p = np.exp(t - top)
        s = p.sum(axis=0)
        p /= s                                            # d LSE / d each term
        r = top + np.log(s) - pts.log_loss                # log L_pred - log L_obs
        hp = np.clip(r, -delta, delta)                    # Huber derivative
        hw = hp if weights is None else hp * weights
        f = np.einsum("ij,ij->i", hw, r - 0.5 * hp)
        wn, wd = -alpha * hw * p[1], -beta * hw * p[2]    # d f / d log N', d f / d log D'
        grad = np.stack([(hw * p[0]).sum(axis=1), (hw * p[1]).sum(axis=1), (hw * p[2]).sum(axis=1),
                         -(hw * p[1] * log_np).sum(axis=1), -(hw * p[2] * log_dp).sum(axis=1),
                         (wd * dd_star).sum(axis=1) * in_d, (wn * dn_star).sum(axis=1) * in_n], axis=1)
        if excess:
            _nu_gradient(grad, wn * dn_nu, x, nu, pts.log_ud)
    return f, grad


@dataclass(frozen=True)
class RepeatedFit:
    """The fitted data-constrained law and how it was found.

    law.r_d_star is None when every run is single-epoch (R_D* not determined; then, without
    R_N*, base_fit is the whole fit). base_fit: fit_law's fit on (N, D'(R_START), loss), whose
    optima seeded the profile. n_repeated: runs with D > U; n_excess: runs with N above the fitted
    base law's N_opt(U_D) (R_N* is determined only by them). converged: scipy's polish succeeded
    or ended where the gradient meets scipy's default gtol. x: the optimum as (e, a, b, alpha, beta,
    log R_D*, log R_N*), unfitted entries at log R_START.
    """

    law: RepeatedLaw
    objective: float
    converged: bool
    residual_rms: float
    delta: float
    n_points: int
    n_repeated: int
    n_excess: int
    base_fit: FitResult
    x: tuple = field(default=(), repr=False)
    message: str = ""

    @property
    def r_d_star_determined(self) -> bool:
        return self.law.r_d_star is not None


def _free(fit_r_d: bool, fit_r_n: bool) -> np.ndarray:
    return np.array([True] * 5 + [fit_r_d, fit_r_n])


def _profile_starts(thetas: np.ndarray, free: np.ndarray) -> np.ndarray:
    """Rows of x: each theta at every grid value of the fitted R*; row k G + g is theta k at grid point g."""
    log_grid = np.log(R_GRID)
    rd = log_grid if free[5] else [math.log(R_START)]
    rn = log_grid if free[6] else [math.log(R_START)]
    stars = np.array([(u, v) for u in rd for v in rn])
    return np.hstack([np.repeat(thetas, len(stars), axis=0), np.tile(stars, (len(thetas), 1))])


def _profile(base: FitResult, pts: Points, delta: float, free: np.ndarray) -> np.ndarray:
    """The N_POLISH best grid points of the profile over R*, each with its base constants refitted
    (from the best of fit_law's distinct optima), as rows of x."""
    thetas = np.array(base.local_optima[:N_BASE_STARTS])
    starts = _profile_starts(thetas, free)
    excess = bool(free[6])
    batch = lbfgs_batched(lambda x, rows: repeated_objective(x, pts, delta, excess=excess),
                          starts, free=_free(False, False))
    funs = np.where(np.isfinite(batch.fun), batch.fun, np.inf).reshape(len(thetas), -1)
    n_grid = funs.shape[1]
    rows = np.argmin(funs, axis=0) * n_grid + np.arange(n_grid)   # per grid point, its best start
    order = np.argsort(funs.min(axis=0), kind="stable")[:N_POLISH]
    return batch.x[rows[order]]


def _polish(x0: np.ndarray, pts: Points, delta: float, free: np.ndarray) -> tuple[np.ndarray, float, bool]:
    """scipy L-BFGS-B over the free coordinates from x0, log R* bounded; (x, f, success)."""
    excess = bool(free[6])

    def fg(z: np.ndarray) -> tuple[float, np.ndarray]:
        x = x0.copy()
        x[free] = z
        f, g = repeated_objective(x, pts, delta, excess=excess)
        return float(f[0]), g[0][free]

    bounds = [(None, None)] * 5 + [LOG_R_BOUNDS] * int(free[5:].sum())
    res = minimize(fg, x0[free], jac=True, method="L-BFGS-B", bounds=bounds,
                   options={"maxiter": 15000, "ftol": TIGHT_FTOL, "gtol": TIGHT_GTOL})
    x = x0.copy()
    x[free] = res.x
    return x, float(res.fun), bool(res.success)


def _law_from_x(x: Sequence[float] | np.ndarray, free: np.ndarray) -> RepeatedLaw:
    star = [float(math.exp(v)) if on else None for v, on in zip(x[5:], free[5:])]
    return RepeatedLaw(law_from_theta(x[:5]), r_d_star=star[0], r_n_star=star[1])


def _single_epoch_fit(base: FitResult) -> RepeatedFit:
    """fit_law's fit as it is: with one epoch everywhere, D' = D and R_D* does not enter."""
    law = RepeatedLaw(base.law, r_d_star=None)
    return RepeatedFit(
        law=law, objective=base.objective, converged=base.converged, residual_rms=base.residual_rms,
        delta=base.delta, n_points=base.n_points, n_repeated=0, n_excess=0, base_fit=base,
        x=tuple(base.theta) + (math.log(R_START),) * 2,
        message="every run is single-epoch (D <= U): R_D* is not determined and the fit is fit_law's")


def _fit_message(law: RepeatedLaw, n_excess: int) -> str:
    notes = []
    for name, value in (("R_D*", law.r_d_star), ("R_N*", law.r_n_star)):
        if value is not None and at_bound(value):
            notes.append(f"{name} = {value:.3g} is at a bound of the search: these points do not pin it")
    if law.r_d_star is None:
        notes.append("every run is single-epoch (D <= U): R_D* is not determined")
    if law.r_n_star is not None and n_excess == 0:
        notes.append("no run has more parameters than N_opt(U_D): R_N* is not determined")
    return "; ".join(notes)


def fit_repeated_law(n: npt.ArrayLike, d: npt.ArrayLike, unique: npt.ArrayLike, loss: npt.ArrayLike, *,
                     fit_r_n_star: bool = False, delta: float = DEFAULT_DELTA,
                    grid: dict | npt.ArrayLike | None = None) -> RepeatedFit:
    """Fit L(N, D, U) = E + A/N'^alpha + B/D'^beta (R_D*, and R_N* when fit_r_n_star) by Huber on log residuals.

    n, d, unique, loss: parameters, training tokens, unique tokens and final loss of each run.
    delta: Huber threshold on log residuals. grid: fit_law's starts (None: Hoffmann's 4,500).
    See the module doc for the route.
    """
    if not (np.isfinite(delta) and delta > 0):
        raise UsageError(f"Huber delta must be positive; got {delta}")
    check_fit_inputs(n, d, loss)
    pts = repeated_points(n, d, unique, loss)
    n, d, unique = (np.asarray(v, dtype=float).ravel() for v in (n, d, unique))
    n_repeated = int((pts.r_d > 0).sum())
    # D' at R_START; on single-epoch points it is D itself, bit for bit.
    base = fit_law(n, decayed(pts.u_d, pts.r_d, R_START), loss, delta=delta, grid=grid)
    if n_repeated == 0 and not fit_r_n_star:
        return _single_epoch_fit(base)
    free = _free(n_repeated > 0, fit_r_n_star)
    with single_threaded_blas():
        polished = [_polish(x0, pts, delta, free) for x0 in _profile(base, pts, delta, free)]
    x, fbest, success = min(polished, key=lambda p: p[1])
    law = _law_from_x(x, free)
    grad = repeated_objective(x, pts, delta, excess=fit_r_n_star)[1][0]
    n_excess = int((n > law.n_for_data(pts.u_d)).sum())
    residuals = np.log(law.loss(n, d, unique)) - pts.log_loss
    return RepeatedFit(
        law=law, objective=fbest, converged=success or float(np.max(np.abs(grad[free]))) <= SCIPY_GTOL,
        residual_rms=float(np.sqrt(np.mean(residuals**2))), delta=float(delta),
        n_points=int(pts.log_n.size), n_repeated=n_repeated, n_excess=n_excess, base_fit=base,
        x=tuple(float(v) for v in x), message=_fit_message(law, n_excess))


BOOTSTRAP_NAMES = ("E", "A", "B", "alpha", "beta", "r_d_star", "r_n_star")


@dataclass(frozen=True)
class RepeatedBootstrap:
    """Percentile intervals from refitting reweightings of the points (`bootstrap.resample_weights`).

    intervals, samples: E, A, B, alpha, beta and whichever of r_d_star, r_n_star were fitted.
    n_at_bound: resamples whose R* ended at a bound of LOG_R_BOUNDS (the resample does not pin
    it; the bound is kept as its value, so a wide interval shows as reaching the bound).
    """

    n_resamples: int
    seed: int
    level: float
    intervals: dict
    samples: dict = field(repr=False)
    n_converged: int = 0
    n_at_bound: dict = field(default_factory=dict)


def _samples(xs: np.ndarray, free: np.ndarray) -> dict:
    """name -> (R,) fitted values, from rows of x."""
    cols = np.column_stack([np.exp(xs[:, :3]), xs[:, 3:5], np.exp(np.clip(xs[:, 5:], *LOG_R_BOUNDS))])
    return {name: cols[:, i] for i, name in enumerate(BOOTSTRAP_NAMES) if i < 5 or free[i]}


def bootstrap_repeated_law(n: npt.ArrayLike, d: npt.ArrayLike, unique: npt.ArrayLike, loss: npt.ArrayLike,
                           fit: RepeatedFit, n_resamples: int = 200, seed: int = 0, *,
                          level: float = 0.95) -> RepeatedBootstrap:
    """Percentile bootstrap intervals for the constants and R* of `fit` (a fit of these same points).

    Resample r weights the points by row r of `bootstrap.resample_weights` (the Bayesian
    bootstrap, seeded: the same seed gives the same intervals). Each resample is refitted
    locally from `fit`'s optimum, all resamples as one batched L-BFGS at tight tolerances: a
    resample's optimum lies near the full-data one, and a grid per resample would cost a
    fit_law each.
    """
    if not 1 <= n_resamples <= MAX_RESAMPLES:
        raise UsageError(f"the number of bootstrap resamples must be from 1 to {MAX_RESAMPLES:,}; got {n_resamples}")
    if not 0 < level < 1:
        raise UsageError(f"the interval level must be in (0, 1); got {level}")
    pts = repeated_points(n, d, unique, loss)
    if pts.log_n.size != fit.n_points:
        raise UsageError(f"the fit is of {fit.n_points} points, not of these {pts.log_n.size}")
    free = _free(fit.law.r_d_star is not None, fit.law.r_n_star is not None)
    weights = resample_weights(pts.log_n.size, n_resamples, seed)
    excess = bool(free[6])

    def fun(x: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return repeated_objective(x, pts, fit.delta, weights[rows], excess=excess)

    x0 = np.tile(np.array(fit.x, dtype=float), (n_resamples, 1))
    batch = lbfgs_in_chunks(fun, x0, batch_rows(pts.log_n.size), free=free, ftol=TIGHT_FTOL, gtol=TIGHT_GTOL)
    samples = _samples(batch.x, free)
    tail = 50.0 * (1.0 - level)
    intervals = {k: tuple(float(v) for v in np.percentile(s, [tail, 100.0 - tail])) for k, s in samples.items()}
    n_at_bound = {k: int(at_bound(samples[k]).sum()) for k in ("r_d_star", "r_n_star") if k in samples}
    return RepeatedBootstrap(n_resamples=int(n_resamples), seed=int(seed), level=float(level),
                                intervals=intervals, samples=samples, n_converged=int(batch.converged.sum()),
                                n_at_bound=n_at_bound)
