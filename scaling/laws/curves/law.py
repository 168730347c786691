"""The loss along a training curve under any learning-rate schedule (Tissue et al. 2024):

    L(s) = L0 + A * S1(s)^-alpha - C * S2(s)

S1(s) = lr_1 + ... + lr_s is the forward area (the summed learning rate), S2(s) = m_1 + ... + m_s
the annealing area, where m_i = decay * m_(i-1) + (lr_(i-1) - lr_i) carries each drop of the rate
forward with momentum (Tissue et al.'s lambda, 0.999 by default). A rising rate (the warmup) is
no annealing: its steps add nothing to S2.

    schedule = RunSchedule(steps=4000, lr=6e-3, train=TrainConfig())       # one run's schedule
    s1, s2 = schedule.areas()                                               # per step 1..steps
    law = fit_curve_law(s1[steps - 1], s2[steps - 1], loss)                 # a size's evaluations
    law.final_loss(schedule.rescaled(2_000_000))                            # loss after 2M tokens

Pure: numbers in, numbers out; each run's schedule is `scaling.train.schedule.lr_at` (torch-free).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt
from scipy.optimize import minimize_scalar

from scaling.config import TrainConfig
from scaling.errors import UsageError
from scaling.train.schedule import lr_at, warmup_steps

DECAY = 0.999                                   # Tissue et al.'s lambda
# The lambdas a fit chooses among (curve_fit.fitted_decay). Tissue et al.'s 0.999 (the loss lags
# a drop of the rate by ~1,000 steps) was fitted to runs of tens of thousands of steps; the demo's
# runs of 480-8,100 steps answer a drop within a few dozen: there the curve laws' squared error is
# least at lambda 0 (residual RMS 0.0280 against 0.0371 at 0.999; leave-one-run-out 0.83% against 1.94%).
DECAYS = (0.0, 0.5, 0.9, 0.95, 0.98, 0.99, 0.995, 0.998, 0.999, 0.9995)
ALPHA_GRID = np.linspace(0.02, 3.0, 150)        # the exponent's starts; the best is then refined


@dataclass(frozen=True)
class RunSchedule:
    """One run's learning-rate schedule: `steps` updates of `batch_tokens` (train.batch_tokens)
    with peak `lr`; `warmup` (steps) and `constant` (a WSD stable run) as `lr_at` takes them."""

    steps: int
    lr: float
    train: TrainConfig
    warmup: int | None = None
    constant: bool = False

    def lrs(self) -> np.ndarray:
        """The rate of every update 1..steps."""
        return np.array([lr_at(s, self.steps, self.lr, self.train, self.warmup, self.constant)
                         for s in range(1, self.steps + 1)])

    def areas(self, decay: float = DECAY) -> tuple[np.ndarray, np.ndarray]:
        """(S1, S2) after each update 1..steps (cached: a resample or a simulation asks again)."""
        return _areas_of(self.steps, self.lr, self.warmup, self.constant, self.train.model_dump_json(), decay)

    def first_decay_step(self) -> int:
        """The last warmup step: evaluations up to it are before any schedule effect."""
        return warmup_steps(self.steps, self.train) if self.warmup is None else self.warmup

    def rescaled(self, tokens: float) -> RunSchedule:
        """The same schedule spanning `tokens` (its warmup and cooldown scale with the run; a
        shared WSD warmup stays), decaying to its end: the sweep's schedule at that budget."""
        return replace(self, steps=max(2, math.ceil(tokens / self.train.batch_tokens)), constant=False)


def areas(lrs: npt.ArrayLike, decay: float = DECAY) -> tuple[np.ndarray, np.ndarray]:
    """(S1, S2) after each update of a run with rates `lrs` (update 1 first)."""
    if not 0 <= decay < 1:
        raise UsageError(f"the annealing momentum must be in [0, 1); got {decay!r}")
    lrs = np.asarray(lrs, dtype=float)
    drops = np.maximum(np.diff(lrs, prepend=lrs[:1]) * -1.0, 0.0)
    from scipy.signal import lfilter  # here, not at the top: scipy.signal costs every command about a second

    momentum = lfilter([1.0], [1.0, -decay], drops)
    return np.cumsum(lrs), np.cumsum(momentum)


@functools.lru_cache(maxsize=256)
def _areas_of(steps: int, lr: float, warmup: int | None, constant: bool, train_json: str, decay: float
              ) -> tuple[np.ndarray, np.ndarray]:
    schedule = RunSchedule(steps, lr, TrainConfig.model_validate_json(train_json), warmup, constant)
    s1, s2 = areas(schedule.lrs(), decay)
    s1.flags.writeable = s2.flags.writeable = False       # shared by every caller of the cache
    return s1, s2


