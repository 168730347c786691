"""Spending C FLOPs (C = 6 N D) with only U unique tokens, under the data-constrained law.

Pure functions, no I/O. The law is `scaling.laws.repeated.law.RepeatedLaw` (Muennighoff et al.
2023, arXiv:2305.16264). Three questions:

* `repeated_allocation(law, C, U)`: the N (so D = C / 6N and D / U epochs) minimising L(N, D, U)
  at C, found by a bounded scalar minimiser over ln N; and the loss lost against unlimited unique
  data, the base law's optimum at the same C (`allocation.plan`). The paper has no closed form
  (its README finds the optimum by a grid over N); nor do we.
* `repeat_value(law, epochs)`: what one more token is worth, relative to a fresh one, when the
  run is already at `epochs` epochs: dD'/dD = exp(-R_D / R_D*), R_D = epochs - 1.
* `diminishing_epochs(law, fraction)`: the "return on compute" point, defined as the epochs
  beyond which a repeated token is worth less than `fraction` of a fresh one (see its doc).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np
import numpy.typing as npt
from scipy.optimize import minimize_scalar

from scaling.errors import UsageError
from scaling.formats import positive
from scaling.laws.optimal.allocation import Allocation, check_compute, plan
from scaling.laws.repeated.law import RepeatedLaw

GRID_POINTS = 401     # the grid over ln N that brackets the optimum before Brent's method


@dataclass(frozen=True)
class RepeatedAllocation:
    """The best split of C FLOPs with U unique tokens: N parameters on D tokens (C = 6 N D).

    unconstrained: the base law's optimum at the same C, as if every token could be fresh.
    """

    compute: float
    unique: float
    n: float
    d: float
    loss: float
    unconstrained: Allocation

    @property
    def epochs(self) -> float:
        return self.d / self.unique

    @property
    def tokens_per_param(self) -> float:
        return self.d / self.n

    @property
    def loss_lost(self) -> float:
        """Loss above the unconstrained optimum: what having only U unique tokens costs (>= 0)."""
        fresh = self.unconstrained.loss
        assert fresh is not None, "the optimum of a parametric law (allocation.plan) has a loss"
        return self.loss - fresh

    def to_dict(self) -> dict:
        out = asdict(self)
        out.update(epochs=self.epochs, tokens_per_param=self.tokens_per_param, loss_lost=self.loss_lost)
        return out


def repeated_allocation(law: RepeatedLaw, compute: float, unique: float, *, xatol: float = 1e-10) -> RepeatedAllocation:
    """The N minimising L(N, C / 6N, U) over N in [1, C/6] (D >= 1 token), and what it costs.

    Minimises the reducible loss L - E over x = ln N (E does not move the argmin, and leaving it
    out keeps the flat bottom further above float rounding). The law need not be convex along the
    budget (U_N and U_D switch branches there), so a grid of GRID_POINTS values of x picks the lowest
    bracket first and Brent's bounded method then searches u = x - x_grid within it: scipy's
    stopping rule adds sqrt(eps) |u| to xatol, which on x itself (~20) would cap the precision
    near 3e-7 relative.
    """
    c, u = check_compute(compute), positive(unique, "unique tokens")
    if u < 1.0:   # a fraction of a token: the law's U_D, (U / N) terms run off to inf
        raise UsageError(f"unique tokens must be at least 1 (a count of tokens), got {unique!r}")
    if c <= 6.0:
        raise UsageError(f"compute {c:g} FLOPs cannot train even one parameter on one token (C = 6 N D)")
    log_c6 = math.log(c / 6.0)

    def reducible(x: float | np.ndarray) -> np.ndarray:
        return law.reducible(np.exp(x), np.exp(log_c6 - x), u)

    grid = np.linspace(0.0, log_c6, GRID_POINTS)
    i = int(np.argmin(reducible(grid)))
    x0 = grid[i]
    lo, hi = grid[max(i - 1, 0)] - x0, grid[min(i + 1, GRID_POINTS - 1)] - x0
    res = minimize_scalar(lambda v: float(reducible(x0 + v)), bounds=(lo, hi), method="bounded",
                          options={"xatol": xatol, "maxiter": 10_000})
    n = math.exp(x0 + res.x)
    d = c / (6.0 * n)
    return RepeatedAllocation(c, u, n, d, float(law.loss(n, d, u)), plan(law.base, c))


def _r_d_star(law: RepeatedLaw) -> float:
    if law.r_d_star is None:
        raise UsageError("this law has no R_D* (repeated tokens do not decay): every epoch is worth a fresh one")
    return law.r_d_star


def repeat_value(law: RepeatedLaw, epochs: npt.ArrayLike) -> np.ndarray:
    """dD'/dD = exp(-R_D / R_D*), R_D = max(epochs - 1, 0): one more token's worth against a fresh one.

    It does not depend on N, D or U, only on how many times the data has been seen: the first
    epoch's tokens are worth 1, and each later epoch's less (broadcasts over arrays).
    """
    epochs = np.asarray(epochs, dtype=float)
    if np.any(~np.isfinite(epochs) | (epochs <= 0)):
        raise UsageError("epochs must be positive and finite")
    return np.exp(-np.maximum(epochs - 1.0, 0.0) / _r_d_star(law))


def diminishing_epochs(law: RepeatedLaw, fraction: float = 1.0 / math.e) -> float:
    """The epochs beyond which more epochs stop paying: a repeated token is worth less than
    `fraction` of a fresh one. 1 + R_D* ln(1 / fraction).

    The paper's "return on compute when repeating" (its Figure 3, left; plotstables/return_alloc.ipynb
    in huggingface/datablations) follows the loss of a fixed model as its epochs over a fixed set
    of unique tokens grow: that loss moves only through D', whose growth per token is
    `repeat_value`. The default fraction 1/e puts the point at R_D + 1 = R_D* + 1 epochs, the
    scale on which the law's repeated tokens decay: 16.4 epochs for the published R_D* = 15.4,
    the "returns diminish after about 16 epochs" that readers of the paper quote.
    """
    if not 0 < fraction < 1:
        raise UsageError(f"fraction must be in (0, 1); got {fraction}")
    return 1.0 + _r_d_star(law) * math.log(1.0 / fraction)


def plan_intervals(laws: Sequence[RepeatedLaw], compute: float, unique: float, *, level: float = 0.95) -> dict:
    """Percentile intervals of the optimum with U unique tokens over `laws` (one RepeatedLaw per bootstrap
    sample): name -> (lo, hi) for n, d, epochs, loss, loss_lost and diminishing_epochs."""
    plans = [repeated_allocation(law, compute, unique) for law in laws]
    tail = 50.0 * (1.0 - level)
    values = {"n": [p.n for p in plans], "d": [p.d for p in plans], "epochs": [p.epochs for p in plans],
              "loss": [p.loss for p in plans], "loss_lost": [p.loss_lost for p in plans],
              "diminishing_epochs": [diminishing_epochs(law) for law in laws]}
    return {k: tuple(float(x) for x in np.percentile(v, [tail, 100.0 - tail])) if v else None
            for k, v in values.items()}
