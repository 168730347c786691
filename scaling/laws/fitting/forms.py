"""Any law form (`scaling.laws.forms.form.Form`) fitted as the Chinchilla form is: Huber on log residuals.

    result = fit_form(forms.get("kaplan"), n, d, loss)          # multistart L-BFGS, scipy's polish
    thetas = bootstrap_form(result, n, d, loss, n_resamples=100, seed=0)   # Bayesian bootstrap

The same method as `scaling.laws.fitting.fit` and `bootstrap`, generic over the form: the summed
Huber loss (delta 1e-3) of log L_pred - log L_obs, its analytic gradient the Huber derivative times
the form's Jacobian of log L_pred (`form_objective`); every start of the form's grid stepped
together by the batched L-BFGS (`lbfgs`) at scipy's tolerances, the best few distinct end points
polished by scipy's L-BFGS-B at tight tolerances; each Bayesian-bootstrap resample (Dirichlet
weights, `bootstrap.resample_weights`) refitted from the distinct end points in one batch. The
Chinchilla form's own fit keeps its fast path (`fit.fit_law`); this one serves every form.
Pure functions of numpy arrays, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy.optimize import minimize

from scaling.errors import UsageError
from scaling.laws.fitting.bootstrap import resample_weights
from scaling.laws.fitting.fit import TIGHT_FTOL, TIGHT_GTOL, check_recordable, log_points, single_threaded_blas
from scaling.laws.fitting.lbfgs import lbfgs_batched, lbfgs_in_chunks
from scaling.laws.fitting.objective import BATCH_ELEMENTS, DEFAULT_DELTA
from scaling.laws.forms.form import Form, FormLaw

DISTINCT_ATOL = 1e-3      # end points whose every theta entry agrees within this are one optimum
N_END_POINTS = 4          # distinct end points kept: the polish's candidates, a refit's or resample's starts
# Iterations of a grid start: the grid only finds the basins (the polish takes the best to the optimum),
# and along a form's flat valleys (Kaplan's N_c, D_c and alpha_D trade off) a few starts would run
# thousands of iterations: on the Chinchilla table Kaplan's grid took 12 s uncapped, 1.2 s capped.
GRID_MAXITER = 100
BOOTSTRAP_STARTS = 2


@dataclass(frozen=True)
class FormFit:
    """A fitted form: theta at the optimum, its law, the summed Huber objective, the residual RMS (log
    loss), whether scipy's polish converged, and the distinct end points (best first) to start refits of
    nearby data from."""

    form: Form
    theta: tuple
    objective: float
    residual_rms: float
    converged: bool
    n_starts: int
    n_points: int
    delta: float
    end_points: np.ndarray

    @property
    def law(self) -> FormLaw:
        return self.form.law(self.theta)


def form_objective(form: Form, theta: np.ndarray, log_n: np.ndarray, log_d: np.ndarray, log_loss: np.ndarray,
                   delta: float = DEFAULT_DELTA, weights: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The summed (weighted) Huber loss of log residuals and its gradient for rows `theta` (S, P):
    f (S,), grad (S, P). weights: None or (S, M), one row of point weights per theta row."""
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        log_pred, jac = form.log_loss(np.atleast_2d(np.asarray(theta, dtype=float)), log_n, log_d)
        r = log_pred - log_loss
        hp = np.clip(r, -delta, delta)                       # the Huber derivative
        hw = hp if weights is None else hp * weights
        f = np.einsum("sm,sm->s", hw, r - 0.5 * hp)          # Huber value hp (r - hp/2), summed
        grad = np.einsum("sm,smp->sp", hw, jac)
    bad = ~np.isfinite(f) | ~np.all(np.isfinite(grad), axis=1)
    f[bad] = np.inf
    return f, grad


