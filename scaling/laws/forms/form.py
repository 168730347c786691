"""What every law form is to the fitter: log L(N, D) and its gradient over a parameter vector theta.

    form = forms.get("tied")                          # scaling.laws.forms.catalog
    log_pred, jac = form.log_loss(theta, log_n, log_d)   # (S, M) and (S, M, P), for S rows of theta
    law = form.law(theta[0]); law.loss(n, d)          # a fitted law: predicts, broadcasting

The fitter (`scaling.laws.fitting.forms`) minimises the summed Huber loss of log L_pred - log L_obs,
as for the Chinchilla form, and needs only `log_loss`: the Huber gradient is the per-point Huber
derivative times the Jacobian of log L_pred. Each form writes log L as a log-sum-exp of its terms
(numerically safe at any theta) and fixes its starts (a grid spanning the published values).

A law's compute-optimal allocation along C = 6 N D (`optimum`): the closed form where one exists
(`scaling.laws.forms.law.Law`), else the minimum of L(N, C / 6N) over log N, found numerically.
Pure functions, no I/O.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar, Protocol

import numpy as np
import numpy.typing as npt
from scipy.optimize import minimize_scalar

from scaling.laws.forms.law import Law

LOG_FLOAT_MAX = math.log(np.finfo(float).max)


class FormLaw(Protocol):
    """A fitted law of any form: its loss (broadcasting), its constants by name, whether it has an optimum."""

    def loss(self, n: npt.ArrayLike, d: npt.ArrayLike) -> np.ndarray: ...
    def to_dict(self) -> dict: ...
    @property
    def has_optimum(self) -> bool: ...


@dataclass(frozen=True)
class Form:
    """A law's functional form over theta (`theta_names`); subclasses give `log_loss`, `law`,
    `theta_of` and the axes of their starting grid (`START_AXES`, one tuple per theta entry)."""

    name: ClassVar[str] = ""
    theta_names: ClassVar[tuple[str, ...]] = ()
    START_AXES: ClassVar[tuple[tuple[float, ...], ...]] = ()
    equation: ClassVar[str] = ""

    @property
    def n_theta(self) -> int:
        return len(self.theta_names)

    def log_loss(self, theta: np.ndarray, log_n: np.ndarray, log_d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(log L_pred (S, M), its Jacobian over theta (S, M, P)) for rows `theta` (S, P)."""
        raise NotImplementedError

    def law(self, theta: npt.ArrayLike) -> FormLaw:
        raise NotImplementedError

    def theta_of(self, law: FormLaw) -> np.ndarray:
        """theta of a law of this form (the inverse of `law`)."""
        raise NotImplementedError

    def starts(self) -> np.ndarray:
        """The grid of starting points: every combination of START_AXES, an (S, P) array."""
        grids = np.meshgrid(*(np.asarray(axis, dtype=float) for axis in self.START_AXES), indexing="ij")
        return np.column_stack([g.ravel() for g in grids])

    def describe(self) -> str:
        return f"{self.name}: {self.equation}"


def safe_exp(x: float) -> float:
    """e^x, inf beyond a float (a constant whose fit ran off: the caller refuses the law, no exception here)."""
    return math.exp(x) if x < LOG_FLOAT_MAX else math.inf


def log_sum_exp(terms: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(log sum_k e^terms[k], the softmax weights e^(terms[k] - LSE)) over the first axis, max-shifted."""
    top = terms.max(axis=0)
    w = np.exp(terms - top)
    total = w.sum(axis=0)
    w /= total
    return top + np.log(total), w


def optimum(law: FormLaw, compute: float) -> tuple[float, float, float]:
    """(N_opt, D_opt, L_opt) at `compute` FLOPs, C = 6 N D: the closed form of a Chinchilla-form law,
    else the minimum of L(N, C / 6N) over log N (bounded Brent on N from 1 to C/6, i.e. D >= 1).
    ValueError where L does not fall with both N and D (no interior optimum), where the closed form
    overflows a float, or puts it below one parameter or one token (a fit that does not identify its
    exponents can place it at N = 1e-12: no model, and the numerical search could not return it)."""
    if not law.has_optimum:
        raise ValueError("this law does not fall with both N and D: it has no compute-optimal allocation")
    if isinstance(law, Law):
        try:
            n, d = float(law.n_opt(compute)), float(law.d_opt(compute))
        except OverflowError:      # G = (alpha A / (beta B))^(1 / (alpha + beta)) past a float: exponents near 0
            raise ValueError(f"its optimum at C = {compute:.3g} lies beyond a float (N_opt's coefficient G "
                             "overflows: the exponents are not identified)") from None
        if not (n >= 1.0 and d >= 1.0):
            raise ValueError(f"its optimum at C = {compute:.3g} falls at N = {n:.3g}, D = {d:.3g}: "
                             "below one parameter or one token, no model")
        return n, d, float(law.loss(n, d))
    log_c6 = math.log(compute / 6.0)

    def loss_at(log_n: float) -> float:
        return float(law.loss(math.exp(log_n), math.exp(log_c6 - log_n)))

    # A coarse scan places the bracket (L along the iso-compute line is unimodal for these forms).
    grid = np.linspace(0.0, log_c6, 241)
    k = int(np.argmin([loss_at(x) for x in grid]))
    lo, hi = grid[max(k - 1, 0)], grid[min(k + 1, grid.size - 1)]
    res = minimize_scalar(loss_at, bounds=(lo, hi), method="bounded", options={"xatol": 1e-10})
    n = math.exp(float(res.x))
    return n, compute / (6.0 * n), float(res.fun)
