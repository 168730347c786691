"""Fit L(N, D) = E + A / N^alpha + B / D^beta to (N, D, loss) points (Hoffmann et al.'s Approach 3).

Pure functions of numpy arrays, no I/O; loaders are in `scaling.laws.fitdata`, the fit.json file in
`scaling.laws.results`.

The method, as in Hoffmann et al. (2022) and Besiroglu et al. (2024):

    log L_pred = LSE(a - alpha log N,  b - beta log D,  e),      A = e^a, B = e^b, E = e^e,

minimise the SUM over points of Huber_delta(log L_pred - log L_obs) (delta = 1e-3) with L-BFGS
from every point of a grid of starts (Hoffmann's: alpha, beta in {0, 0.5, ..., 2}, e in
{-1, -0.5, ..., 1}, a, b in {0, 5, ..., 25}; 4,500 starts), and keep the best.

How it is made fast. A loop calling scipy.optimize.minimize once per start spends its time in
per-call overhead on a 240-point problem (about 10 s for the 4,500 starts on an idle 2-core
machine; far more on busy cores, see `single_threaded_blas`). Here all starts step together: `lbfgs_batched` is an
L-BFGS written over a batch of starting points (vectorised two-loop recursion, a vectorised
weak-Wolfe line search, a convergence mask per start), with scipy's stopping rules (ftol, gtol)
so each start stops where scipy's would. The few best end points are then polished by
scipy.optimize.minimize(method="L-BFGS-B", jac=True) at tight tolerances, so the reported
optimum is scipy's and does not depend on where along the objective's flat valley a start
happened to stop. scipy runs with single-threaded BLAS (see `single_threaded_blas`).

Bootstrap: resampling points with replacement is the same as weighting each point by how many
times it was drawn, so every resample is a weighted fit on the same arrays and all resamples
(times their starts) are fitted as one batch. Each resample starts from the full-data optimum
and from the other distinct end points the full grid reached (see `bootstrap`).
"""

from __future__ import annotations

import contextlib
import itertools
import math
from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import minimize
from threadpoolctl import threadpool_limits

from scaling.errors import UsageError
from scaling.laws.law import Law

# Order of the parameter vector theta used throughout: log E, log A, log B, alpha, beta.
THETA_NAMES = ("e", "a", "b", "alpha", "beta")
N_THETA = 5

# Hoffmann et al.'s grid of starting points (Besiroglu et al.'s Appendix).
HOFFMANN_GRID = {
    "e": (-1.0, -0.5, 0.0, 0.5, 1.0),
    "a": (0.0, 5.0, 10.0, 15.0, 20.0, 25.0),
    "b": (0.0, 5.0, 10.0, 15.0, 20.0, 25.0),
    "alpha": (0.0, 0.5, 1.0, 1.5, 2.0),
    "beta": (0.0, 0.5, 1.0, 1.5, 2.0),
}

DEFAULT_DELTA = 1e-3
# scipy's L-BFGS-B defaults, used for every start so that each stops where scipy's would.
SCIPY_FTOL = 1e6 * np.finfo(float).eps   # factr = 1e7 in the Fortran code: 2.22e-9
SCIPY_GTOL = 1e-5
# Tolerances for the final optimum. The summed Huber objective is small (about 1e-3 on 240
# points) and nearly flat along a valley of (A, B, alpha, beta), where scipy's default
# tolerances stop up to ~1e-4 (relative) above the minimum with alpha off by ~0.003: fine for
# ranking starts, too loose for the reported optimum and for bootstrap refits.
TIGHT_FTOL = 1e-15
TIGHT_GTOL = 1e-10
# Two end points are "the same optimum" when the objectives agree to this relative tolerance
# and the parameters (E, A, B, alpha, beta) to OPTIMUM_PARAM_RTOL.
OPTIMUM_FUN_RTOL = 1e-4
OPTIMUM_PARAM_RTOL = 1e-2


def grid_from_axes(axes: dict) -> np.ndarray:
    """All combinations of the given values of e, a, b, alpha, beta: an (S, 5) array of starts."""
    missing = [k for k in THETA_NAMES if k not in axes]
    if missing:
        raise UsageError(f"a grid needs values for {', '.join(THETA_NAMES)}; missing {', '.join(missing)}")
    values = [np.asarray(axes[k], dtype=float).ravel() for k in THETA_NAMES]
    if any(v.size == 0 or not np.all(np.isfinite(v)) for v in values):
        raise UsageError("every grid axis needs at least one finite value")
    return np.array(list(itertools.product(*values)), dtype=float)