def _rows(form: Form, n_points: int) -> int:
    """Rows per batch that keep the Jacobian's (rows, points, P) array near BATCH_ELEMENTS."""
    return max(1, BATCH_ELEMENTS // max(n_points * form.n_theta, 1))


def _distinct(x: np.ndarray, f: np.ndarray, limit: int) -> list[int]:
    """Indices of up to `limit` end points with distinct theta (DISTINCT_ATOL), best objective first."""
    chosen: list[int] = []
    for i in np.argsort(f, kind="stable"):
        if not np.isfinite(f[i]) or len(chosen) >= limit:
            break
        if all(np.max(np.abs(x[i] - x[j])) > DISTINCT_ATOL for j in chosen):
            chosen.append(int(i))
    return chosen


def _polish(form: Form, theta0: np.ndarray, log_n: np.ndarray, log_d: np.ndarray, log_loss: np.ndarray,
            delta: float) -> tuple[np.ndarray, float, bool]:
    """scipy's L-BFGS-B from theta0 at tight tolerances."""
    def fg(z: np.ndarray) -> tuple[float, np.ndarray]:
        f, g = form_objective(form, z[None, :], log_n, log_d, log_loss, delta)
        return float(f[0]), g[0]

    res = minimize(fg, theta0, jac=True, method="L-BFGS-B",
                   options={"maxiter": 15000, "ftol": TIGHT_FTOL, "gtol": TIGHT_GTOL})
    return np.asarray(res.x, dtype=float), float(res.fun), bool(res.success)


def fit_form(form: Form, n: npt.ArrayLike, d: npt.ArrayLike, loss: npt.ArrayLike, *, delta: float = DEFAULT_DELTA,
             starts: npt.ArrayLike | None = None, n_polish: int = 2) -> FormFit:
    """Fit `form` to the points from `starts` (default: the form's grid; an (S, P) array), keeping the
    best of the `n_polish` best distinct end points after scipy's polish. UsageError where the points
    are too few for the form's constants or no start ends at a finite objective."""
    log_n, log_d, log_loss = log_points(n, d, loss)
    if log_n.size <= form.n_theta:
        raise UsageError(f"{log_n.size} point(s) cannot determine the {form.name} form's {form.n_theta} constants")
    x0 = form.starts() if starts is None else np.array(starts, dtype=float, ndmin=2)

    def fun(x: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return form_objective(form, x, log_n, log_d, log_loss, delta)

    batch = lbfgs_in_chunks(fun, x0, _rows(form, log_n.size), maxiter=GRID_MAXITER)
    funs = np.where(np.isfinite(batch.fun), batch.fun, np.inf)
    candidates = _distinct(batch.x, funs, max(n_polish, 1))
    if not candidates:
        raise UsageError(f"the {form.name} form's fit failed from every start (non-finite objective)")
    with single_threaded_blas():
        polished = [_polish(form, batch.x[i], log_n, log_d, log_loss, delta) for i in candidates]
    best = min(range(len(polished)), key=lambda k: (polished[k][1], k))
    theta, fbest, success = polished[best]
    if not np.isfinite(fbest) or fbest > funs[candidates[best]]:     # a polish never makes a point worse
        theta, fbest = batch.x[candidates[best]].copy(), float(funs[candidates[best]])
    check_recordable(form.name, form.law(theta).to_dict())
    log_pred, _ = form.log_loss(theta[None, :], log_n, log_d)
    ends = [theta] + [batch.x[i] for i in _distinct(batch.x, funs, N_END_POINTS)
                      if np.max(np.abs(batch.x[i] - theta)) > DISTINCT_ATOL]
    return FormFit(form, tuple(float(v) for v in theta), fbest,
                   float(np.sqrt(np.mean((log_pred[0] - log_loss) ** 2))), success, int(x0.shape[0]),
                   int(log_n.size), float(delta), np.array(ends[:N_END_POINTS]))


def bootstrap_form(result: FormFit, n: npt.ArrayLike, d: npt.ArrayLike, loss: npt.ArrayLike, *,
                   n_resamples: int, seed: int = 0) -> np.ndarray:
    """(n_resamples, P) theta of the form refitted to each Bayesian-bootstrap reweighting of the
    points (`resample_weights(M, n_resamples, seed)`, the Chinchilla bootstrap's draws), each from
    the fit's two best distinct end points (a resample's optimum lies near the fit's; the second
    catches a resample that tips into the other basin), all in one batch at tight tolerances, the
    best end point kept."""
    log_n, log_d, log_loss = log_points(n, d, loss)
    starts = result.end_points[:BOOTSTRAP_STARTS]
    S0 = starts.shape[0]
    weights = np.repeat(resample_weights(log_n.size, n_resamples, seed), S0, axis=0)
    x0 = np.tile(starts, (n_resamples, 1))

    def fun(x: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return form_objective(result.form, x, log_n, log_d, log_loss, result.delta, weights[rows])

    batch = lbfgs_batched(fun, x0, ftol=TIGHT_FTOL, gtol=TIGHT_GTOL)
    funs = np.where(np.isfinite(batch.fun), batch.fun, np.inf).reshape(n_resamples, S0)
    return batch.x[np.arange(n_resamples) * S0 + np.argmin(funs, axis=1)]
