"""Fit L(N, D) = E + A / N^alpha + B / D^beta to (N, D, loss) points (Hoffmann et al.'s Approach 3).

Pure functions of numpy arrays, no I/O; loaders are in `scaling.laws.fitting.fitdata`, the fit.json file in
`scaling.laws.results.lawfit`, the bootstrap in `scaling.laws.fitting.bootstrap`.

The method, as in Hoffmann et al. (2022) and Besiroglu et al. (2024): minimise the summed Huber
loss of log residuals (`scaling.laws.fitting.objective`; delta = 1e-3) with L-BFGS from every point of
a grid of starts (Hoffmann's: alpha, beta in {0, 0.5, ..., 2}, log_e in {-1, -0.5, ..., 1},
log_a, log_b in {0, 5, ..., 25}; 4,500 starts), and keep the best. (log_a, log_b: the constants
A, B as logs, not the allocation exponents a, b of `FitResult.a`.)

All starts step together in one batched L-BFGS with scipy's stopping rules
(`scaling.laws.fitting.lbfgs`). The few best end points are then polished by
scipy.optimize.minimize(method="L-BFGS-B", jac=True) at tight tolerances, so the reported
optimum is scipy's and does not depend on where along the objective's flat valley a start
happened to stop. scipy runs with single-threaded BLAS (see `single_threaded_blas`).
"""

from __future__ import annotations

import contextlib
import itertools
import math
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
from pydantic import ValidationError
from scipy.optimize import minimize
from threadpoolctl import threadpool_limits

from scaling.errors import UsageError
from scaling.formats import sci
from scaling.laws.fitting.lbfgs import SCIPY_FTOL, SCIPY_GTOL, SCIPY_MAXITER, lbfgs_in_chunks
from scaling.laws.fitting.objective import (
    DEFAULT_DELTA,
    N_THETA,
    THETA_NAMES,
    EPrior,
    Workspace,
    batch_rows,
    law_from_theta,
    log_residuals,
    objective,
    objective_batched,
    with_prior,
)
from scaling.laws.forms.law import Law
from scaling.schemas.laws import FORM_PARAMS

# Hoffmann et al.'s grid of starting points (Besiroglu et al.'s Appendix).
HOFFMANN_GRID = {
    "log_e": (-1.0, -0.5, 0.0, 0.5, 1.0),
    "log_a": (0.0, 5.0, 10.0, 15.0, 20.0, 25.0),
    "log_b": (0.0, 5.0, 10.0, 15.0, 20.0, 25.0),
    "alpha": (0.0, 0.5, 1.0, 1.5, 2.0),
    "beta": (0.0, 0.5, 1.0, 1.5, 2.0),
}

# Tolerances for the final optimum. The summed Huber objective is small (about 1e-3 on 240
# points) and nearly flat along a valley of (A, B, alpha, beta), where scipy's default
# tolerances (SCIPY_FTOL, SCIPY_GTOL) stop up to ~1e-4 (relative) above the minimum with alpha
# off by ~0.003: fine for ranking starts, too loose for the reported optimum and for bootstrap
# refits.
TIGHT_FTOL = 1e-15
TIGHT_GTOL = 1e-10
# Two end points are "the same optimum" when the objectives agree to this relative tolerance
# and the parameters (E, A, B, alpha, beta) to OPTIMUM_PARAM_RTOL.
OPTIMUM_FUN_RTOL = 1e-4
OPTIMUM_PARAM_RTOL = 1e-2


def grid_from_axes(axes: dict) -> np.ndarray:
    """All combinations of the given values of log_e, log_a, log_b, alpha, beta: an (S, 5) array of starts."""
    missing = [k for k in THETA_NAMES if k not in axes]
    if missing:
        raise UsageError(f"a grid needs values for {', '.join(THETA_NAMES)}; missing {', '.join(missing)}")
    values = [np.asarray(axes[k], dtype=float).ravel() for k in THETA_NAMES]
    if any(v.size == 0 or not np.all(np.isfinite(v)) for v in values):
        raise UsageError("every grid axis needs at least one finite value")
    return np.array(list(itertools.product(*values)), dtype=float)