def hoffmann_grid() -> np.ndarray:
    """Hoffmann et al.'s 4,500 starting points, as an (4500, 5) array of (e, a, b, alpha, beta)."""
    return grid_from_axes(HOFFMANN_GRID)


def law_from_theta(theta) -> Law:
    e, a, b, alpha, beta = (float(v) for v in theta)
    return Law(E=math.exp(e), A=math.exp(a), B=math.exp(b), alpha=alpha, beta=beta)


def theta_from_law(law: Law) -> np.ndarray:
    return np.array([math.log(law.E), math.log(law.A), math.log(law.B), law.alpha, law.beta])


# --------------------------------------------------------------------------------------------
# Objective


class Workspace:
    """Reusable scratch arrays for `objective_batched` (large temporaries cost page faults)."""

    def __init__(self):
        self._bufs: dict = {}

    def get(self, name: str, rows: int, cols: int) -> np.ndarray:
        buf = self._bufs.get(name)
        if buf is None or buf.shape[0] < rows or buf.shape[1] != cols:
            buf = np.empty((max(rows, 0 if buf is None else buf.shape[0]), cols))
            self._bufs[name] = buf
        return buf[:rows]


def objective_batched(theta: np.ndarray, log_n: np.ndarray, log_d: np.ndarray, log_loss: np.ndarray,
                      delta: float = DEFAULT_DELTA, weights: np.ndarray | None = None,
                      work: Workspace | None = None):
    """Summed Huber loss of log residuals and its gradient, for a batch of parameter vectors.

    theta: (S, 5) rows of (e, a, b, alpha, beta); log_n, log_d, log_loss: (M,) data;
    weights: None, or (S, M) per-row point weights (bootstrap counts); work: scratch arrays
    to reuse between calls. Returns f (S,) and grad (S, 5).

    The log-sum-exp is taken relative to e, LSE = e + log(1 + e^(t1 - e) + e^(t2 - e)), which
    needs two exponentials per point instead of three; rows where that overflows (t - e > 709,
    far outside any sensible fit) are recomputed with the max-shifted form. Row sums use
    einsum rather than BLAS matrix-vector products, which are slower at these shapes.
    """
    theta = np.asarray(theta, dtype=float)
    S, M = theta.shape[0], log_n.shape[0]
    work = Workspace() if work is None else work
    e = theta[:, 0]
    x1, x2, s, r, hp = (work.get(k, S, M) for k in ("x1", "x2", "s", "r", "hp"))
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        np.multiply(theta[:, 3:4], -log_n, out=x1)
        x1 += (theta[:, 1] - e)[:, None]        # a - alpha log N - e
        np.multiply(theta[:, 4:5], -log_d, out=x2)
        x2 += (theta[:, 2] - e)[:, None]        # b - beta log D - e
        np.exp(x1, out=x1)
        np.exp(x2, out=x2)
        np.add(x1, 1.0, out=s)
        s += x2
        np.log(s, out=r)
        r -= log_loss
        r += e[:, None]                         # residual: log L_pred - log L_obs
        np.clip(r, -delta, delta, out=hp)       # Huber derivative
        hw = hp if weights is None else np.multiply(hp, weights, out=work.get("hw", S, M))
        # Huber value hp (r - hp/2), summed with the weights, as two row-wise dot products.
        f = np.einsum("ij,ij->i", hw, r) - 0.5 * np.einsum("ij,ij->i", hw, hp)
        np.divide(hw, s, out=hw)                # dHuber/dLSE times dLSE/de (= 1/s)
        grad = np.empty((S, N_THETA))
        grad[:, 0] = hw.sum(axis=1)
        x1 *= hw
        x2 *= hw
        grad[:, 1] = x1.sum(axis=1)
        grad[:, 2] = x2.sum(axis=1)
        grad[:, 3] = -np.einsum("ij,j->i", x1, log_n)
        grad[:, 4] = -np.einsum("ij,j->i", x2, log_d)
    bad = ~np.isfinite(f) | ~np.all(np.isfinite(grad), axis=1)
    if bad.any():
        fb, gb = _objective_stable(theta[bad], log_n, log_d, log_loss, delta,
                                   None if weights is None else weights[bad])
        f[bad] = fb
        grad[bad] = gb
    return f, grad


