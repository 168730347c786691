"""VPNLS: the law by variable projection, a fourth estimate of the allocation exponent a.

For fixed exponents (alpha, beta) the law L = E + A N^-alpha + B D^-beta is linear in (E, A, B),
and its least-squares constants under E, A, B >= 0 are one non-negative least-squares solve
(scipy.optimize.nnls). So the fit is a search over two numbers only: a grid over (alpha, beta),
then Nelder-Mead from the best cell, every step projecting E, A, B out exactly. Open-Athena's 2026
analysis of IsoFLOP methods proposed it (VPNLS) because it cannot stop in a basin of the five-
parameter landscape the way L-BFGS from a grid of starts can, and because it weights points by
their loss, not log loss, with plain squares instead of Huber: where it and Approach 3 disagree,
the fit depends on those choices (outliers, the loss scale), not only on the data.

Its interval: a percentile bootstrap over points, each resample refined from the full fit's
exponents. Pure: arrays in, a `VPNLSResult` out.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy.optimize import minimize, nnls

from scaling.train.compute import FlopsPerToken

EXPONENT_GRID = np.arange(0.05, 1.0001, 0.05)    # alpha and beta: 20 x 20 cells, then Nelder-Mead
RESAMPLES = 100
LEVEL = 0.95


@dataclass(frozen=True)
class VPNLSResult:
    E: float
    A: float
    B: float
    alpha: float
    beta: float
    a: float
    b: float
    a_ci: tuple[float, float] | None
    b_ci: tuple[float, float] | None
    n_resamples: int

    def to_dict(self) -> dict:
        """The entry `approaches.vpnls` of a fit.json."""
        return {"method": "vpnls", "a": self.a, "b": self.b,
                "a_ci": list(self.a_ci) if self.a_ci else None, "b_ci": list(self.b_ci) if self.b_ci else None,
                "interval": f"{100 * LEVEL:g}% percentile bootstrap over points ({self.n_resamples} resamples)",
                "params": {"E": self.E, "A": self.A, "B": self.B, "alpha": self.alpha, "beta": self.beta},
                "reason": None}


def _projection(n: np.ndarray, d: np.ndarray, loss: np.ndarray, weights: np.ndarray | None = None
                ) -> Callable[[Sequence[float]], tuple[float, np.ndarray | None]]:
    """The residual sum of squares at (alpha, beta) with E, A, B projected out, and those constants."""
    w = np.ones_like(loss) if weights is None else weights
    root = np.sqrt(w)

    def solve(exponents: Sequence[float]) -> tuple[float, np.ndarray | None]:
        alpha, beta = exponents
        if not (0 < alpha < 5 and 0 < beta < 5):
            return math.inf, None
        design = np.column_stack([np.ones_like(n), n ** -alpha, d ** -beta]) * root[:, None]
        coef, norm = nnls(design, loss * root)
        return norm * norm, coef
    return solve


def _best(n: np.ndarray, d: np.ndarray, loss: np.ndarray, start: Sequence[float] | None = None,
          weights: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray | None]:
    solve = _projection(n, d, loss, weights)
    if start is None:
        cells = [(solve((x, y))[0], x, y) for x in EXPONENT_GRID for y in EXPONENT_GRID]
        start = min(cells)[1:]
    res = minimize(lambda e: solve(e)[0], np.asarray(start, dtype=float), method="Nelder-Mead",
                   options={"xatol": 1e-5, "fatol": 1e-12, "maxiter": 2000})
    return res.x, solve(res.x)[1]


def vpnls(n: npt.ArrayLike, d: npt.ArrayLike, loss: npt.ArrayLike, *,
          flops: FlopsPerToken = FlopsPerToken(), resamples: int = RESAMPLES,
          seed: int = 0) -> VPNLSResult:
    """Fit the law by VPNLS and bootstrap its allocation exponents (a = beta / (alpha + gamma beta)
    under the points' compute count)."""
    n, d, loss = (np.asarray(v, dtype=float) for v in (n, d, loss))
    (alpha, beta), coef = _best(n, d, loss)

    def exponents(al: float, be: float) -> tuple[float, float]:
        s = al + flops.gamma * be
        return be / s, al / s

    a, b = exponents(alpha, beta)
    rng = np.random.default_rng(seed)
    draws = []
    for _ in range(resamples):
        counts = np.bincount(rng.integers(0, n.size, n.size), minlength=n.size).astype(float)
        (al, be), _ = _best(n, d, loss, start=(alpha, beta), weights=counts)
        draws.append(exponents(al, be))
    a_ci = b_ci = None
    if draws:
        tail = 50 * (1 - LEVEL)
        lo, hi = np.percentile(np.array(draws), [tail, 100 - tail], axis=0)
        a_ci, b_ci = (float(lo[0]), float(hi[0])), (float(lo[1]), float(hi[1]))
    assert coef is not None, "Nelder-Mead ended outside 0 < alpha, beta < 5"
    return VPNLSResult(float(coef[0]), float(coef[1]), float(coef[2]), float(alpha), float(beta),
                       float(a), float(b), a_ci, b_ci, int(resamples))
