"""The Approach-3 objective: summed Huber loss of log residuals, with its gradient.

The law L(N, D) = E + A / N^alpha + B / D^beta is written over theta = (e, a, b, alpha, beta)
with A = e^a, B = e^b, E = e^e, as in Hoffmann et al. (2022) and Besiroglu et al. (2024):

    log L_pred = LSE(a - alpha log N,  b - beta log D,  e),

and the objective is the SUM over points of Huber_delta(log L_pred - log L_obs), optionally
weighted per point (the bootstrap's draw counts). Pure functions of numpy arrays: a batched
form for many theta at once (`objective_batched`), a one-vector form for scipy
(`objective`), and an overflow-safe form both fall back to (`_objective_stable`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from scaling.laws.forms.law import Law

# Order of the parameter vector theta used throughout: log E, log A, log B, alpha, beta.
THETA_NAMES = ("log_e", "log_a", "log_b", "alpha", "beta")
N_THETA = 5

# Huber threshold on log residuals (Hoffmann et al.'s 1e-3).
DEFAULT_DELTA = 1e-3


def law_from_theta(theta: Sequence[float] | np.ndarray) -> Law:
    e, a, b, alpha, beta = (float(v) for v in theta)
    return Law(E=math.exp(e), A=math.exp(a), B=math.exp(b), alpha=alpha, beta=beta)


def theta_from_law(law: Law) -> np.ndarray:
    return np.array([math.log(law.E), math.log(law.A), math.log(law.B), law.alpha, law.beta])


def log_loss_jacobian(law: Law, n: npt.ArrayLike, d: npt.ArrayLike) -> np.ndarray:
    """(M, 5): the derivatives of log L(N, D) in theta (log E, log A, log B, alpha, beta) at M
    points: each term's share of the loss, and for the exponents that share times -log N (-log D).
    The Gauss-Newton covariance of a fit is scatter^2 (J^T J)^-1 with J these rows at its runs."""
    n, d = np.asarray(n, dtype=float), np.asarray(d, dtype=float)
    terms = np.stack([np.full_like(n, law.E), law.A / n**law.alpha, law.B / d**law.beta], axis=1)
    loss = terms.sum(axis=1)
    return np.column_stack([terms / loss[:, None], -terms[:, 1] * np.log(n) / loss, -terms[:, 2] * np.log(d) / loss])


@dataclass(frozen=True)
class Centre:
    """Where log N and log D are measured from while fitting: their means over the points.

    log L_pred depends on a and alpha only through a - alpha log N. Measured from the origin (log N
    about 20), a change of alpha moves every point's term by about 20 times as much as it moves
    the slope, so a and alpha move together along a narrow valley; measured from the points'
    mean, a' = a - alpha mean(log N) and alpha are nearly independent. The law and the objective
    are the same. The bootstrap's refits, at tight tolerances from the fit's optimum, take about a
    third less work this way (the same intervals). The grid fit (`fit.fit_law`) stays in the law's own
    coordinates: from the same starts it would take other paths, and where the points do not
    determine the law (a 6-run micro sweep: 5 constants, many equal optima) end at another optimum,
    for a saving of about a tenth of its work.
    """

    log_n: float = 0.0
    log_d: float = 0.0

    @classmethod
    def of(cls, log_n: np.ndarray, log_d: np.ndarray) -> Centre:
        return cls(float(np.mean(log_n)), float(np.mean(log_d)))

    def points(self, log_n: np.ndarray, log_d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """log N and log D measured from the centre."""
        return log_n - self.log_n, log_d - self.log_d

    def to_centred(self, theta: npt.ArrayLike) -> np.ndarray:
        """theta (..., 5) with a and b in centred coordinates: a - alpha c_N, b - beta c_D."""
        theta = np.array(theta, dtype=float)
        theta[..., 1] -= theta[..., 3] * self.log_n
        theta[..., 2] -= theta[..., 4] * self.log_d
        return theta

    def from_centred(self, theta: npt.ArrayLike) -> np.ndarray:
        """`to_centred` undone: theta in the law's own coordinates."""
        theta = np.array(theta, dtype=float)
        theta[..., 1] += theta[..., 3] * self.log_n
        theta[..., 2] += theta[..., 4] * self.log_d
        return theta


# Elements of one (start, point) scratch array per call of objective_batched: about 6 such arrays
# are live at once, so a call holds about 100 MB however many starts and points there are.
BATCH_ELEMENTS = 2**21