def _objective_stable(theta, log_n, log_d, log_loss, delta, weights):
    """objective_batched with the log-sum-exp shifted by the largest term (no overflow)."""
    theta = np.asarray(theta, dtype=float)
    e, a, b, alpha, beta = (theta[:, i:i + 1] for i in range(N_THETA))
    t1 = alpha * log_n
    np.subtract(a, t1, out=t1)                  # a - alpha log N
    t2 = beta * log_d
    np.subtract(b, t2, out=t2)                  # b - beta log D
    top = np.maximum(t1, t2)
    np.maximum(top, e, out=top)                 # max of the three terms, for a stable LSE
    t1 -= top
    np.exp(t1, out=t1)
    t2 -= top
    np.exp(t2, out=t2)
    t3 = np.subtract(e, top)
    np.exp(t3, out=t3)
    s = t1 + t2
    s += t3
    r = np.log(s)
    r += top
    r -= log_loss                               # residual: log L_pred - log L_obs
    hp = np.minimum(r, delta)
    np.maximum(hp, -delta, out=hp)              # Huber derivative, clip(r, -delta, delta)
    r -= 0.5 * hp
    r *= hp                                     # Huber value: hp (r - hp/2)
    if weights is not None:
        r *= weights
        hp *= weights
    f = r.sum(axis=1)
    hp /= s                                     # dHuber/dLSE / sum of exps
    t1 *= hp
    t2 *= hp
    t3 *= hp
    grad = np.empty((theta.shape[0], N_THETA))
    grad[:, 0] = t3.sum(axis=1)
    grad[:, 1] = t1.sum(axis=1)
    grad[:, 2] = t2.sum(axis=1)
    grad[:, 3] = -np.einsum("ij,j->i", t1, log_n)
    grad[:, 4] = -np.einsum("ij,j->i", t2, log_d)
    return f, grad


def objective(theta, log_n, log_d, log_loss, delta: float = DEFAULT_DELTA, weights=None):
    """The same objective for one parameter vector: (f, grad) with grad of shape (5,).

    Written for one vector (no batch axis), as scipy.optimize.minimize calls it: the per-call
    overhead of the batched version dominates at one row.
    """
    e, a, b, alpha, beta = (float(v) for v in theta)
    with np.errstate(over="ignore", invalid="ignore"):
        x1 = np.exp((a - e) - alpha * log_n)
        x2 = np.exp((b - e) - beta * log_d)
        s = x1 + x2
        s += 1.0
        r = np.log(s)
        r += e - log_loss
        hp = np.minimum(np.maximum(r, -delta), delta)
        hw = hp if weights is None else hp * weights
        f = float(hw @ r - 0.5 * (hw @ hp))
        q = hw / s
        x1 *= q
        x2 *= q
        grad = np.array([q.sum(), x1.sum(), x2.sum(), -(x1 @ log_n), -(x2 @ log_d)])
    if not (math.isfinite(f) and np.all(np.isfinite(grad))):
        w = None if weights is None else np.asarray(weights, dtype=float)[None, :]
        fb, gb = _objective_stable(np.array([[e, a, b, alpha, beta]]), log_n, log_d, log_loss, delta, w)
        return float(fb[0]), gb[0]
    return f, grad


# --------------------------------------------------------------------------------------------
# Batched L-BFGS


@dataclass
class BatchResult:
    x: np.ndarray           # (S, P) end points
    fun: np.ndarray         # (S,) objective at the end points
    nit: np.ndarray         # (S,) iterations taken
    status: np.ndarray      # (S,) 1 ftol, 2 gtol, 3 line search failed, 4 maxiter, 5 non-finite start
    nfev: int               # row-evaluations of the objective, all starts together
    grad_max: np.ndarray    # (S,) largest absolute gradient component at the end points

    @property
    def converged(self) -> np.ndarray:
        """Stopped by a stopping rule, or by the line search at a point that meets scipy's gtol."""
        return (self.status == 1) | (self.status == 2) | ((self.status == 3) & (self.grad_max <= SCIPY_GTOL))


