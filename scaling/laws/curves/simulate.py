"""Synthetic training curves from a known law and a known schedule effect: what `fit --curves` is
checked against (tests/laws/test_curve_fit.py, bench/bench_curve_fit.py) and what `scaling design
--curves` simulates (`scaling.laws.design.curves`).

    runs = simulate_curves(law, cross_grid(sizes, tokens), train=TrainConfig(batch_tokens=16384),
                           lr=1e-3, anneal=1.0, decay=0.99, noise=0.005, run_noise=0.003, seed=0)
    runs = simulate_schedules(law, [PlannedCurve(n, RunSchedule(...), start), ...], anneal=..., decay=...)

Each run of size N trains its schedule's steps (peak `lr`, `batch_tokens` a step), and its loss
after step s is Tissue et al.'s form with the law's constants:

    L(s) = E + A / N^alpha + B / (S1(s) batch_tokens / lr)^beta - anneal * S2(s)

(S1 batch_tokens / lr: the tokens the run would have trained at its peak rate), evaluated every
`eval_interval` steps and at the last; each evaluation is multiplied by exp(noise z) and each
whole curve by exp(run_noise z_run) (a run's seed), z standard normal. The final losses follow
L(N, D) with the law's alpha and beta (so its a), the annealing bonus nearly constant once runs
are much longer than 1 / (1 - decay) steps. A WSD stable run (a constant schedule) logs a curve
but has no final loss; a branch logs only its own evaluations, after its branch step (`start`):
the ones before are its stable run's.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pandas as pd

from scaling.config import TrainConfig
from scaling.errors import UsageError
from scaling.laws.curves.fit import CurveRuns
from scaling.laws.curves.law import RunSchedule
from scaling.laws.forms.law import Law


@dataclass(frozen=True)
class PlannedCurve:
    """One run to simulate: its size N, its schedule, and the step after which it logs."""

    n: float
    schedule: RunSchedule
    start: int = 0


def simulate_curves(law: Law, runs: npt.ArrayLike, *, train: TrainConfig, lr: float, anneal: float, decay: float,
                    noise: float = 0.005, run_noise: float = 0.0, eval_interval: int = 100,
                    seed: int = 0) -> CurveRuns:
    """The curves a sweep of `runs` ((N, D) rows, each ceil(D / batch_tokens) steps of `train`'s
    schedule at peak `lr`) would log under `law` (see module doc), seeded."""
    runs = np.asarray(runs, dtype=float)
    if runs.ndim != 2 or runs.shape[1] != 2:
        raise UsageError(f"runs must be an (M, 2) array of (N, D); got shape {runs.shape}")
    planned = [PlannedCurve(n, RunSchedule(steps=math.ceil(d / train.batch_tokens), lr=lr, train=train))
               for n, d in runs]
    return simulate_schedules(law, planned, anneal=anneal, decay=decay, noise=noise, run_noise=run_noise,
                              eval_interval=eval_interval, seed=seed)


def simulate_schedules(law: Law, planned: Iterable[PlannedCurve], *, anneal: float, decay: float, noise: float = 0.005,
                       run_noise: float = 0.0, eval_interval: int = 100, seed: int = 0) -> CurveRuns:
    """The curves the `planned` runs (`PlannedCurve`s) would log under `law` (see module doc), seeded."""
    if not (noise >= 0 and run_noise >= 0 and anneal >= 0 and eval_interval >= 1):
        raise UsageError("noise, run_noise and anneal must be >= 0 and eval_interval >= 1")
    rng = np.random.default_rng(seed)
    rows, schedules, final = [], {}, {}
    for i, run in enumerate(planned):
        schedule, n, batch = run.schedule, float(run.n), run.schedule.train.batch_tokens
        run_id = f"sim-{i}-N{n:.4g}-D{schedule.steps * batch:.4g}" + ("-stable" if schedule.constant else "")
        s1, s2 = schedule.areas(decay)
        steps = np.unique(np.append(np.arange(eval_interval, schedule.steps + 1, eval_interval), schedule.steps))
        steps = steps[steps > run.start]
        clean = law.E + law.A / n**law.alpha + law.B / (s1[steps - 1] * batch / schedule.lr) ** law.beta \
            - anneal * s2[steps - 1]
        loss = clean * np.exp(noise * rng.standard_normal(steps.size) + run_noise * rng.standard_normal())
        rows += [{"run_id": run_id, "n": n, "tokens": float(s * batch), "loss": float(v), "step": int(s)}
                 for s, v in zip(steps, loss)]
        schedules[run_id] = schedule
        if not schedule.constant:
            final[run_id] = (n, float(schedule.steps * batch), float(loss[-1]))
    return CurveRuns(evaluations=pd.DataFrame(rows), schedules=schedules, final=final,
                     source=f"simulated curves (noise {noise:g}, run noise {run_noise:g}, seed {seed})")
