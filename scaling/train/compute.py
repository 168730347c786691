"""What one training token costs, as a function of N: the constraint a compute-optimal plan obeys.

Chinchilla's allocation minimises L(N, D) subject to C = 6 N D. That is a model of the FLOPs per
token, c(N) = 6 N, and at tiny shapes it is far from what a run spends: at vocabulary 1,024 and
context 128 the output layer and attention make the exact count 1.15-1.22x 6 N_total and
1.44-3.60x 6 N_non-embedding (`scaling.train.counts`). Planning C = 6 N D with such a family
compares runs that are not iso-compute (Porian et al. 2024).

Here the constraint is C = c(N) D with

    c(N) = 6 kappa N^gamma

fitted by least squares on ln(c / 6) against ln N over the family's shapes (kappa = gamma = 1 is
Chinchilla's 6 N). Under it the optimum keeps a closed form (`scaling.laws.forms.law.Law`):

    N_opt = G (C / 6 kappa)^a,  D_opt = (C / 6 kappa)^b / G^gamma,
    G = (alpha A / (gamma beta B))^(1 / (alpha + gamma beta)),
    a = beta / (alpha + gamma beta),  b = alpha / (alpha + gamma beta).

Pure, no I/O.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from scaling.errors import UsageError

SIX_N = "6N"   # the measure of a table that gives C = 6 N D (or N and D alone)
# Each measure's one name in text, axes and columns: a table's count in its own N, a run store's in
# the N it names (a run store fitted with total N and measure 6n_total counts 6 N D as a table does).
MEASURE_NAMES = {SIX_N: "6ND", "6n_total": "6 N_total D", "6n_non_embedding": "6 N_non-embedding D",
                 "exact": "exact FLOPs"}


@dataclass(frozen=True)
class FlopsPerToken:
    """c(N) = 6 kappa N^gamma training FLOPs per token, C = c(N) D.

    measure: what C counts ("6N" for a table's own 6 N D; else one of
    `scaling.train.counts.COMPUTE_MEASURES`). max_error: the largest relative error of c(N)
    against the counted FLOPs per token of the points it was fitted to (0 where exact).
    """

    measure: str = SIX_N
    kappa: float = 1.0
    gamma: float = 1.0
    max_error: float = 0.0

    @property
    def is_six_n(self) -> bool:
        return self.kappa == 1.0 and self.gamma == 1.0

    def per_token(self, n: npt.ArrayLike) -> np.ndarray:
        """Training FLOPs per token of a model of N parameters."""
        return 6.0 * self.kappa * np.asarray(n, dtype=float) ** self.gamma

    def tokens(self, compute: npt.ArrayLike, n: npt.ArrayLike) -> np.ndarray:
        """D = C / c(N): the tokens N parameters train on with C FLOPs."""
        return np.asarray(compute, dtype=float) / self.per_token(n)

    @property
    def name(self) -> str:
        """What C counts, in the words every output uses: 'exact FLOPs', '6ND', ..."""
        return MEASURE_NAMES.get(self.measure, self.measure)

    @property
    def quantity(self) -> str:
        """C named with its measure, for a range in words: 'C = 6ND' or 'C (exact FLOPs)'."""
        return f"C ({self.name})" if "FLOPs" in self.name else f"C = {self.name}"

    def describe(self) -> str:
        if self.is_six_n:
            return f"C = {self.name}"
        return (f"C = {self.name} = 6 x {self.kappa:.4g} N^{self.gamma:.4g} D "
                f"(fitted to the family, within {100 * self.max_error:.1f}%)")

    def to_dict(self) -> dict:
        return {"measure": self.measure, "kappa": self.kappa, "gamma": self.gamma, "max_error": self.max_error}

    @classmethod
    def from_dict(cls, obj: dict) -> FlopsPerToken:
        kappa, gamma, error = (float(obj[k]) for k in ("kappa", "gamma", "max_error"))
        if not all(math.isfinite(v) for v in (kappa, gamma, error)) or kappa <= 0 or gamma <= 0 or error < 0:
            raise UsageError(f"the compute count needs positive, finite kappa and gamma; got {obj!r}")
        return cls(str(obj["measure"]), kappa, gamma, error)


def fit_flops_per_token(n: npt.ArrayLike, per_token: npt.ArrayLike, measure: str) -> FlopsPerToken:
    """c(N) = 6 kappa N^gamma by least squares on logs over the points' (N, FLOPs per token).

    One size, or FLOPs per token exactly 6 N at every point, gives gamma = 1 (kappa alone)."""
    n, per_token = np.asarray(n, dtype=float), np.asarray(per_token, dtype=float)
    ratio = np.log(per_token / 6.0)
    ln = np.log(n)
    if np.allclose(ratio, ln, rtol=0, atol=1e-12):
        return FlopsPerToken(measure)
    if np.ptp(ln) == 0:
        kappa, gamma = float(np.exp(np.mean(ratio - ln))), 1.0
    else:
        gamma, log_kappa = np.polyfit(ln, ratio, 1)
        kappa, gamma = float(np.exp(log_kappa)), float(gamma)
    fitted = FlopsPerToken(measure, kappa, gamma)
    error = float(np.max(np.abs(fitted.per_token(n) / per_token - 1.0)))
    return FlopsPerToken(measure, kappa, gamma, error)


def expected_optimum(flops: FlopsPerToken, compute: float, tokens_per_param: float) -> float:
    """The N at which C FLOPs train D = k N tokens: c(N) k N = C, N = (C / (6 kappa k))^(1 / (1 + gamma));
    sqrt(C / 6k) for C = 6 N D."""
    base = compute / (6.0 * flops.kappa * tokens_per_param)
    return math.sqrt(base) if flops.gamma == 1.0 else base ** (1.0 / (1.0 + flops.gamma))
