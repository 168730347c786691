"""Tied exponents, L = E + A / N^alpha + B / D^alpha: the Chinchilla form with alpha = beta.

Why: one exponent for N and D is what several published laws fitted on a handful of runs used, and
predicted runs 10x beyond within about 0.7% (the issue's anchors); one fewer constant to place from
few points, and tokens per parameter constant in C (a = b = 1/2). The price: a table whose
exponents truly differ is misdescribed, the more the farther out it predicts. On the public tables'
leave-future-out cuts an independent fit had it at 3.1 / 4.8 / 5.4% at 3x / 10x / 30x. Over
theta = (log E, log A, log B, alpha): log L = LSE(log A - alpha log N, log B - alpha log D, log E).
Its law is a `Law` with beta = alpha: the closed-form allocation applies.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import numpy.typing as npt

from scaling.laws.forms.form import Form, FormLaw, log_sum_exp, safe_exp
from scaling.laws.forms.law import Law


@dataclass(frozen=True)
class Tied(Form):
    name: ClassVar[str] = "tied"
    theta_names: ClassVar[tuple[str, ...]] = ("log_e", "log_a", "log_b", "alpha")
    START_AXES: ClassVar[tuple[tuple[float, ...], ...]] = (
        (-1.0, 0.0, 1.0), (0.0, 5.0, 10.0, 20.0), (0.0, 5.0, 10.0, 20.0), (0.2, 0.35, 0.6, 1.2))
    equation: ClassVar[str] = "L = E + A/N^alpha + B/D^alpha (alpha = beta)"

    def log_loss(self, theta: np.ndarray, log_n: np.ndarray, log_d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        e, a, b, alpha = (theta[:, i:i + 1] for i in range(4))
        terms = np.stack([a - alpha * log_n, b - alpha * log_d, np.broadcast_to(e, (e.shape[0], log_n.size))])
        lse, w = log_sum_exp(terms)
        jac = np.stack([w[2], w[0], w[1], -w[0] * log_n - w[1] * log_d], axis=-1)
        return lse, jac

    def law(self, theta: npt.ArrayLike) -> FormLaw:
        e, a, b, alpha = (float(v) for v in np.asarray(theta, dtype=float))
        return Law(E=safe_exp(e), A=safe_exp(a), B=safe_exp(b), alpha=alpha, beta=alpha)

    def theta_of(self, law: FormLaw) -> np.ndarray:
        p = law.to_dict()
        return np.array([math.log(p["E"]), math.log(p["A"]), math.log(p["B"]), p["alpha"]])
