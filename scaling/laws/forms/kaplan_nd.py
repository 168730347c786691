"""Kaplan et al.'s joint law, L(N, D) = [(N_c / N)^(alpha_N / alpha_D) + D_c / D]^alpha_D (2020, eq. 1.5).

Why: the other published two-variable form, with no irreducible term. Without E it cannot run E to
its bound or sit E above the larger runs' losses, the failure that makes the Chinchilla form miss
by 15-25% on the long-warmup tables; the same absence makes it err low where the loss flattens
(an independent fit: 3.0 / 4.6 / 6.7% at 3x / 10x / 30x on the public tables). Its limits are
Kaplan's single-variable laws: (N_c / N)^alpha_N for D -> infinity, (D_c / D)^alpha_D for N -> infinity.

Fitted over theta = (log N_c, log D_c, r, alpha_D) with r = alpha_N / alpha_D, which keeps log L
smooth everywhere (alpha_D never divides):

    log L = alpha_D LSE(r (log N_c - log N),  log D_c - log D).

Compute-optimal allocation along C = 6 N D: L falls with N and D while alpha_N, alpha_D > 0 and has
one minimum on each iso-compute line, N_opt = (r N_c^r C / (6 D_c))^(1 / (1 + r)) (found numerically
by `scaling.laws.forms.form.optimum`; the tests check it against this closed form).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import ClassVar

import numpy as np
import numpy.typing as npt

from scaling.laws.forms.form import Form, FormLaw, log_sum_exp, safe_exp


@dataclass(frozen=True)
class KaplanLaw:
    """L = [(N_c / N)^(alpha_N / alpha_D) + D_c / D]^alpha_D."""

    N_c: float
    D_c: float
    alpha_N: float
    alpha_D: float

    def loss(self, n: npt.ArrayLike, d: npt.ArrayLike) -> np.ndarray:
        n, d = np.asarray(n, dtype=float), np.asarray(d, dtype=float)
        with np.errstate(over="ignore"):          # a resample far out in its valley: inf, left out by the caller
            return ((self.N_c / n) ** (self.alpha_N / self.alpha_D) + self.D_c / d) ** self.alpha_D

    def to_dict(self) -> dict:
        return asdict(self)

    @property
    def has_optimum(self) -> bool:
        return self.alpha_N > 0 and self.alpha_D > 0


@dataclass(frozen=True)
class Kaplan(Form):
    name: ClassVar[str] = "kaplan"
    theta_names: ClassVar[tuple[str, ...]] = ("log_n_c", "log_d_c", "ratio", "alpha_D")
    START_AXES: ClassVar[tuple[tuple[float, ...], ...]] = (
        (20.0, 30.0, 40.0, 55.0), (20.0, 30.0, 40.0, 55.0), (0.5, 0.8, 1.2, 2.0), (0.03, 0.07, 0.15, 0.3))
    equation: ClassVar[str] = "L = [(N_c/N)^(alpha_N/alpha_D) + D_c/D]^alpha_D (Kaplan et al. 2020, eq. 1.5; no E)"

    def log_loss(self, theta: np.ndarray, log_n: np.ndarray, log_d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        cn, cd, r, ad = (theta[:, i:i + 1] for i in range(4))
        gap = cn - log_n                                   # log (N_c / N)
        lse, w = log_sum_exp(np.stack([r * gap, np.broadcast_to(cd - log_d, gap.shape)]))
        jac = np.stack([ad * w[0] * r, ad * w[1], ad * w[0] * gap, lse], axis=-1)
        return ad * lse, jac

    def law(self, theta: npt.ArrayLike) -> FormLaw:
        cn, cd, r, ad = (float(v) for v in np.asarray(theta, dtype=float))
        return KaplanLaw(N_c=safe_exp(cn), D_c=safe_exp(cd), alpha_N=r * ad, alpha_D=ad)

    def theta_of(self, law: FormLaw) -> np.ndarray:
        p = law.to_dict()
        return np.array([math.log(p["N_c"]), math.log(p["D_c"]), p["alpha_N"] / p["alpha_D"], p["alpha_D"]])
