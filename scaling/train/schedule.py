"""The learning-rate schedule of one run: warmup, then decay to min_lr_ratio * lr on its last step.

The schedule spans exactly the run's steps: Hoffmann et al. 2022 showed that a schedule longer
than the run overstates the loss of short runs, which bends the fitted law. cosine and linear
decay right after the warmup.

WSD (train.schedule 'wsd', Hagele et al. 2024): warmup, a constant (stable) phase, then a
cooldown (cooldown_shape) over the last cooldown_fraction of the run's steps, which also ends at
min_lr_ratio * lr on the last step. Given a shared warmup, the lr of the first (1 - f) of a WSD
run does not depend on its length: what lets one stable run serve every budget of a shape (see
scaling.sweeps.plan).
"""

from __future__ import annotations

import math

from scaling.config import TrainConfig


def warmup_steps(steps: int, train: TrainConfig) -> int:
    """round(warmup_fraction * steps), leaving at least the last step to the decay."""
    return min(round(train.warmup_fraction * steps), steps - 1)


def shape_warmup_steps(train: TrainConfig, n_total: int, steps: int) -> int | None:
    """train.warmup_tokens_per_param's warmup for a run of `steps` steps of a shape of n_total
    parameters: ceil(k n_total / batch_tokens) steps whatever the run's length, capped below its
    last step; None where the warmup is a fraction of the run's steps (warmup_steps)."""
    if train.warmup_tokens_per_param is None:
        return None
    return min(math.ceil(train.warmup_tokens_per_param * n_total / train.batch_tokens), steps - 1)


def cooldown_steps(steps: int, train: TrainConfig) -> int:
    """WSD: round(cooldown_fraction * steps), at least 1 and at most the whole run."""
    return min(steps, max(1, round(train.cooldown_fraction * steps)))


def schedule_bounds(steps: int, train: TrainConfig, warmup: int | None = None,
                    constant: bool = False) -> tuple[int, int]:
    """(warmup, decay_start) in steps: the lr rises over steps 1..warmup, holds until decay_start
    and decays over decay_start+1..steps. cosine/linear decay right after warmup; wsd holds until
    its cooldown (the last cooldown_steps); `constant` (a WSD stable run) never decays."""
    if train.schedule != "wsd":
        warmup = warmup_steps(steps, train) if warmup is None else warmup
        return warmup, warmup
    decay_start = steps if constant else steps - cooldown_steps(steps, train)
    warmup = min(warmup_steps(steps, train) if warmup is None else warmup, decay_start)
    return warmup, decay_start


def decay_shape(progress: float, shape: str) -> float:
    """The fraction of (lr - min_lr) left at `progress` (0..1) of the decay; exactly 0 at 1."""
    if shape == "cosine":
        return 0.5 * (1 + math.cos(math.pi * progress))
    if shape == "1-sqrt":
        return 1 - math.sqrt(progress)
    return 1 - progress


def lr_at(step: int, steps: int, lr: float, train: TrainConfig, warmup: int | None = None,
          constant: bool = False) -> float:
    """Learning rate of update `step` (1..steps): linear warmup to lr, then cosine or linear decay
    that reaches min_lr_ratio*lr at exactly step == steps. For wsd: constant lr after warmup, then a
    cooldown (cooldown_shape) over the last cooldown_fraction of the steps that reaches
    min_lr_ratio*lr at exactly step == steps; `warmup` (steps) overrides warmup_fraction, and
    `constant` (a stable run) leaves out the cooldown."""
    warmup, decay_start = schedule_bounds(steps, train, warmup, constant)
    if step < warmup:
        return lr * step / warmup
    if train.schedule == "wsd" and step <= decay_start:
        return lr
    progress = (step - decay_start) / (steps - decay_start)
    shape = train.cooldown_shape if train.schedule == "wsd" else train.schedule
    min_lr = train.min_lr_ratio * lr
    return min_lr + (lr - min_lr) * decay_shape(progress, shape)
