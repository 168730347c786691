"""A batched L-BFGS: many independent minimisations stepped together.

Why. A loop calling scipy.optimize.minimize once per start spends its time in per-call
overhead on a 240-point problem (about 10 s for Hoffmann's 4,500 starts on an idle 2-core
machine; far more on busy cores, see `scaling.laws.fitting.fit.single_threaded_blas`). Here all starts
step together: `lbfgs_batched` is L-BFGS written over a batch of starting points (a vectorised
two-loop recursion, a vectorised weak-Wolfe line search, a convergence mask per start), with
scipy's stopping rules (ftol, gtol) so each start stops where scipy's would.

Generic over the objective: it sees only a function of (points, row indices) returning values
and gradients. Pure numpy, no I/O.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

# scipy's L-BFGS-B defaults, used for every start so that each stops where scipy's would.
SCIPY_FTOL = 1e6 * np.finfo(float).eps   # factr = 1e7 in the Fortran code: 2.22e-9
SCIPY_GTOL = 1e-5
SCIPY_MAXITER = 15000

_MAX_STEP = 1e10    # the line search expands a step no further than this


# fun(x, rows) -> (f, g): the objectives (k,) and gradients (k, P) at the points x (k, P) of rows `rows`.
BatchObjective = Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]

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


class _Memory:
    """Each row's m most recent curvature pairs (s, y) and rho = 1 / s.y, newest last."""

    def __init__(self, S: int, m: int, P: int) -> None:
        self.m = m
        self.s = np.zeros((S, m, P))
        self.y = np.zeros((S, m, P))
        self.rho = np.zeros((S, m))
        self.n_pairs = np.zeros(S, dtype=int)

    def direction(self, idx: np.ndarray, gi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """-H g for rows idx by the two-loop recursion, and which rows have a pair yet.

        Empty slots have rho = 0 and change nothing.
        """
        m = self.m
        sh, yh, rh = self.s[idx], self.y[idx], self.rho[idx]
        q = -gi
        alph = np.empty((idx.size, m))
        for j in range(m - 1, -1, -1):
            alph[:, j] = rh[:, j] * np.einsum("kp,kp->k", sh[:, j], q)
            q -= alph[:, j, None] * yh[:, j]
        has = self.n_pairs[idx] > 0
        sy = np.einsum("kp,kp->k", sh[:, -1], yh[:, -1])
        yy = np.einsum("kp,kp->k", yh[:, -1], yh[:, -1])
        gamma = np.where(has, sy / np.where(has, yy, 1.0), 1.0)
        p = q * gamma[:, None]
        for j in range(m):
            beta_j = rh[:, j] * np.einsum("kp,kp->k", yh[:, j], p)
            p += sh[:, j] * (alph[:, j] - beta_j)[:, None]
        return p, has

    def forget(self, rows: np.ndarray) -> None:
        self.s[rows] = 0.0
        self.y[rows] = 0.0
        self.rho[rows] = 0.0
        self.n_pairs[rows] = 0

    def push(self, rows: np.ndarray, s: np.ndarray, y: np.ndarray, sy: np.ndarray) -> None:
        self.s[rows, :-1] = self.s[rows, 1:]
        self.y[rows, :-1] = self.y[rows, 1:]
        self.rho[rows, :-1] = self.rho[rows, 1:]
        self.s[rows, -1] = s
        self.y[rows, -1] = y
        self.rho[rows, -1] = 1.0 / sy
        self.n_pairs[rows] = np.minimum(self.n_pairs[rows] + 1, self.m)


def _search_direction(memory: _Memory, idx: np.ndarray, gi: np.ndarray, fmask: np.ndarray
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Direction p, slope g.p and first trial step for rows idx."""
    p, has = memory.direction(idx, gi)
    p *= fmask
    gp = np.einsum("kp,kp->k", gi, p)
    # Not a descent direction (numerical trouble): forget the memory, go down the gradient.
    reset = ~(gp < 0) | ~np.all(np.isfinite(p), axis=1)
    if reset.any():
        p[reset] = -gi[reset]
        gp[reset] = -np.einsum("kp,kp->k", gi[reset], gi[reset])
        memory.forget(idx[reset])
        has = has & ~reset
    # First step without curvature information: unit length, as scipy does.
    pnorm = np.sqrt(np.einsum("kp,kp->k", p, p))
    t = np.where(has, 1.0, 1.0 / np.maximum(pnorm, 1e-300))
    t = np.minimum(t, 1.0)
    return p, gp, t


@dataclass
class _LineSearch:
    done: np.ndarray        # (k,) rows that found a step
    f: np.ndarray           # (k,) objective at the accepted step
    g: np.ndarray           # (k, P) gradient there
    t: np.ndarray           # (k,) the accepted step length
    nfev: int


def _line_search(fun: BatchObjective, idx: np.ndarray, x0r: np.ndarray, f0: np.ndarray, p: np.ndarray,
                 gp: np.ndarray, t: np.ndarray, fmask: np.ndarray, max_ls: int, c1: float, c2: float) -> _LineSearch:
    """Vectorised weak-Wolfe search along p from x0r for rows idx, starting at steps t.

    Armijo and curvature both hold: accept. Armijo holds but the slope is still steep: remember
    the point and expand (x4) or bisect upwards. Armijo fails: shrink by safeguarded quadratic
    interpolation inside (lo, t). Rows that run out of trials take their best Armijo point.
    """
    k, P = p.shape
    lo = np.zeros(k)
    hi = np.full(k, np.inf)
    acc_f = np.full(k, np.nan)
    acc_g = np.zeros((k, P))
    acc_t = np.zeros(k)
    have_lo = np.zeros(k, dtype=bool)    # an Armijo point found (lo > 0)
    done = np.zeros(k, dtype=bool)
    nfev = 0
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
        k_ok = pend[ok]
        acc_f[k_ok], acc_g[k_ok], acc_t[k_ok] = ft[ok], gt[ok], tp[ok]
        done[k_ok] = True
        up = armijo & ~curv
        k_up = pend[up]
        lo[k_up] = tp[up]
        have_lo[k_up] = True
        acc_f[k_up], acc_g[k_up], acc_t[k_up] = ft[up], gt[up], tp[up]
        hi_up = hi[k_up]
        t[k_up] = np.where(np.isinf(hi_up), np.minimum(4.0 * tp[up], _MAX_STEP), 0.5 * (lo[k_up] + hi_up))
        down = ~armijo
        k_dn = pend[down]
        hi[k_dn] = tp[down]
        dphi = ft[down] - f0[k_dn] - gp[k_dn] * tp[down]
        tq = np.where(finite[down] & (dphi > 0),
                      -gp[k_dn] * tp[down] ** 2 / (2.0 * np.where(dphi > 0, dphi, 1.0)), 0.5 * tp[down])
        lo_dn = lo[k_dn]
        width = tp[down] - lo_dn
        t[k_dn] = np.clip(tq, lo_dn + 0.1 * width, lo_dn + 0.5 * width)
    done |= ~done & have_lo
    return _LineSearch(done=done, f=acc_f, g=acc_g, t=acc_t, nfev=nfev)


@dataclass
class _State:
    x: np.ndarray
    f: np.ndarray
    g: np.ndarray
    nit: np.ndarray
    status: np.ndarray
    memory: _Memory


def _take_steps(st: _State, idx: np.ndarray, x0r: np.ndarray, p: np.ndarray, ls: _LineSearch, ftol: float,
                gtol: float, maxiter: int) -> None:
    """Move the rows whose line search succeeded, store their curvature pairs, set their status."""
    ok_rows = idx[ls.done]
    if ok_rows.size:
        kk = np.flatnonzero(ls.done)
        step = ls.t[kk, None] * p[kk]
        x_new = x0r[kk] + step
        y = ls.g[kk] - st.g[ok_rows]
        syk = np.einsum("kp,kp->k", step, y)
        f_old = st.f[ok_rows]
        f_new = ls.f[kk]
        st.x[ok_rows] = x_new
        st.f[ok_rows] = f_new
        st.g[ok_rows] = ls.g[kk]
        st.nit[ok_rows] += 1
        # Store the curvature pair where it is usable.
        good = syk > 1e-10 * np.einsum("kp,kp->k", y, y)
        if good.any():
            st.memory.push(ok_rows[good], step[good], y[good], syk[good])
        rel = (f_old - f_new) / np.maximum(np.maximum(np.abs(f_old), np.abs(f_new)), 1.0)
        gmax = np.max(np.abs(st.g[ok_rows]), axis=1)
        code = np.where(rel <= ftol, 1, np.where(gmax <= gtol, 2, 0))
        code = np.where((code == 0) & (st.nit[ok_rows] >= maxiter), 4, code)
        st.status[ok_rows] = code
    st.status[idx[~ls.done]] = 3


def lbfgs_batched(fun: BatchObjective, x0: np.ndarray, *, free: np.ndarray | None = None, m: int = 10,
                  maxiter: int = SCIPY_MAXITER, ftol: float = SCIPY_FTOL, gtol: float = SCIPY_GTOL,
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
    f, g = fun(x, np.arange(S))
    g = g * fmask
    st = _State(x=x, f=f, g=g, nit=np.zeros(S, dtype=int), status=np.zeros(S, dtype=int),
                memory=_Memory(S, m, P))
    nfev = S
    bad = ~np.isfinite(f) | ~np.all(np.isfinite(g), axis=1)
    st.status[bad] = 5
    st.status[(st.status == 0) & (np.max(np.abs(g), axis=1) <= gtol)] = 2
    while True:
        idx = np.flatnonzero(st.status == 0)
        if idx.size == 0:
            break
        p, gp, t = _search_direction(st.memory, idx, st.g[idx], fmask)
        x0r = st.x[idx]
        ls = _line_search(fun, idx, x0r, st.f[idx], p, gp, t, fmask, max_ls, c1, c2)
        nfev += ls.nfev
        _take_steps(st, idx, x0r, p, ls, ftol, gtol, maxiter)
    return BatchResult(x=st.x, fun=st.f, nit=st.nit, status=st.status, nfev=nfev,
                       grad_max=np.max(np.abs(st.g), axis=1))


def lbfgs_in_chunks(fun: BatchObjective, x0: np.ndarray, chunk: int, **options: Any) -> BatchResult:
    """`lbfgs_batched` over consecutive slices of at most `chunk` starts, joined.

    Each start is an independent problem computed row by row, so the result is the same as one
    batch; the slices bound the memory, which grows with the starts in a batch times the points.
    fun(x, rows) is called with rows indexing all of x0.
    """
    x0 = np.asarray(x0, dtype=float)

    def from_row(lo: int) -> BatchObjective:
        return lambda x, rows: fun(x, rows + lo)

    parts = [lbfgs_batched(from_row(lo), x0[lo:lo + chunk], **options)
             for lo in range(0, x0.shape[0], max(int(chunk), 1))]
    if len(parts) == 1:
        return parts[0]
    return BatchResult(x=np.concatenate([p.x for p in parts]), fun=np.concatenate([p.fun for p in parts]),
                       nit=np.concatenate([p.nit for p in parts]), status=np.concatenate([p.status for p in parts]),
                       nfev=sum(p.nfev for p in parts), grad_max=np.concatenate([p.grad_max for p in parts]))