def hoffmann_grid() -> np.ndarray:
    """Hoffmann et al.'s 4,500 starting points, as an (4500, 5) array of (log_e, log_a, log_b, alpha, beta)."""
    return grid_from_axes(HOFFMANN_GRID)


@dataclass(frozen=True)
class FitResult:
    """The fitted law and how it was found (cf. scipy.optimize.OptimizeResult).

    objective: summed Huber loss at the optimum. n_starts_at_optimum: starts that ended within
    a relative 1e-4 of the best objective (or 2.2e-9 absolute) with all five constants within
    1% of the optimum's. converged: scipy's polish of the best end point reported success, or
    ended where the gradient meets scipy's default gtol.
    """

    law: Law
    objective: float
    n_starts: int
    n_starts_at_optimum: int
    n_starts_converged: int
    converged: bool
    residual_rms: float
    delta: float
    fixed_E: float | None
    n_points: int
    theta: tuple = field(default=())        # (log_e, log_a, log_b, alpha, beta) at the optimum
    message: str = ""
    local_optima: tuple = field(default=(), repr=False)  # distinct end points, best first (theta tuples)
    E_prior: EPrior | None = None           # the Gaussian prior on E the objective carried (objective.EPrior)

    @property
    def end_points(self) -> np.ndarray:
        """The distinct end points (the optimum alone where they were not kept), as starts for a
        refit of nearby data: a resample, or the points less the largest (scaling.laws.checks.holdout)."""
        return np.array(self.local_optima or (self.theta,), dtype=float)

    @property
    def a(self) -> float:
        return self.law.a

    @property
    def b(self) -> float:
        return self.law.b

    @property
    def G(self) -> float:
        return self.law.G


LOG_FLOAT_MAX = math.log(np.finfo(float).max)     # 709.8: e^x beyond this is not a float


def log_points(n: npt.ArrayLike, d: npt.ArrayLike, loss: npt.ArrayLike) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """log n, log d, log loss as flat float arrays; UsageError unless all are positive and finite."""
    n, d, loss = (np.asarray(v, dtype=float).ravel() for v in (n, d, loss))
    if not (n.shape == d.shape == loss.shape):
        raise UsageError(f"n, d and loss must have the same length (got {n.size}, {d.size}, {loss.size})")
    for name, v in (("n", n), ("d", d), ("loss", loss)):
        bad = ~np.isfinite(v) | (v <= 0)
        if bad.any():
            raise UsageError(f"{name} must be positive and finite; {int(bad.sum())} value(s) are not "
                             f"(first at index {int(np.flatnonzero(bad)[0])})")
    log_n, log_d = np.log(n), np.log(d)
    # The compute 6 N D of every point must be a float: the fit's reference compute, the
    # approaches and fit.json (strict JSON has no infinity) all use it.
    huge = log_n + log_d + math.log(6.0) > LOG_FLOAT_MAX
    if huge.any():
        i = int(np.flatnonzero(huge)[0])
        raise UsageError(f"the compute 6 n d must be below {sci(np.finfo(float).max)} (a float); "
                         f"{int(huge.sum())} point(s) are not (first at index {i}: n = {sci(n[i])}, d = {sci(d[i])})")
    return log_n, log_d, np.log(loss)


def _start_grid(grid: dict | npt.ArrayLike | None, fixed_E: float | None) -> np.ndarray:
    """The (S, 5) starts for `grid` (None, axis values or an array), e pinned when E is fixed."""
    starts = hoffmann_grid() if grid is None else (
        grid_from_axes(grid) if isinstance(grid, dict) else np.array(grid, dtype=float, ndmin=2))
    if starts.ndim != 2 or starts.shape[1] != N_THETA or starts.shape[0] == 0:
        raise UsageError("a grid of starts must be an (S, 5) array of (log_e, log_a, log_b, alpha, beta); "
                         f"got shape {starts.shape}")
    if fixed_E is not None:
        starts = starts.copy()
        starts[:, 0] = math.log(fixed_E)
        # Starts that differ only in e collapse to one.
        starts = np.unique(starts, axis=0)
    return starts


