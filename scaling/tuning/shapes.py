"""Learning rates measured, not hand-set: a short learning-rate sweep per shape, and its optimum.

    tuning = tune_shapes(cfg, lrs=(1e-3, 3e-3, 1e-2), tokens=250_000, runs_dir="runs")
    tuning.shapes[0].lr_opt            # the chosen rate of the first shape
    tuned = tuned_config(raw_yaml_dict, tuning)

The tuning runs are a sweep of their own, `<name>-tune`: every shape of the grid repeated at
each learning rate, one token budget. The sweep driver trains them into the run store, so they
resume and skip like any run (the run id holds the learning rate, so each rate is its own run).
Per shape, the rate of lowest final loss is the best grid point; a parabola of loss in ln(lr)
through it and its two neighbours places the optimum between them. A best point at the grid's
edge is reported as such: the optimum lies outside, and the grid must be widened. A run that
diverged (or failed) counts as worse than any that finished: in a learning-rate sweep that is
a rate too high.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from scaling.config import Shape, SweepConfig, derived_name, parse_config, run_lr
from scaling.errors import UsageError
from scaling.formats import positive
from scaling.runs import store
from scaling.sweeps.plan import plan

if TYPE_CHECKING:
    from scaling.sweeps.job import Reporter

# 7 rates from 1e-3 to 3e-2, x1.76 apart: brackets the optima of the tiny shapes measured by
# hand (1.25e-3 to 1e-2 at 500K tokens) with room on both sides.
DEFAULT_LRS = tuple(float(f"{x:.3g}") for x in np.geomspace(1e-3, 3e-2, 7))
TUNED = "-tuned"   # the tuned config's name: the config's, and this


def shape_key(shape: Shape) -> tuple[int, int, int]:
    return shape.d_model, shape.n_layers, shape.n_heads


def learning_rates(values: Iterable[float | str]) -> tuple[float, ...]:
    """At least 3 distinct positive rates, ascending: a parabola needs the best and two neighbours."""
    lrs = sorted({positive(v, "a learning rate") for v in values})
    if len(lrs) < 3:
        raise UsageError(f"a learning-rate sweep needs at least 3 distinct rates, got {len(lrs)}")
    return tuple(lrs)


def tuning_config(cfg: SweepConfig, lrs: Sequence[float], tokens: int | None = None) -> SweepConfig:
    """The sweep `<name>-tune`: each distinct shape at each rate, trained on `tokens` tokens (the
    smallest D of the sweep's runs by default), with the config's corpus, tokenizer, model, training and
    executor settings. Retries are off: a retry at a lower rate would repeat a rate the sweep tries."""
    shapes = {shape_key(s): s for s in getattr(cfg.grid, "models", None) or ()}
    if not shapes:
        raise UsageError(f"config {cfg.name} has no grid.models: no shapes to tune")
    if tokens is None:   # the smallest budget a run of the sweep trains on (an IsoFLOP design has no grid.tokens)
        tokens = min(cfg.grid.tokens) if cfg.grid.tokens else min(run.spec.tokens for run in plan(cfg))
    tokens = positive(tokens, "the tuning token budget", integer=True)
    derived_name(cfg.name, TUNED, "the tuned config tune writes")   # checked before any training
    data = cfg.model_dump()
    data.update(name=derived_name(cfg.name, "-tune", "the tuning sweep"), train={**data["train"], "retries": 0},
                grid={"models": [{**s.model_dump(), "lr": lr} for s in shapes.values() for lr in learning_rates(lrs)],
                      "tokens": [tokens]})
    return parse_config(data, f"the tuning sweep of {cfg.name}")


def tuning_tokens(tune_cfg: SweepConfig) -> int:
    """The one token count every run of a tuning sweep (`tuning_config`) trains on."""
    tokens = tune_cfg.grid.tokens
    if tokens is None or len(tokens) != 1:
        raise ValueError(f"{tune_cfg.name} is not a tuning sweep: its runs train on more than one token count")
    return tokens[0]


@dataclass(frozen=True)
class Choice:
    """Where one shape's loss bottoms out in ln(lr)."""

    lr: float | None            # the chosen rate; None when no run finished
    loss: float | None          # the parabola's value there, or the best run's loss
    method: str                 # "parabola", "grid point" (a neighbour diverged or the curve is flat),
                                # "edge" (best at the grid's edge) or "none"
    edge: str | None = None     # "lowest" or "highest" when the best rate is at that end of the grid
    parabola: tuple[float, float, float] | None = None   # loss = p2 u^2 + p1 u + p0, u = ln lr
    bracket: tuple[float, float] | None = None           # the neighbours' rates, between which it was fitted


def choose(lrs: Sequence[float], losses: Sequence[float | None]) -> Choice:
    """The optimum of one shape's sweep; a loss of None (diverged, failed, not run) is worst."""
    x = np.log(np.asarray(lrs, dtype=float))
    y = np.array([math.inf if v is None or not math.isfinite(v) else float(v) for v in losses])
    if not np.isfinite(y).any():
        return Choice(None, None, "none")
    i = int(np.argmin(y))
    if i in (0, len(y) - 1):
        return Choice(float(lrs[i]), float(y[i]), "edge", edge="lowest" if i == 0 else "highest")
    near = slice(i - 1, i + 2)
    p = np.polyfit(x[near], y[near], 2) if np.isfinite(y[near]).all() else None
    if p is None or p[0] <= 0:
        return Choice(float(lrs[i]), float(y[i]), "grid point")
    # The middle of three points is the lowest, so a convex parabola bottoms out between the outer two.
    u = -p[1] / (2 * p[0])
    return Choice(float(f"{math.exp(u):.3g}"), float(np.polyval(p, u)), "parabola",
                  parabola=(float(p[0]), float(p[1]), float(p[2])),
                  bracket=(float(lrs[i - 1]), float(lrs[i + 1])))


@dataclass(frozen=True)
class ShapeTuning:
    """One shape's sweep as recorded in the store, and the rate chosen from it."""

    d_model: int
    n_layers: int
    n_heads: int
    n_params: int               # non-embedding parameters N
    config_lr: float            # the rate the config trains this shape at (its own, or the lr rule's)
    lrs: tuple[float, ...]
    losses: tuple[float | None, ...]   # final validation loss; None unless the run finished
    statuses: tuple[str, ...]          # finished, diverged, failed or incomplete
    run_ids: tuple[str, ...]
    choice: Choice

    @property
    def name(self) -> str:
        return f"d{self.d_model}/L{self.n_layers}/H{self.n_heads}"


@dataclass(frozen=True)
class Tuning:
    config: SweepConfig         # the tuning sweep
    sweep_dir: Path
    tokens: int
    lrs: tuple[float, ...]
    shapes: list[ShapeTuning]
    trained: int                # runs this call trained
    skipped: int                # runs already ended


def read_tuning(cfg: SweepConfig, tune_cfg: SweepConfig, sweep_dir: Path) -> list[ShapeTuning]:
    """Each shape's planned runs, read back from the store (runs of other budgets or rates there are
    ignored), smallest shape first."""
    rows = store.read_runs(sweep_dir).set_index("run_id") if Path(sweep_dir).is_dir() else None
    config_lr = {shape_key(s): run_lr(cfg.train, s) for s in cfg.grid.models}
    by_shape: dict[tuple[int, int, int], list] = {}
    for run in (r for r in plan(tune_cfg) if r.kind != "stable"):  # WSD: the branches are the tuning runs
        row = rows.loc[run.run_id] if rows is not None and run.run_id in rows.index else None
        status = "incomplete" if row is None else row.status
        loss = float(row.final_val_loss) if row is not None and status == "finished" else None
        by_shape.setdefault(shape_key(run.shape), []).append((run, status, loss))
    shapes = []
    for key, runs in by_shape.items():
        lrs, losses = [r.spec.lr for r, _, _ in runs], [loss for _, _, loss in runs]
        shapes.append(ShapeTuning(*key, n_params=runs[0][0].n_params_non_embedding, config_lr=config_lr[key],
                                  lrs=tuple(lrs), losses=tuple(losses), statuses=tuple(s for _, s, _ in runs),
                                  run_ids=tuple(r.run_id for r, _, _ in runs), choice=choose(lrs, losses)))
    return shapes


def tune_shapes(cfg: SweepConfig, lrs: Sequence[float] = DEFAULT_LRS, tokens: int | None = None,
                runs_dir: Path | str = "runs", cache_dir: Path | None = None,
                reporter: Reporter | None = None) -> Tuning:
    """Train the runs of the tuning sweep not yet ended (budget: the grid's smallest by default),
    and choose each shape's rate from the store."""
    from scaling.sweeps.driver import run_sweep  # training loads torch; planning a tuning does not

    tune_cfg = tuning_config(cfg, lrs, tokens)
    result = run_sweep(tune_cfg, runs_dir, cache_dir, reporter)
    return Tuning(tune_cfg, result.sweep_dir, tuning_tokens(tune_cfg), learning_rates(lrs),
                  read_tuning(cfg, tune_cfg, result.sweep_dir),
                  trained=len(result.trained), skipped=len(result.skipped))


def tuned_config(data: dict, shapes: list[ShapeTuning]) -> dict:
    """The config as read from its YAML, named `<name>-tuned` and with each tuned shape's lr set
    to its chosen rate. A new name, so that its runs go to a store of their own: mixed into the
    old one, a fit would read runs at the old rates and the new alike."""
    chosen = {(s.d_model, s.n_layers, s.n_heads): s.choice.lr for s in shapes if s.choice.lr is not None}
    parsed = parse_config(data).grid.models  # the entries as typed values, in the YAML's order
    models = [{**entry, "lr": chosen[shape_key(shape)]} if shape_key(shape) in chosen else entry
              for entry, shape in zip(data["grid"]["models"], parsed)]
    return {**data, "name": derived_name(data["name"], TUNED, "the tuned config"),
            "grid": {**data["grid"], "models": models}}