def batch_rows(n_points: int) -> int:
    """Starts per call of objective_batched on `n_points` points that keep its memory bounded."""
    return max(1, BATCH_ELEMENTS // max(int(n_points), 1))


class Workspace:
    """Reusable scratch arrays for `objective_batched` (large temporaries cost page faults)."""

    def __init__(self) -> None:
        self._bufs: dict = {}

    def get(self, name: str, rows: int, cols: int) -> np.ndarray:
        buf = self._bufs.get(name)
        if buf is None or buf.shape[0] < rows or buf.shape[1] != cols:
            buf = np.empty((max(rows, 0 if buf is None else buf.shape[0]), cols))
            self._bufs[name] = buf
        return buf[:rows]


def objective_batched(theta: np.ndarray, log_n: np.ndarray, log_d: np.ndarray, log_loss: np.ndarray,
                      delta: float = DEFAULT_DELTA, weights: np.ndarray | None = None,
                      work: Workspace | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Summed Huber loss of log residuals and its gradient, for a batch of parameter vectors.

    theta: (S, 5) rows of (e, a, b, alpha, beta); log_n, log_d: (M,) data; log_loss: (M,), or
    (S, M) per-row losses (a residual bootstrap's resamples);
    weights: None, or (S, M) per-row point weights (a bootstrap resample's); work: scratch arrays
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
        fb, gb = _objective_stable(theta[bad], log_n, log_d, log_loss if log_loss.ndim == 1 else log_loss[bad],
                                   delta, None if weights is None else weights[bad])
        f[bad] = fb
        grad[bad] = gb
    return f, grad


def _objective_stable(theta: np.ndarray, log_n: np.ndarray, log_d: np.ndarray, log_loss: np.ndarray, delta: float,
                      weights: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
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


def objective(theta: Sequence[float] | np.ndarray, log_n: np.ndarray, log_d: np.ndarray, log_loss: np.ndarray,
              delta: float = DEFAULT_DELTA, weights: npt.ArrayLike | None = None) -> tuple[float, np.ndarray]:
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


def log_residuals(theta: Sequence[float] | np.ndarray, log_n: np.ndarray, log_d: np.ndarray,
                  log_loss: np.ndarray) -> np.ndarray:
    """log L_pred - log L_obs at one theta, by the max-shifted log-sum-exp."""
    e, a, b, alpha, beta = theta
    terms = np.stack([a - alpha * log_n, b - beta * log_d, np.full_like(log_n, e)])
    top = terms.max(axis=0)
    return top + np.log(np.exp(terms - top).sum(axis=0)) - log_loss


@dataclass(frozen=True)
class EPrior:
    """A Gaussian prior on the asymptote E (mean, sd, in loss units), as a penalty added to the
    summed Huber objective: scale * (E - mean)^2 / (2 sd^2).

    `scale` puts the penalty in the objective's units: the objective over `scale` is to weigh E as
    a negative log-likelihood would, so that an sd of 0.05 means 0.05 against the evidence of the
    runs, as a Bayesian's prior would. `prior.prior_scale` measures it from the fit (the
    objective's curvature in E times the bootstrap's variance of E); `quasi_likelihood_scale`
    derives it from the Huber loss alone (its fallback)."""

    mean: float
    sd: float
    scale: float = 1.0
    source: str | None = None        # where the prior came from, in words (another fit's E: `api.E_prior_from`)

    def penalty(self, log_e: np.ndarray, mean: npt.ArrayLike | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(penalty, its derivative in log E) at each log E; `mean`: per-row means (a bootstrap's
        draws of the prior, `bootstrap`) in place of `self.mean`."""
        with np.errstate(over="ignore", invalid="ignore"):     # a wild start: inf, which L-BFGS rejects
            e = np.exp(np.asarray(log_e, dtype=float))
            z = (e - (self.mean if mean is None else np.asarray(mean, dtype=float))) / self.sd
            return self.scale * 0.5 * z ** 2, self.scale * z * e / self.sd

    def to_json(self) -> dict:
        return {"mean": self.mean, "sd": self.sd, "scale": self.scale,
                **({} if self.source is None else {"source": self.source})}


def quasi_likelihood_scale(log_residuals: npt.ArrayLike, delta: float) -> float:
    """The factor that turns the summed Huber objective into a negative log-likelihood (`EPrior`):
    delta b on Huber's linear arm (b = mean |r|, the Laplace scale's maximum-likelihood estimate,
    where delta < b); on its quadratic arm (delta >= b) the objective is sum r^2 / 2, a Gaussian's
    negative log-likelihood times sigma^2 = mean r^2."""
    r = np.asarray(log_residuals, dtype=float)
    b = float(np.mean(np.abs(r)))
    return delta * b if delta < b else float(np.mean(r ** 2))


def with_prior(f: Any, grad: np.ndarray, theta: np.ndarray, prior: EPrior | None,
               mean: npt.ArrayLike | None = None) -> tuple[Any, np.ndarray]:
    """The objective and its gradient (batched: f (S,), grad (S, 5); or one vector) with the
    prior's penalty on E added (unchanged without a prior)."""
    if prior is None:
        return f, grad
    theta = np.asarray(theta, dtype=float)
    pf, pg = prior.penalty(theta[..., 0], mean)
    grad = np.array(grad, dtype=float)
    grad[..., 0] += pg
    return (f + pf if np.ndim(f) else float(f + pf)), grad