def lbfgs_batched(fun, x0: np.ndarray, *, free: np.ndarray | None = None, m: int = 10,
                  maxiter: int = 15000, ftol: float = SCIPY_FTOL, gtol: float = SCIPY_GTOL,
                  max_ls: int = 30, c1: float = 1e-4, c2: float = 0.9) -> BatchResult:
    """Minimise many independent problems at once with L-BFGS.

    fun(x, rows) -> (f, g): the objectives and gradients of rows `rows` (indices into the
    batch) at points x, of shapes (k,) and (k, P). Each row is an independent problem; rows
    stop on their own by scipy's rules: (f_k - f_k+1) / max(|f_k|, |f_k+1|, 1) <= ftol, or
    max |g| <= gtol. `free` (P,) bool leaves the other coordinates at their start values.

    The line search is a weak-Wolfe bracketing search (Lewis and Overton): expand while the
    slope is still steep, bisect (by safeguarded quadratic interpolation) while the Armijo
    condition fails. Weak Wolfe guarantees s.y > 0, so every accepted step gives a curvature
    pair.
    """
    x = np.array(x0, dtype=float, copy=True)
    S, P = x.shape
    free_mask = np.ones(P, dtype=bool) if free is None else np.asarray(free, dtype=bool)
    fmask = free_mask.astype(float)
    all_rows = np.arange(S)
    f, g = fun(x, all_rows)
    g = g * fmask
    nfev = S
    s_hist = np.zeros((S, m, P))
    y_hist = np.zeros((S, m, P))
    rho = np.zeros((S, m))
    n_pairs = np.zeros(S, dtype=int)
    nit = np.zeros(S, dtype=int)
    status = np.zeros(S, dtype=int)
    bad = ~np.isfinite(f) | ~np.all(np.isfinite(g), axis=1)
    status[bad] = 5
    status[(status == 0) & (np.max(np.abs(g), axis=1) <= gtol)] = 2
    big = 1e10

    while True:
        idx = np.flatnonzero(status == 0)
        if idx.size == 0:
            break
        gi = g[idx]
        # Two-loop recursion, newest pair last; empty slots have rho = 0 and change nothing.
        sh, yh, rh = s_hist[idx], y_hist[idx], rho[idx]
        q = -gi
        alph = np.empty((idx.size, m))
        for j in range(m - 1, -1, -1):
            alph[:, j] = rh[:, j] * np.einsum("kp,kp->k", sh[:, j], q)
            q -= alph[:, j, None] * yh[:, j]
        has = n_pairs[idx] > 0
        sy = np.einsum("kp,kp->k", sh[:, -1], yh[:, -1])
        yy = np.einsum("kp,kp->k", yh[:, -1], yh[:, -1])
        gamma = np.where(has, sy / np.where(has, yy, 1.0), 1.0)
        p = q * gamma[:, None]
        for j in range(m):
            beta_j = rh[:, j] * np.einsum("kp,kp->k", yh[:, j], p)
            p += sh[:, j] * (alph[:, j] - beta_j)[:, None]
        p *= fmask
        gp = np.einsum("kp,kp->k", gi, p)
        # Not a descent direction (numerical trouble): forget the memory, go down the gradient.
        reset = ~(gp < 0) | ~np.all(np.isfinite(p), axis=1)
        if reset.any():
            p[reset] = -gi[reset]
            gp[reset] = -np.einsum("kp,kp->k", gi[reset], gi[reset])
            r_rows = idx[reset]
            s_hist[r_rows] = 0.0
            y_hist[r_rows] = 0.0
            rho[r_rows] = 0.0
            n_pairs[r_rows] = 0
            has = has & ~reset
        # First step without curvature information: unit length, as scipy does.
        pnorm = np.sqrt(np.einsum("kp,kp->k", p, p))
        t = np.where(has, 1.0, 1.0 / np.maximum(pnorm, 1e-300))
        t = np.minimum(t, 1.0)

        # Vectorised weak-Wolfe line search over the rows in idx.
        lo = np.zeros(idx.size)
        hi = np.full(idx.size, np.inf)
        acc_f = np.full(idx.size, np.nan)
        acc_g = np.zeros((idx.size, P))
        acc_t = np.zeros(idx.size)
        have_lo = np.zeros(idx.size, dtype=bool)    # an Armijo point found (lo > 0)
        done = np.zeros(idx.size, dtype=bool)
        f0 = f[idx]
        x0r = x[idx]
        for _ in range(max_ls):
            pend = np.flatnonzero(~done)
            if pend.size == 0:
                break
            tp = t[pend]
            xt = x0r[pend] + tp[:, None] * p[pend]
            ft, gt = fun(xt, idx[pend])
            gt = gt * fmask
            nfev += pend.size
            finite = np.isfinite(ft) & np.all(np.isfinite(gt), axis=1)
            armijo = finite & (ft <= f0[pend] + c1 * tp * gp[pend])
            slope = np.einsum("kp,kp->k", gt, p[pend])
            curv = slope >= c2 * gp[pend]
            ok = armijo & curv
            # Accept where both conditions hold.
            k_ok = pend[ok]
            acc_f[k_ok], acc_g[k_ok], acc_t[k_ok] = ft[ok], gt[ok], tp[ok]
            done[k_ok] = True
            # Armijo holds but slope still steep: remember this point, expand or bisect upwards.
            up = armijo & ~curv
            k_up = pend[up]
            lo[k_up] = tp[up]
            have_lo[k_up] = True
            acc_f[k_up], acc_g[k_up], acc_t[k_up] = ft[up], gt[up], tp[up]
            hi_up = hi[k_up]
            t[k_up] = np.where(np.isinf(hi_up), np.minimum(4.0 * tp[up], big), 0.5 * (lo[k_up] + hi_up))
            # Armijo fails: shrink, by safeguarded quadratic interpolation inside (lo, t).
            down = ~armijo
            k_dn = pend[down]
            hi[k_dn] = tp[down]
            dphi = ft[down] - f0[k_dn] - gp[k_dn] * tp[down]
            tq = np.where(finite[down] & (dphi > 0),
                          -gp[k_dn] * tp[down] ** 2 / (2.0 * np.where(dphi > 0, dphi, 1.0)), 0.5 * tp[down])
            lo_dn = lo[k_dn]
            width = tp[down] - lo_dn
            t[k_dn] = np.clip(tq, lo_dn + 0.1 * width, lo_dn + 0.5 * width)
        # Rows that ran out of line-search trials take their best Armijo point, if any.
        fallback = ~done & have_lo
        done |= fallback
        failed = ~done

        ok_rows = idx[done]
        if ok_rows.size:
            kk = np.flatnonzero(done)
            step = acc_t[kk, None] * p[kk]
            x_new = x0r[kk] + step
            y = acc_g[kk] - g[ok_rows]
            syk = np.einsum("kp,kp->k", step, y)
            f_old = f[ok_rows]
            f_new = acc_f[kk]
            x[ok_rows] = x_new
            f[ok_rows] = f_new
            g[ok_rows] = acc_g[kk]
            nit[ok_rows] += 1
            # Store the curvature pair where it is usable.
            good = syk > 1e-10 * np.einsum("kp,kp->k", y, y)
            upd = ok_rows[good]
            if upd.size:
                s_hist[upd, :-1] = s_hist[upd, 1:]
                y_hist[upd, :-1] = y_hist[upd, 1:]
                rho[upd, :-1] = rho[upd, 1:]
                s_hist[upd, -1] = step[good]
                y_hist[upd, -1] = y[good]
                rho[upd, -1] = 1.0 / syk[good]
                n_pairs[upd] = np.minimum(n_pairs[upd] + 1, m)
            rel = (f_old - f_new) / np.maximum(np.maximum(np.abs(f_old), np.abs(f_new)), 1.0)
            gmax = np.max(np.abs(g[ok_rows]), axis=1)
            st = np.where(rel <= ftol, 1, np.where(gmax <= gtol, 2, 0))
            st = np.where((st == 0) & (nit[ok_rows] >= maxiter), 4, st)
            status[ok_rows] = st
        status[idx[failed]] = 3

    return BatchResult(x=x, fun=f, nit=nit, status=status, nfev=nfev, grad_max=np.max(np.abs(g), axis=1))


