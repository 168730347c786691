"""A Farseer-like form: L = E + A / N^alpha + B / D^beta(N), beta(N) = beta_0 + beta_1 log(N / N_REF).

Why: Li et al.'s Farseer (2025) found the data term's exponent moving with model size, which the
Chinchilla form, with one beta for every size, cannot follow: larger models using data better (or
worse) bends the allocation. This is "Farseer-like", not Li et al.'s method (they fit a
differential form over a dense grid); it keeps the Chinchilla form's terms and lets beta move
linearly in log N, one extra constant. Flexible inside the data, it is the least stable far out (an
independent fit: 2.0 / 4.8 / 9.9% at 3x / 10x / 30x on the public tables): beta_1 extrapolates.

N_REF = 1e8 parameters fixes where beta_0 is read (beta(1e8) = beta_0), so the constants of two fits
compare. Its starts are a Chinchilla-form grid at beta_1 = 0 (the form it extends; 192 starts).
Over theta = (log E, log A, log B, alpha, beta_0, beta_1), with u = log(N / N_REF):

    log L = LSE(log A - alpha log N,  log B - (beta_0 + beta_1 u) log D,  log E).

Its compute-optimal allocation is found numerically (`scaling.laws.forms.form.optimum`); it exists
while the loss falls with N along every iso-compute line, which the fitted beta_1 can break far
from the data.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import ClassVar

import numpy as np
import numpy.typing as npt

from scaling.laws.forms.form import Form, FormLaw, log_sum_exp, safe_exp

N_REF = 1e8


@dataclass(frozen=True)
class FarseerLaw:
    """L = E + A / N^alpha + B / D^(beta_0 + beta_1 log(N / N_REF))."""

    E: float
    A: float
    B: float
    alpha: float
    beta_0: float
    beta_1: float

    def beta(self, n: npt.ArrayLike) -> np.ndarray:
        return self.beta_0 + self.beta_1 * np.log(np.asarray(n, dtype=float) / N_REF)

    def loss(self, n: npt.ArrayLike, d: npt.ArrayLike) -> np.ndarray:
        n, d = np.asarray(n, dtype=float), np.asarray(d, dtype=float)
        with np.errstate(over="ignore"):          # a resample far out in its valley: inf, left out by the caller
            return self.E + self.A / n ** self.alpha + self.B / d ** self.beta(n)

    def to_dict(self) -> dict:
        return asdict(self)

    @property
    def has_optimum(self) -> bool:
        return self.alpha > 0 and self.beta_0 > 0


@dataclass(frozen=True)
class Farseer(Form):
    name: ClassVar[str] = "farseer"
    theta_names: ClassVar[tuple[str, ...]] = ("log_e", "log_a", "log_b", "alpha", "beta_0", "beta_1")
    START_AXES: ClassVar[tuple[tuple[float, ...], ...]] = (
        (-1.0, 0.0, 1.0), (0.0, 5.0, 10.0, 20.0), (0.0, 5.0, 10.0, 20.0), (0.3, 0.7), (0.3, 0.7), (0.0,))
    equation: ClassVar[str] = ("L = E + A/N^alpha + B/D^(beta_0 + beta_1 ln(N/1e8)) (Farseer-like: Li et al. 2025's "
                               "idea of an N-dependent data exponent, not their method)")

    def log_loss(self, theta: np.ndarray, log_n: np.ndarray, log_d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        e, a, b, alpha, b0, b1 = (theta[:, i:i + 1] for i in range(6))
        u = log_n - math.log(N_REF)
        terms = np.stack([a - alpha * log_n, b - (b0 + b1 * u) * log_d, np.broadcast_to(e, (e.shape[0], log_n.size))])
        lse, w = log_sum_exp(terms)
        dd = -w[1] * log_d
        jac = np.stack([w[2], w[0], w[1], -w[0] * log_n, dd, dd * u], axis=-1)
        return lse, jac

    def law(self, theta: npt.ArrayLike) -> FormLaw:
        e, a, b, alpha, b0, b1 = (float(v) for v in np.asarray(theta, dtype=float))
        return FarseerLaw(E=safe_exp(e), A=safe_exp(a), B=safe_exp(b), alpha=alpha, beta_0=b0, beta_1=b1)

    def theta_of(self, law: FormLaw) -> np.ndarray:
        p = law.to_dict()
        return np.array([math.log(p["E"]), math.log(p["A"]), math.log(p["B"]), p["alpha"], p["beta_0"], p["beta_1"]])