def free_mask(fixed_E: float | None) -> np.ndarray:
    """Which of (log_e, log_a, log_b, alpha, beta) are fitted: all, or all but e when E is fixed."""
    free = np.ones(N_THETA, dtype=bool)
    if fixed_E is not None:
        free[0] = False
    return free


@contextlib.contextmanager
def single_threaded_blas() -> Iterator[None]:
    """Run BLAS on one thread for the duration.

    scipy's L-BFGS-B calls BLAS on vectors of length 5. OpenBLAS's worker threads busy-wait
    for work, and on a machine whose cores are all busy each such call can wait for a time
    slice: measured here, one fit from one start took 0.52 s with the default threading and
    0.004 s with one thread.
    """
    with threadpool_limits(limits=1, user_api="blas"):
        yield


def _polish(theta0: npt.ArrayLike, log_n: np.ndarray, log_d: np.ndarray, log_loss: np.ndarray, delta: float,
            free: np.ndarray, weights: np.ndarray | None = None, tight: bool = True, E_prior: EPrior | None = None
            ) -> tuple[np.ndarray, float, bool, str]:
    """scipy L-BFGS-B from theta0 over the free coordinates; tight or scipy's default tolerances."""
    theta0 = np.asarray(theta0, dtype=float)

    def fg(z: np.ndarray) -> tuple[float, np.ndarray]:
        th = theta0.copy()
        th[free] = z
        f, g = with_prior(*objective(th, log_n, log_d, log_loss, delta, weights), th, E_prior)
        return f, g[free]

    options = {"maxiter": SCIPY_MAXITER, **({"ftol": TIGHT_FTOL, "gtol": TIGHT_GTOL} if tight else {})}
    res = minimize(fg, theta0[free], jac=True, method="L-BFGS-B", options=options)
    th = theta0.copy()
    th[free] = res.x
    return th, float(res.fun), bool(res.success), str(res.message)


def _same_optimum(thetas: np.ndarray, funs: np.ndarray, best_theta: np.ndarray, best_fun: float,
                  fun_rtol: float = OPTIMUM_FUN_RTOL, param_rtol: float = OPTIMUM_PARAM_RTOL) -> np.ndarray:
    """Rows whose objective and constants (E, A, B, alpha, beta) agree with the best's.

    Objectives agree within fun_rtol relative, or within scipy's ftol absolute (the stopping
    rule cannot tell smaller differences apart when the objective is near 0, as on exact data).
    """
    close_f = np.abs(funs - best_fun) <= fun_rtol * abs(best_fun) + SCIPY_FTOL
    # log_e, log_a, log_b are logs: a relative change of the constant is a difference of the log.
    d_log = np.abs(thetas[:, :3] - best_theta[:3])
    d_exp = np.abs(thetas[:, 3:] - best_theta[3:]) / np.maximum(np.abs(best_theta[3:]), 1e-12)
    close_p = np.all(d_log <= param_rtol, axis=1) & np.all(d_exp <= param_rtol, axis=1)
    return close_f & close_p


def _distinct(thetas: np.ndarray, funs: np.ndarray, limit: int) -> list[int]:
    """Indices of up to `limit` distinct end points, best objective first."""
    order = np.argsort(funs, kind="stable")
    chosen: list[int] = []
    for i in order:
        if not np.isfinite(funs[i]):
            break
        if chosen and _same_optimum(thetas[chosen], funs[chosen], thetas[i], funs[i], np.inf).any():
            continue
        chosen.append(int(i))
        if len(chosen) >= limit:
            break
    return chosen


