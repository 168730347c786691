"""The Chinchilla law L(N, D) = E + A / N^alpha + B / D^beta and its compute-optimal allocation.

Pure functions of the five constants, no I/O. With C = 6 N D, minimising L subject to the
compute constraint gives (Hoffmann et al. 2022, eq. 4):

    N_opt(C) = G (C/6)^a,   D_opt(C) = G^-1 (C/6)^b,
    G = (alpha A / (beta B))^(1 / (alpha + beta)),  a = beta / (alpha + beta),  b = alpha / (alpha + beta).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

PARAM_NAMES = ("E", "A", "B", "alpha", "beta")


@dataclass(frozen=True)
class Law:
    """L(N, D) = E + A / N^alpha + B / D^beta, with N parameters and D training tokens."""

    E: float
    A: float
    B: float
    alpha: float
    beta: float

    @classmethod
    def from_dict(cls, params: dict) -> "Law":
        return cls(**{k: float(params[k]) for k in PARAM_NAMES})

    def to_dict(self) -> dict:
        return asdict(self)

    def loss(self, n, d):
        """Predicted loss at N parameters and D tokens (broadcasts over arrays)."""
        n, d = np.asarray(n, dtype=float), np.asarray(d, dtype=float)
        return self.E + self.A / n**self.alpha + self.B / d**self.beta

    @property
    def a(self) -> float:
        """Exponent of N_opt in C."""
        return self.beta / (self.alpha + self.beta)

    @property
    def b(self) -> float:
        """Exponent of D_opt in C."""
        return self.alpha / (self.alpha + self.beta)

    @property
    def G(self) -> float:
        return (self.alpha * self.A / (self.beta * self.B)) ** (1.0 / (self.alpha + self.beta))

    def n_opt(self, compute):
        """Compute-optimal parameter count for C FLOPs (C = 6 N D)."""
        return self.G * (np.asarray(compute, dtype=float) / 6.0) ** self.a

    def d_opt(self, compute):
        """Compute-optimal token count for C FLOPs."""
        return (np.asarray(compute, dtype=float) / 6.0) ** self.b / self.G

    def tokens_per_param(self, compute):
        """D_opt / N_opt at C FLOPs; constant in C only when alpha == beta."""
        return self.d_opt(compute) / self.n_opt(compute)

    def optimal_loss(self, compute):
        """The lowest loss reachable with C FLOPs under this law."""
        return self.loss(self.n_opt(compute), self.d_opt(compute))