# --------------------------------------------------------------------------------------------
# The fit


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
    theta: tuple = field(default=())        # (e, a, b, alpha, beta) at the optimum
    message: str = ""
    local_optima: tuple = field(default=(), repr=False)  # distinct end points, best first (theta tuples)

    @property
    def a(self) -> float:
        return self.law.a

    @property
    def b(self) -> float:
        return self.law.b

    @property
    def G(self) -> float:
        return self.law.G


def _prepare(n, d, loss):
    n, d, loss = (np.asarray(v, dtype=float).ravel() for v in (n, d, loss))
    if not (n.shape == d.shape == loss.shape):
        raise UsageError(f"n, d and loss must have the same length (got {n.size}, {d.size}, {loss.size})")
    for name, v in (("n", n), ("d", d), ("loss", loss)):
        bad = ~np.isfinite(v) | (v <= 0)
        if bad.any():
            raise UsageError(f"{name} must be positive and finite; {int(bad.sum())} value(s) are not "
                             f"(first at index {int(np.flatnonzero(bad)[0])})")
    return np.log(n), np.log(d), np.log(loss)


def _start_grid(grid, fixed_E):
    starts = hoffmann_grid() if grid is None else (
        grid_from_axes(grid) if isinstance(grid, dict) else np.array(grid, dtype=float, ndmin=2))
    if starts.ndim != 2 or starts.shape[1] != N_THETA or starts.shape[0] == 0:
        raise UsageError(f"a grid of starts must be an (S, 5) array of (e, a, b, alpha, beta); got shape {starts.shape}")
    if fixed_E is not None:
        starts = starts.copy()
        starts[:, 0] = math.log(fixed_E)
        # Starts that differ only in e collapse to one.
        starts = np.unique(starts, axis=0)
    return starts


