"""The Chinchilla form, L = E + A / N^alpha + B / D^beta (Hoffmann et al. 2022, eq. 2), as a `Form`.

Why this form: the default. Three terms, each the loss one resource leaves: E what no model reaches
(the entropy of text, as this tokenizer counts it), A / N^alpha what a finite model costs, B / D^beta
what finite data costs; additive, so that its compute-optimal allocation has a closed form
(`scaling.laws.forms.law`). Over theta = (log E, log A, log B, alpha, beta):

    log L = LSE(log A - alpha log N,  log B - beta log D,  log E).

The default fit does not go through this class: `scaling.laws.fitting.fit` has the form's own
fast path (two exponentials per point, Hoffmann's 4,500 starts), whose results every file and
test pins bit for bit. This class is the same form to the generic fitter: the forms' tests check
its gradient and its optimum against that fast path, and the other forms are written the same way.
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
class Chinchilla(Form):
    name: ClassVar[str] = "chinchilla"
    theta_names: ClassVar[tuple[str, ...]] = ("log_e", "log_a", "log_b", "alpha", "beta")
    START_AXES: ClassVar[tuple[tuple[float, ...], ...]] = (
        (-1.0, 0.0, 1.0), (0.0, 5.0, 10.0, 20.0), (0.0, 5.0, 10.0, 20.0), (0.3, 0.6, 1.2), (0.3, 0.6, 1.2))
    equation: ClassVar[str] = "L = E + A/N^alpha + B/D^beta (Hoffmann et al. 2022)"

    def log_loss(self, theta: np.ndarray, log_n: np.ndarray, log_d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        e, a, b, alpha, beta = (theta[:, i:i + 1] for i in range(5))
        terms = np.stack([a - alpha * log_n, b - beta * log_d, np.broadcast_to(e, (e.shape[0], log_n.size))])
        lse, w = log_sum_exp(terms)
        jac = np.stack([w[2], w[0], w[1], -w[0] * log_n, -w[1] * log_d], axis=-1)
        return lse, jac

    def law(self, theta: npt.ArrayLike) -> FormLaw:
        e, a, b, alpha, beta = (float(v) for v in np.asarray(theta, dtype=float))
        return Law(E=safe_exp(e), A=safe_exp(a), B=safe_exp(b), alpha=alpha, beta=beta)

    def theta_of(self, law: FormLaw) -> np.ndarray:
        p = law.to_dict()
        return np.array([math.log(p["E"]), math.log(p["A"]), math.log(p["B"]), p["alpha"], p["beta"]])