@dataclass(frozen=True)
class CurveLaw:
    """L = L0 + A * S1^-alpha - C * S2 for one model size; `rms`: residual rms of its fit."""

    L0: float
    A: float
    C: float
    alpha: float
    decay: float = DECAY
    rms: float = math.nan
    n_points: int = 0

    def loss(self, s1: npt.ArrayLike, s2: npt.ArrayLike) -> np.ndarray:
        s1, s2 = np.asarray(s1, dtype=float), np.asarray(s2, dtype=float)
        return self.L0 + self.A * s1 ** -self.alpha - self.C * s2

    def final_loss(self, schedule: RunSchedule) -> float:
        """The loss at the last step of a run with this schedule."""
        s1, s2 = schedule.areas(self.decay)
        return float(self.loss(s1[-1], s2[-1]))

    def to_dict(self) -> dict:
        return {"L0": self.L0, "A": self.A, "C": self.C, "alpha": self.alpha, "decay": self.decay,
                "rms": self.rms, "n_points": self.n_points}


def _linear_part(x: np.ndarray, s2: np.ndarray, y: np.ndarray, w: np.ndarray, alpha: float) -> tuple[np.ndarray, float]:
    """(L0, A, C, weighted SSE) at a fixed alpha: the rest is linear least squares."""
    design = np.column_stack([np.ones_like(x), x ** -alpha, -s2]) * np.sqrt(w)[:, None]
    coef, *_ = np.linalg.lstsq(design, y * np.sqrt(w), rcond=None)
    resid = y * np.sqrt(w) - design @ coef
    return coef, float(resid @ resid)


def _grid_sse(x: np.ndarray, s2: np.ndarray, y: np.ndarray, w: np.ndarray) -> np.ndarray:
    """The weighted SSE at every alpha of ALPHA_GRID at once, by the normal equations (good
    enough to rank the grid; the chosen alpha is refitted by least squares)."""
    power = x[None, :] ** -ALPHA_GRID[:, None]                       # (K, M)
    cols = np.stack(np.broadcast_arrays(np.ones_like(x)[None, :], power, -s2[None, :]), axis=1)  # (K, 3, M)
    gram = np.einsum("kim,kjm,m->kij", cols, cols, w)
    rhs = np.einsum("kim,m->ki", cols, w * y)
    with np.errstate(all="ignore"):
        coef = np.linalg.solve(gram + 1e-12 * np.eye(3), rhs[..., None])[..., 0]
        sse = w @ y**2 - np.einsum("ki,ki->k", rhs, coef)
    return np.where(np.isfinite(sse), sse, np.inf)


def fit_curve_law(s1: npt.ArrayLike, s2: npt.ArrayLike, loss: npt.ArrayLike, weights: npt.ArrayLike | None = None,
                  decay: float = DECAY) -> CurveLaw:
    """Least squares of L0 + A S1^-alpha - C S2 on evaluations (s1, s2, loss), each weighted by
    `weights` (a run drawn twice by a resample counts twice). Variable projection: L0, A, C are
    linear given alpha, which is searched on ALPHA_GRID and then refined between its neighbours."""
    s1, s2, y = (np.asarray(v, dtype=float) for v in (s1, s2, loss))
    w = np.ones_like(y) if weights is None else np.asarray(weights, dtype=float)
    keep = w > 0
    s1, s2, y, w = s1[keep], s2[keep], y[keep], w[keep]
    if y.size < 5 or not np.all(np.isfinite(y)) or not np.all(s1 > 0):
        raise UsageError(f"a curve law needs at least 5 finite evaluations past the warmup; got {y.size}")
    k = int(np.argmin(_grid_sse(s1, s2, y, w)))
    lo, hi = ALPHA_GRID[max(k - 1, 0)], ALPHA_GRID[min(k + 1, ALPHA_GRID.size - 1)]
    alpha = float(minimize_scalar(lambda a: _linear_part(s1, s2, y, w, a)[1], bounds=(lo, hi),
                                  method="bounded", options={"xatol": 1e-6}).x)
    (l0, a, c), best = _linear_part(s1, s2, y, w, alpha)
    return CurveLaw(L0=float(l0), A=float(a), C=float(c), alpha=alpha, decay=decay,
                    rms=math.sqrt(best / w.sum()), n_points=int(y.size))