def _free_mask(fixed_E):
    free = np.ones(N_THETA, dtype=bool)
    if fixed_E is not None:
        free[0] = False
    return free


@contextlib.contextmanager
def single_threaded_blas():
    """Run BLAS on one thread for the duration.

    scipy's L-BFGS-B calls BLAS on vectors of length 5. OpenBLAS's worker threads busy-wait
    for work, and on a machine whose cores are all busy each such call can wait for a time
    slice: measured here, one fit from one start took 0.52 s with the default threading and
    0.004 s with one thread.
    """
    with threadpool_limits(limits=1, user_api="blas"):
        yield


def _polish(theta0, log_n, log_d, log_loss, delta, free, weights=None, tight=True):
    """scipy L-BFGS-B from theta0 over the free coordinates; tight or scipy's default tolerances."""
    theta0 = np.asarray(theta0, dtype=float)

    def fg(z):
        th = theta0.copy()
        th[free] = z
        f, g = objective(th, log_n, log_d, log_loss, delta, weights)
        return f, g[free]

    options = {"maxiter": 15000} if tight is False else {"maxiter": 15000, "ftol": TIGHT_FTOL, "gtol": TIGHT_GTOL}
    res = minimize(fg, theta0[free], jac=True, method="L-BFGS-B", options=options)
    th = theta0.copy()
    th[free] = res.x
    return th, float(res.fun), bool(res.success), str(res.message)


def _same_optimum(thetas: np.ndarray, funs: np.ndarray, best_theta: np.ndarray, best_fun: float,
                  fun_rtol=OPTIMUM_FUN_RTOL, param_rtol=OPTIMUM_PARAM_RTOL) -> np.ndarray:
    """Rows whose objective and constants (E, A, B, alpha, beta) agree with the best's.

    Objectives agree within fun_rtol relative, or within scipy's ftol absolute (the stopping
    rule cannot tell smaller differences apart when the objective is near 0, as on exact data).
    """
    close_f = np.abs(funs - best_fun) <= fun_rtol * abs(best_fun) + SCIPY_FTOL
    # e, a, b are logs: a relative change of the constant is a difference of the log.
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


def check_fit_inputs(n, d, loss, fixed_E=None) -> None:
    """UsageError when the points cannot determine the law."""
    n = np.asarray(n, dtype=float).ravel()
    n_free = 4 if fixed_E is not None else 5
    if n.size < n_free:
        raise UsageError(f"{n.size} point(s) cannot determine {n_free} free parameters; "
                         f"need at least {n_free}" + (" with E fixed" if fixed_E is not None else ""))
    if np.unique(n).size < 2:
        raise UsageError(f"all {n.size} points have one model size (N = {n[0]:.4g}); alpha cannot be "
                         "fitted without at least two sizes")
    if fixed_E is not None and not (np.isfinite(fixed_E) and fixed_E > 0):
        raise UsageError(f"fixed E must be positive and finite; got {fixed_E}")