def check_fit_inputs(n: npt.ArrayLike, d: npt.ArrayLike, loss: npt.ArrayLike, fixed_E: float | None = None,
                     E_prior: EPrior | None = None) -> None:
    """UsageError when the points cannot determine the law (or E's pin or prior is not a number
    below the lowest loss)."""
    n = np.asarray(n, dtype=float).ravel()
    n_free = 4 if fixed_E is not None else 5
    if n.size < n_free:
        raise UsageError(f"{n.size} point(s) cannot determine {n_free} free parameters; "
                         f"need at least {n_free}" + (" with E fixed" if fixed_E is not None else ""))
    if np.unique(n).size < 2:
        raise UsageError(f"all {n.size} points have one model size (N = {n[0]:.4g}); alpha cannot be "
                         "fitted without at least two sizes")
    d = np.asarray(d, dtype=float).ravel()
    if np.unique(d).size < 2:
        raise UsageError(f"all {d.size} points have one token count (D = {d[0]:.4g}); beta cannot be "
                         "fitted without at least two token counts")
    if fixed_E is not None and not (np.isfinite(fixed_E) and fixed_E > 0):
        raise UsageError(f"fixed E must be positive and finite; got {fixed_E}")
    lowest = float(np.min(loss))
    if fixed_E is not None and fixed_E >= lowest:
        # E is the loss of infinite N and D: every loss of the law lies above it.
        raise UsageError(f"fixed E = {sci(fixed_E)} must be below the lowest loss observed, {sci(lowest)} "
                         "(E is the loss an infinite model on infinite data would reach)")
    if E_prior is not None:
        _check_E_prior(E_prior, fixed_E, lowest)


# The narrowest prior on E, relative to its mean: one part in a million is finer than any fit
# determines E (its intervals are percents), and a narrower one overflowed the penalty (an sd of
# 1e-300: "the fit failed from every start; check the data", blaming the data for the option).
MIN_PRIOR_RELATIVE_SD = 1e-6


def _check_E_prior(E_prior: EPrior, fixed_E: float | None, lowest: float) -> None:
    """UsageError naming the prior on E where it is not a positive mean below the lowest loss with an
    sd from MIN_PRIOR_RELATIVE_SD of the mean to the lowest loss, or E is fixed as well."""
    if fixed_E is not None:
        raise UsageError("E is either fixed or given a prior, not both (--E or --E-prior)")
    if not all(np.isfinite(v) and v > 0 for v in (E_prior.mean, E_prior.sd, E_prior.scale)):
        raise UsageError(f"the prior on E needs a positive mean and standard deviation; got mean "
                         f"{E_prior.mean}, sd {E_prior.sd}", options=("E_prior",))
    if E_prior.mean >= lowest:
        raise UsageError(f"the prior's mean for E, {sci(E_prior.mean)}, must be below the lowest loss "
                         f"observed, {sci(lowest)} (E is the loss an infinite model on infinite data would reach)",
                         options=("E_prior",))
    if E_prior.sd < MIN_PRIOR_RELATIVE_SD * E_prior.mean:
        raise UsageError(f"the prior's standard deviation for E, {E_prior.sd:.4g}, is too small: at least "
                         f"{MIN_PRIOR_RELATIVE_SD:g} of its mean ({MIN_PRIOR_RELATIVE_SD * E_prior.mean:.4g}); to "
                         "hold E at the mean, fix it instead", options=("E_prior",))
    if E_prior.sd > lowest:
        # E lies between 0 and the lowest loss: a prior wider than that whole range says nothing
        # about E, yet the fit would report E as held by it (and each resample draws its mean
        # from N(mean, sd), so an SD of 1e300 draws means of 1e300).
        raise UsageError(f"the prior's standard deviation for E, {E_prior.sd:.4g}, is wider than the whole "
                         f"range E can take, 0 to the lowest loss observed, {lowest:.4g}: it says nothing "
                         f"about E; give one of at most {lowest:.4g}, or no prior to leave E free",
                         options=("E_prior",))


def _check_bounded(theta: np.ndarray) -> None:
    """UsageError when the optimum lies where a constant is too large for a float: the objective
    keeps falling as A (or B, E) grows with its exponent, so the points do not determine the law."""
    big = [f"{name} = e^{v:.0f}" for name, v in zip(("E", "A", "B"), theta[:3]) if v > LOG_FLOAT_MAX]
    if big:
        raise UsageError(f"the fit runs off to {', '.join(big)} (alpha = {theta[3]:.3g}, beta = {theta[4]:.3g}): "
                         "these points do not bound the law's constants, so it is not identified; "
                         "spread N and D wider")


