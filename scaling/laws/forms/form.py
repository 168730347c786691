"""What every law form is to the fitter: log L(N, D) and its gradient over a parameter vector theta.

    form = forms.get("tied")                          # scaling.laws.forms.catalog
    log_pred, jac = form.log_loss(theta, log_n, log_d)   # (S, M) and (S, M, P), for S rows of theta
    law = form.law(theta[0]); law.loss(n, d)          # a fitted law: predicts, broadcasting

The fitter (`scaling.laws.fitting.forms`) minimises the summed Huber loss of log L_pred - log L_obs,
as for the Chinchilla form, and needs only `log_loss`: the Huber gradient is the per-point Huber
derivative times the Jacobian of log L_pred. Each form writes log L as a log-sum-exp of its terms
(numerically safe at any theta) and fixes its starts (a grid spanning the published values).

A law's compute-optimal allocation along C = c(N) D (`optimum`): the closed form where one exists
(`scaling.laws.forms.law.Law`), else the minimum of L along the compute curve, found numerically
(`curve_minimum`, which plans any predicted loss: the median of the forms' too).
Pure functions, no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import ClassVar, Protocol

import numpy as np
import numpy.typing as npt
from scipy.optimize import minimize_scalar

from scaling.laws.forms.law import Law
from scaling.train.compute import FlopsPerToken

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


def optimum(law: FormLaw, compute: float, flops: FlopsPerToken | None = None) -> tuple[float, float, float]:
    """(N_opt, D_opt, L_opt) at `compute` FLOPs along C = c(N) D (`flops`; None: a Chinchilla-form
    law's own count, any other form's 6 N D): the closed form of a Chinchilla-form law, else the
    minimum of L along the compute curve (`curve_minimum`). ValueError where L does not fall with
    both N and D (no interior optimum), where the closed form overflows a float, or puts it below one
    parameter or one token (a fit that does not identify its exponents can place it at N = 1e-12:
    no model, and the numerical search could not return it)."""
    if not law.has_optimum:
        raise ValueError("this law does not fall with both N and D: it has no compute-optimal allocation")
    if not isinstance(law, Law):
        return curve_minimum(law.loss, compute, flops or FlopsPerToken())
    law = law if flops is None else replace(law, flops=flops)
    try:
        n, d = float(law.n_opt(compute)), float(law.d_opt(compute))
    except (OverflowError, ZeroDivisionError):   # G past a float, or 0 / 0: the exponents are not identified
        raise ValueError(f"its optimum at C = {compute:.3g} lies beyond a float (N_opt's coefficient G "
                         "overflows: the exponents are not identified)") from None
    if not (n >= 1.0 and d >= 1.0):
        raise ValueError(f"its optimum at C = {compute:.3g} falls at N = {n:.3g}, D = {d:.3g}: "
                         "below one parameter or one token, no model")
    return n, d, float(law.loss(n, d))


def curve_minimum(loss: Callable[[np.ndarray, np.ndarray], npt.ArrayLike], compute: float,
                  flops: FlopsPerToken) -> tuple[float, float, float]:
    """(N, D, L): the minimum of any predicted loss L(N, D) (vectorised) along the compute curve
    C = c(N) D, for N from one parameter to where D falls to one token: a scan of the curve places
    the bracket, bounded Brent on log N finds the minimum in it. What a law with no closed-form
    optimum plans by, so that no run on the curve is predicted to do better than the plan.
    ValueError where the loss is nowhere finite on the curve, or falls all the way to an end of it
    (no interior optimum: the prediction keeps improving with N, or with D)."""
    top = math.log(compute / (6.0 * flops.kappa)) / flops.gamma       # log N at which D = 1
    if not top > 0:
        raise ValueError(f"C = {compute:.3g} FLOPs does not train one parameter on one token")

    def losses(log_n: np.ndarray) -> np.ndarray:
        n = np.exp(log_n)
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            return np.asarray(loss(n, flops.tokens(compute, n)), dtype=float)

    grid = np.linspace(0.0, top, 241)
    values = np.where(np.isfinite(v := losses(grid)), v, np.inf)
    k = int(np.argmin(values))
    if not np.isfinite(values[k]):
        raise ValueError(f"no finite predicted loss along the compute curve at C = {compute:.3g}")
    if k in (0, grid.size - 1):
        raise ValueError(f"the predicted loss at C = {compute:.3g} falls all the way to "
                         f"{'one parameter' if k == 0 else 'one token'}: no compute-optimal allocation")
    res = minimize_scalar(lambda x: float(losses(np.array(x))), bounds=(grid[k - 1], grid[k + 1]),
                          method="bounded", options={"xatol": 1e-10})
    x, value = (float(res.x), float(res.fun)) if res.fun <= values[k] else (float(grid[k]), float(values[k]))
    n = math.exp(x)
    return n, float(flops.tokens(compute, n)), value