def fit_law(n, d, loss, *, delta: float = DEFAULT_DELTA, grid=None, fixed_E: float | None = None,
            n_polish: int = 4) -> FitResult:
    """Fit L(N, D) = E + A/N^alpha + B/D^beta by Huber-on-log-residuals from a grid of starts.

    n, d, loss: arrays of parameters, tokens and final loss. delta: Huber threshold on log
    residuals. grid: None for Hoffmann's 4,500 starts, a dict of axis values per e, a, b,
    alpha, beta, or an (S, 5) array of starts. fixed_E: pin the asymptote and fit the other
    four. n_polish: how many distinct best end points scipy polishes.
    """
    if not (np.isfinite(delta) and delta > 0):
        raise UsageError(f"Huber delta must be positive; got {delta}")
    check_fit_inputs(n, d, loss, fixed_E)
    log_n, log_d, log_loss = _prepare(n, d, loss)
    starts = _start_grid(grid, fixed_E)
    free = _free_mask(fixed_E)

    work = Workspace()

    def fun(x, rows):
        return objective_batched(x, log_n, log_d, log_loss, delta, work=work)

    batch = lbfgs_batched(fun, starts, free=free)
    funs = np.where(np.isfinite(batch.fun), batch.fun, np.inf)
    if not np.isfinite(funs).any():
        raise UsageError("the fit failed from every start (non-finite objective); check the data")
    candidates = _distinct(batch.x, funs, n_polish)
    with single_threaded_blas():
        polished = [_polish(batch.x[i], log_n, log_d, log_loss, delta, free) for i in candidates]
    # Keep the best polished point; a polish never makes a point worse than where it began.
    best_k = min(range(len(polished)), key=lambda k: (polished[k][1], k))
    theta, fbest, success, message = polished[best_k]
    if fbest > funs[candidates[best_k]]:
        theta, fbest = batch.x[candidates[best_k]].copy(), float(funs[candidates[best_k]])
    at_opt = _same_optimum(batch.x, funs, theta, fbest)
    r = _log_residuals(theta, log_n, log_d, log_loss)
    # Tight tolerances can end in a line-search failure at the noise floor; that is still an
    # optimum when the gradient meets scipy's default test.
    gmax = float(np.max(np.abs(objective(theta, log_n, log_d, log_loss, delta)[1][free])))
    success = success or gmax <= SCIPY_GTOL
    optima = [tuple(float(v) for v in theta)] + [
        tuple(float(v) for v in batch.x[i]) for i in _distinct(batch.x, funs, 8)
        if not _same_optimum(batch.x[i:i + 1], funs[i:i + 1], theta, fbest, np.inf)[0]]
    return FitResult(
        law=law_from_theta(theta), objective=fbest, n_starts=int(starts.shape[0]),
        n_starts_at_optimum=int(at_opt.sum()), n_starts_converged=int(batch.converged.sum()),
        converged=success, residual_rms=float(np.sqrt(np.mean(r**2))), delta=float(delta),
        fixed_E=None if fixed_E is None else float(fixed_E), n_points=int(log_n.size),
        theta=tuple(float(v) for v in theta), message=message, local_optima=tuple(optima),
    )


def _log_residuals(theta, log_n, log_d, log_loss):
    e, a, b, alpha, beta = theta
    terms = np.stack([a - alpha * log_n, b - beta * log_d, np.full_like(log_n, e)])
    top = terms.max(axis=0)
    return top + np.log(np.exp(terms - top).sum(axis=0)) - log_loss


def fit_scipy_loop(n, d, loss, *, delta: float = DEFAULT_DELTA, grid=None, fixed_E=None,
                   starts_subset=None, blas_single_thread: bool = True):
    """The plain reference method: scipy.optimize.minimize(L-BFGS-B) once per start, keep the best.

    Slow (one Python-level optimisation per start); kept to check `fit_law` against and for
    the benchmark. starts_subset: indices of the starts to run (all by default).
    blas_single_thread: run under `single_threaded_blas` as `fit_law` does (False: as a plain
    loop would, with OpenBLAS's default threading).
    Returns (theta of the best end point, its objective, all end points (S, 5), all objectives).
    """
    check_fit_inputs(n, d, loss, fixed_E)
    log_n, log_d, log_loss = _prepare(n, d, loss)
    starts = _start_grid(grid, fixed_E)
    if starts_subset is not None:
        starts = starts[np.asarray(starts_subset)]
    free = _free_mask(fixed_E)
    xs = np.empty_like(starts)
    fs = np.empty(starts.shape[0])
    with single_threaded_blas() if blas_single_thread else contextlib.nullcontext():
        for i, th0 in enumerate(starts):
            xs[i], fs[i], _, _ = _polish(th0, log_n, log_d, log_loss, delta, free, tight=False)
    fs = np.where(np.isfinite(fs), fs, np.inf)
    best = int(np.argmin(fs))
    return xs[best].copy(), float(fs[best]), xs, fs


# --------------------------------------------------------------------------------------------
# Bootstrap

CI_NAMES = ("E", "A", "B", "alpha", "beta", "a", "b", "G", "tokens_per_param")


@dataclass(frozen=True)
class BootstrapResult:
    """Percentile intervals from refitting resamples of the points (drawn with replacement)."""

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


def derived_quantities(theta: np.ndarray, reference_compute: float) -> dict:
    """E, A, B, alpha, beta, a, b, G and D_opt/N_opt at C_ref for rows of theta (vectorised)."""
    theta = np.atleast_2d(theta)
    e, la, lb, alpha, beta = theta.T
    s = alpha + beta
    with np.errstate(invalid="ignore", divide="ignore"):
        a_exp = beta / s
        b_exp = alpha / s
    log_c6 = math.log(reference_compute / 6.0)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        # G and the allocation exist only for alpha, beta > 0 (NaN otherwise).
        ok = (alpha > 0) & (beta > 0)
        log_g = np.where(ok, (np.log(np.where(ok, alpha, 1.0)) + la - np.log(np.where(ok, beta, 1.0)) - lb) / s,
                         np.nan)
        a_exp = np.where(ok, a_exp, np.nan)
        b_exp = np.where(ok, b_exp, np.nan)
        # D_opt / N_opt = G^-2 (C/6)^(b - a)
        log_tpp = -2.0 * log_g + (b_exp - a_exp) * log_c6
        return {"E": np.exp(e), "A": np.exp(la), "B": np.exp(lb), "alpha": alpha, "beta": beta,
                "a": a_exp, "b": b_exp, "G": np.exp(log_g), "tokens_per_param": np.exp(log_tpp)}


