"""The Chinchilla law L(N, D) = E + A / N^alpha + B / D^beta and its compute-optimal allocation.

Pure functions of the five constants, no I/O. With C = 6 N D, minimising L subject to the
compute constraint gives (Hoffmann et al. 2022, eq. 4):

    N_opt(C) = G (C/6)^a,   D_opt(C) = G^-1 (C/6)^b,
    G = (alpha A / (beta B))^(1 / (alpha + beta)),  a = beta / (alpha + beta),  b = alpha / (alpha + beta).

A law planned for a family whose tokens cost c(N) = 6 kappa N^gamma FLOPs (`flops`, see
`scaling.train.compute`) solves C = c(N) D instead: C/6 becomes C / (6 kappa), beta becomes gamma
beta in G, a and b, and D_opt = (C / 6 kappa)^b / G^gamma. With kappa = gamma = 1 (the default)
every formula is Chinchilla's, to the bit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from scaling.train.compute import FlopsPerToken

PARAM_NAMES = ("E", "A", "B", "alpha", "beta")


@dataclass(frozen=True)
class Law:
    """L(N, D) = E + A / N^alpha + B / D^beta, with N parameters and D training tokens; `flops`: the
    FLOPs a token costs at N, the constraint of the allocation (C = 6 N D by default)."""

    E: float
    A: float
    B: float
    alpha: float
    beta: float
    flops: FlopsPerToken = FlopsPerToken()

    @classmethod
    def from_dict(cls, params: dict) -> Law:
        values: dict[str, Any] = {k: float(params[k]) for k in PARAM_NAMES}
        return cls(**values)

    def to_dict(self) -> dict:
        """The five constants (the compute count is recorded on its own)."""
        return {k: getattr(self, k) for k in PARAM_NAMES}

    def loss(self, n: npt.ArrayLike, d: npt.ArrayLike) -> np.ndarray:
        """Predicted loss at N parameters and D tokens (broadcasts over arrays)."""
        n, d = np.asarray(n, dtype=float), np.asarray(d, dtype=float)
        return self.E + self.A / n**self.alpha + self.B / d**self.beta

    @property
    def has_optimum(self) -> bool:
        """Whether loss falls with both N and D (alpha, beta > 0): else no compute-optimal allocation."""
        return self.alpha > 0 and self.beta > 0

    @property
    def _gamma_beta(self) -> float:
        return self.flops.gamma * self.beta

    @property
    def a(self) -> float:
        """Exponent of N_opt in C."""
        return self.beta / (self.alpha + self._gamma_beta)

    @property
    def b(self) -> float:
        """Exponent of D_opt in C."""
        return self.alpha / (self.alpha + self._gamma_beta)

    @property
    def G(self) -> float:
        return (self.alpha * self.A / (self._gamma_beta * self.B)) ** (1.0 / (self.alpha + self._gamma_beta))

    def _c6(self, compute: npt.ArrayLike) -> np.ndarray:
        return np.asarray(compute, dtype=float) / (6.0 * self.flops.kappa)

    def n_opt(self, compute: npt.ArrayLike) -> np.ndarray:
        """Compute-optimal parameter count for C FLOPs (C = c(N) D; 6 N D by default)."""
        return self.G * self._c6(compute) ** self.a

    def d_opt(self, compute: npt.ArrayLike) -> np.ndarray:
        """Compute-optimal token count for C FLOPs."""
        return self._c6(compute) ** self.b / self.G ** self.flops.gamma

    def tokens_per_param(self, compute: npt.ArrayLike) -> np.ndarray:
        """D_opt / N_opt at C FLOPs; constant in C only when alpha == beta."""
        return self.d_opt(compute) / self.n_opt(compute)

    def optimal_loss(self, compute: npt.ArrayLike) -> np.ndarray:
        """The lowest loss reachable with C FLOPs under this law."""
        return self.loss(self.n_opt(compute), self.d_opt(compute))
