"""The data-constrained law of Muennighoff et al. (2023): repeated tokens and excess parameters.

Pure functions of the constants, no I/O. "Scaling Data-Constrained Language Models",
arXiv:2305.16264 (code: github.com/huggingface/datablations). A run of N parameters on D
tokens drawn from U unique tokens is scored by the base law L(N', D') = E + A/N'^alpha + B/D'^beta
at an effective data D' and effective size N':

    U_D = min(U, D),   R_D = D / U_D - 1                 (repetitions: epochs - 1, 0 on one epoch)
    D'  = U_D + U_D R_D* (1 - exp(-R_D / R_D*))
    U_N = min(N, N_opt(U_D)),   R_N = N / U_N - 1       (N_opt(U_D): the base law's compute-optimal
    N'  = U_N + U_N R_N* (1 - exp(-R_N / R_N*))          size for U_D tokens)

A repeated token is worth exp(-R_D / R_D*) of a fresh one (dD'/dD), so D' never exceeds
U_D (1 + R_D*): however long a model trains, U unique tokens are worth at most that much fresh
data. Parameters beyond N_opt(U_D) decay the same way with R_N*. On one epoch (D <= U) D' = D.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from scaling.errors import UsageError
from scaling.laws.forms.law import Law


def _check_star(name: str, value: float | None) -> None:
    if value is not None and not (math.isfinite(value) and value > 0):
        raise UsageError(f"{name} must be positive and finite, or None for no decay; got {value}")


def repetitions(d: npt.ArrayLike, unique: npt.ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """(U_D, R_D): the unique tokens a run of D tokens sees and how many times it repeats them."""
    d, unique = np.asarray(d, dtype=float), np.asarray(unique, dtype=float)
    u_d = np.minimum(unique, d)
    return u_d, d / u_d - 1.0


def decayed(u: np.ndarray, r: np.ndarray, r_star: float | np.ndarray | None) -> np.ndarray:
    """u + u r* (1 - exp(-r / r*)): u counted once plus r repeats, each worth less than the last.

    r_star None means no decay: every repeat is worth a fresh one, u (1 + r).
    """
    if r_star is None:
        return u * (1.0 + r)
    return u * (1.0 - r_star * np.expm1(-r / r_star))


@dataclass(frozen=True)
class RepeatedLaw:
    """L(N, D, U) = base.loss(N', D'): the base law at effective parameters and data (module doc).

    r_d_star: R_D*, the decay of repeated tokens; r_n_star: R_N*, the decay of excess parameters.
    None for either means no decay (repeated tokens, or excess parameters, are worth new ones).
    """

    base: Law
    r_d_star: float | None
    r_n_star: float | None = None

    def __post_init__(self) -> None:
        _check_star("R_D*", self.r_d_star)
        _check_star("R_N*", self.r_n_star)

    def n_for_data(self, d: npt.ArrayLike) -> np.ndarray:
        """N_opt for D tokens under the base law: the N with N_opt(C) = N when D_opt(C) = D."""
        law = self.base
        return law.G * (law.G * np.asarray(d, dtype=float)) ** (law.beta / law.alpha)

    def effective_data(self, d: npt.ArrayLike, unique: npt.ArrayLike) -> np.ndarray:
        """D' for D tokens from U unique ones (broadcasts)."""
        u_d, r_d = repetitions(d, unique)
        return decayed(u_d, r_d, self.r_d_star)

    def effective_params(self, n: npt.ArrayLike, d: npt.ArrayLike, unique: npt.ArrayLike) -> np.ndarray:
        """N' for N parameters trained on D tokens from U unique ones (broadcasts)."""
        n = np.asarray(n, dtype=float)
        if self.r_n_star is None:
            return n
        u_n = np.minimum(n, self.n_for_data(repetitions(d, unique)[0]))
        return decayed(u_n, n / u_n - 1.0, self.r_n_star)

    def reducible(self, n: npt.ArrayLike, d: npt.ArrayLike, unique: npt.ArrayLike) -> np.ndarray:
        """A / N'^alpha + B / D'^beta: the loss above E."""
        law = self.base
        n_eff, d_eff = self.effective_params(n, d, unique), self.effective_data(d, unique)
        return law.A / n_eff**law.alpha + law.B / d_eff**law.beta

    def loss(self, n: npt.ArrayLike, d: npt.ArrayLike, unique: npt.ArrayLike) -> np.ndarray:
        """Predicted loss of N parameters on D tokens from U unique tokens (broadcasts over arrays):
        the base law's, at N' and D' (so, on single-epoch runs without excess parameters, bit for bit)."""
        return self.base.loss(self.effective_params(n, d, unique), self.effective_data(d, unique))


# Muennighoff et al. 2023's fit, from huggingface/datablations README.md ("Parametric Fit") and
# utils/parametric_fit.ipynb: a, b, e, alpha, beta = 6.255414, 7.3049974, 0.6254804, 0.3526596,
# 0.3526596 (A = e^a, B = e^b, E = e^e; alpha tied to beta), fitted to C4 losses read off Chinchilla's
# IsoFLOP curves; then R_D* = 15.387756 and R_N* = 5.309743 fitted to their own 182 runs with the
# base constants held fixed. Rounded: E 1.869, A 520.8, B 1487.7, alpha = beta 0.3527, R_D* 15.4, R_N* 5.3.
MUENNIGHOFF_2023 = RepeatedLaw(
    base=Law(E=math.exp(0.6254804), A=math.exp(6.255414), B=math.exp(7.3049974), alpha=0.3526596, beta=0.3526596),
    r_d_star=15.387756,
    r_n_star=5.309743,
)