def resample_counts(n_points: int, n_resamples: int, seed: int) -> np.ndarray:
    """(n_resamples, n_points) counts: how often each point is drawn in each resample.

    Resample r draws n_points indices with replacement from np.random.default_rng(seed), in
    order r = 0, 1, ...; weighting point i by its count is the same fit as repeating it.
    """
    rng = np.random.default_rng(seed)
    counts = np.empty((n_resamples, n_points))
    for r in range(n_resamples):
        counts[r] = np.bincount(rng.integers(0, n_points, size=n_points), minlength=n_points)
    return counts


def bootstrap(n, d, loss, n_resamples: int = 1000, seed: int = 0, *, delta: float = DEFAULT_DELTA,
              fixed_E: float | None = None, reference_compute: float | None = None,
              level: float = 0.95, full_fit: FitResult | None = None, extra_starts=None) -> BootstrapResult:
    """Percentile bootstrap intervals for the constants, allocation exponents and tokens/param.

    Each resample draws len(n) points with replacement (numpy Generator seeded with `seed`) and
    is refitted with the same objective. Starts, per resample: the full-data optimum, the other
    distinct end points of the full-data grid fit (up to 7; constants differing by more than
    1%), and `extra_starts` if given. This is a deliberate shortcut over running the 4,500-point grid per resample: a
    resample's optimum lies near the full-data one, and the other basins the grid found are
    tried too. tests/test_fit.py checks on resamples that the full grid finds the same optimum
    (checked on 12 resamples while writing this: objectives equal to 1e-13). All starts run
    the batched L-BFGS at tight tolerances (TIGHT_FTOL, TIGHT_GTOL): at scipy's defaults a
    resample can stop 1e-4 above its minimum with alpha off by 0.003, which would pull the
    resamples towards the full-data optimum and narrow the intervals. No per-resample scipy call.

    reference_compute: C at which tokens_per_param is evaluated (default: the largest 6 N D).
    """
    if n_resamples < 1:
        raise UsageError(f"the number of bootstrap resamples must be at least 1; got {n_resamples}")
    if not 0 < level < 1:
        raise UsageError(f"the interval level must be in (0, 1); got {level}")
    check_fit_inputs(n, d, loss, fixed_E)
    log_n, log_d, log_loss = _prepare(n, d, loss)
    if reference_compute is None:
        reference_compute = float(np.max(6.0 * np.exp(log_n + log_d)))
    if not (np.isfinite(reference_compute) and reference_compute > 0):
        raise UsageError(f"reference compute must be positive; got {reference_compute}")
    if full_fit is None:
        full_fit = fit_law(n, d, loss, delta=delta, fixed_E=fixed_E)
    starts = np.array(full_fit.local_optima[:8], dtype=float)
    if extra_starts is not None:
        starts = np.vstack([starts, np.array(extra_starts, dtype=float, ndmin=2)])
    free = _free_mask(fixed_E)
    M = log_n.size
    counts = resample_counts(M, n_resamples, seed)
    S0 = starts.shape[0]
    weights = np.repeat(counts, S0, axis=0)             # row r*S0 + k: resample r, start k
    x0 = np.tile(starts, (n_resamples, 1))

    work = Workspace()

    def fun(x, rows):
        return objective_batched(x, log_n, log_d, log_loss, delta, weights[rows], work=work)

    batch = lbfgs_batched(fun, x0, free=free, ftol=TIGHT_FTOL, gtol=TIGHT_GTOL)
    funs = np.where(np.isfinite(batch.fun), batch.fun, np.inf).reshape(n_resamples, S0)
    best = np.argmin(funs, axis=1)
    rows = np.arange(n_resamples) * S0 + best
    thetas = batch.x[rows]
    samples = derived_quantities(thetas, reference_compute)
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
    return BootstrapResult(
        n_resamples=int(n_resamples), seed=int(seed), level=float(level),
        reference_compute=float(reference_compute), intervals=intervals, samples=samples,
        n_starts_per_resample=int(S0), n_converged=int(batch.converged[rows].sum()),
        n_undefined=n_undefined,
    )