# Iterations of a backtest refit's grid start (`fit_law`'s grid_maxiter): the grid finds the basins,
# and the polish takes the best few to the optimum. On the 32 public tables and their cuts at 1/3 and 1/10
# of the top budget (88 fits of the 4,500 starts, and of the backtest's coarse grid), capping at 50
# changed no optimum (objectives within 2e-7; one table's 1e-4 lower) and cut the objective's
# evaluations by 26-31% and its calls, most of the cost at few points, by 57-62%: a few starts
# crawl along the flat valley for hundreds of iterations. The fit itself runs uncapped: its share of
# starts at the optimum is judged (`diagnostics.optimiser_checks`), and capped starts stop short of
# it. So do the hold-out's and the rollout's refits from the fit's few end points, which cost little:
# capped, the 5-run hold-out of a 6-run micro sweep (5 constants on 5 runs, many exact optima)
# ended at another of them, past what fit.json holds.
GRID_MAXITER = 50

def check_recordable(form: str, params: dict) -> None:
    """UsageError where a fitted law's constants lie outside what fit.json holds (`FORM_PARAMS`: an
    exponent past +-LARGEST_EXPONENT, say): the points do not determine the law. Checked where every
    fit is made, so that a refit inside a fit (a backtest cut's, the hold-out's), whose UsageError
    becomes its reason, is dropped as not identified: it was written, and then every reader of that
    fit.json (load, plan, report) refused the whole fit."""
    try:
        FORM_PARAMS[form].model_validate(params)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))} = {e['input']:.4g} ({e['msg'].lower()})"
                             for e in exc.errors())
        raise UsageError(f"the {form} form's fit runs off to {problems}: these points do not bound the law's "
                         "constants, so it is not identified; spread N and D wider") from None


# Points the grid's starts are run on: a larger table is subsampled evenly to this many. The
# Chinchilla data (245 points) and any sweep of up to 1,000 runs are fitted on all points. At
# 1,000, a 10,000-row fit takes 5.8 s (at 2,000, 10.9 s; bench/bench_fit_memory.py).
RANK_POINTS = 1000


def _ranking_subsample(n_points: int) -> np.ndarray | None:
    """Indices of an even, deterministic subsample of the points for the grid, or None for all."""
    if n_points <= RANK_POINTS:
        return None
    return np.unique(np.linspace(0, n_points - 1, RANK_POINTS).round().astype(int))


def fit_law(n: npt.ArrayLike, d: npt.ArrayLike, loss: npt.ArrayLike, *, delta: float = DEFAULT_DELTA,
            grid: dict | npt.ArrayLike | None = None, fixed_E: float | None = None,
            n_polish: int = 4, E_prior: EPrior | None = None, grid_maxiter: int = SCIPY_MAXITER) -> FitResult:
    """Fit L(N, D) = E + A/N^alpha + B/D^beta by Huber-on-log-residuals from a grid of starts.

    n, d, loss: arrays of parameters, tokens and final loss. delta: Huber threshold on log
    residuals. grid: None for Hoffmann's 4,500 starts, a dict of axis values per log_e, log_a, log_b,
    alpha, beta, or an (S, 5) array of starts. fixed_E: pin the asymptote and fit the other
    four. n_polish: how many distinct best end points scipy polishes. E_prior: a Gaussian prior
    on E added to the objective (`objective.EPrior`; its scale from `quasi_likelihood_scale`).
    grid_maxiter: iterations of each grid start before the polish (scipy's limit, or a backtest
    refit's GRID_MAXITER).
    """
    if not (np.isfinite(delta) and delta > 0):
        raise UsageError(f"Huber delta must be positive; got {delta}")
    check_fit_inputs(n, d, loss, fixed_E, E_prior)
    log_n, log_d, log_loss = log_points(n, d, loss)
    starts = _start_grid(grid, fixed_E)
    free = free_mask(fixed_E)

    # The grid's starts run on every point, or on an even subsample of a large table: they only
    # find the basins, and their cost grows as starts x points. The polish uses every point.
    sub = _ranking_subsample(log_n.size)
    rank_n, rank_d, rank_loss = (v if sub is None else v[sub] for v in (log_n, log_d, log_loss))
    work = Workspace()

    def fun(x: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return with_prior(*objective_batched(x, rank_n, rank_d, rank_loss, delta, work=work), x, E_prior)

    batch = lbfgs_in_chunks(fun, starts, batch_rows(rank_n.size), free=free, maxiter=grid_maxiter)
    funs = np.where(np.isfinite(batch.fun), batch.fun, np.inf)
    if not np.isfinite(funs).any():
        raise UsageError("the fit failed from every start (non-finite objective); check the data")
    candidates = _distinct(batch.x, funs, n_polish)
    with single_threaded_blas():
        polished = [_polish(batch.x[i], log_n, log_d, log_loss, delta, free, E_prior=E_prior) for i in candidates]
    # Keep the best polished point; a polish never makes a point worse than where it began.
    best_k = min(range(len(polished)), key=lambda k: (polished[k][1], k))
    theta, fbest, success, message = polished[best_k]
    if sub is None and fbest > funs[candidates[best_k]]:
        theta, fbest = batch.x[candidates[best_k]].copy(), float(funs[candidates[best_k]])
    _check_bounded(theta)
    check_recordable("chinchilla", law_from_theta(theta).to_dict())
    # Starts at the optimum: by the objective they were run on (the subsample's, when ranked on one).
    ref_theta, ref_f = (theta, fbest) if sub is None else (batch.x[candidates[0]], funs[candidates[0]])
    at_opt = _same_optimum(batch.x, funs, ref_theta, ref_f)
    r = log_residuals(theta, log_n, log_d, log_loss)
    # Tight tolerances can end in a line-search failure at the noise floor; that is still an
    # optimum when the gradient meets scipy's default test.
    gmax = float(np.max(np.abs(with_prior(*objective(theta, log_n, log_d, log_loss, delta), theta, E_prior)[1][free])))
    success = success or gmax <= SCIPY_GTOL
    optima = [tuple(float(v) for v in theta)] + [
        tuple(float(v) for v in batch.x[i]) for i in _distinct(batch.x, funs, 8)
        if not _same_optimum(batch.x[i:i + 1], funs[i:i + 1], ref_theta, ref_f, np.inf)[0]]
    return FitResult(
        law=law_from_theta(theta), objective=fbest, n_starts=int(starts.shape[0]),
        n_starts_at_optimum=int(at_opt.sum()), n_starts_converged=int(batch.converged.sum()),
        converged=success, residual_rms=float(np.sqrt(np.mean(r**2))), delta=float(delta),
        fixed_E=None if fixed_E is None else float(fixed_E), n_points=int(log_n.size),
        theta=tuple(float(v) for v in theta), message=message, local_optima=tuple(optima), E_prior=E_prior,
    )


def fit_scipy_loop(n: npt.ArrayLike, d: npt.ArrayLike, loss: npt.ArrayLike, *, delta: float = DEFAULT_DELTA,
                   grid: dict | npt.ArrayLike | None = None, fixed_E: float | None = None,
                   starts_subset: npt.ArrayLike | None = None, blas_single_thread: bool = True
                   ) -> tuple[np.ndarray, float, np.ndarray, np.ndarray]:
    """The plain reference method: scipy.optimize.minimize(L-BFGS-B) once per start, keep the best.

    Slow (one Python-level optimisation per start); kept to check `fit_law` against and for
    the benchmark. starts_subset: indices of the starts to run (all by default).
    blas_single_thread: run under `single_threaded_blas` as `fit_law` does (False: as a plain
    loop would, with OpenBLAS's default threading).
    Returns (theta of the best end point, its objective, all end points (S, 5), all objectives).
    """
    check_fit_inputs(n, d, loss, fixed_E)
    log_n, log_d, log_loss = log_points(n, d, loss)
    starts = _start_grid(grid, fixed_E)
    if starts_subset is not None:
        starts = starts[np.asarray(starts_subset)]
    free = free_mask(fixed_E)
    xs = np.empty_like(starts)
    fs = np.empty(starts.shape[0])
    with single_threaded_blas() if blas_single_thread else contextlib.nullcontext():
        for i, th0 in enumerate(starts):
            xs[i], fs[i], _, _ = _polish(th0, log_n, log_d, log_loss, delta, free, tight=False)
    fs = np.where(np.isfinite(fs), fs, np.inf)
    best = int(np.argmin(fs))
    return xs[best].copy(), float(fs[best]), xs, fs
