"""What one run is: `RunSpec`, everything that decides its result, and what it costs to train.

One run is `steps = ceil(D / batch_tokens)` AdamW updates, so it trains steps * batch_tokens
tokens: D rounded up to whole batches (by less than one batch).

WSD runs (scaling.train.schedule) come in two kinds besides the plain run. A *stable run* trains
the constant phase of a shape once, up to the largest of its budgets' branch points, and saves a
checkpoint at each (`branch_points`, files store.branch_checkpoint(step)); a *branch*
(`branch_of`, `branch_step`) starts from such a checkpoint and trains only the cooldown.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from scaling.config import TrainConfig
from scaling.train.schedule import schedule_bounds
from scaling.train.shape import GPTConfig, flops_by_measure


@dataclass(frozen=True)
class RunSpec:
    run_id: str
    model: GPTConfig
    train: TrainConfig
    lr: float      # this run's peak learning rate (the sweep's, scaled by the width rule)
    tokens: int    # the budget D
    seed: int
    retry_of: str | None = None  # the diverged run this one retries at a lower learning rate
    # Schedule 'wsd' only. warmup: warmup steps (None: warmup_fraction of this run's steps); a
    # sweep shares one warmup among the budgets of a shape, so that their stable phases coincide.
    warmup: int | None = None
    # A stable run: constant lr after warmup up to its last step (no cooldown), saving a
    # checkpoint at each of these steps for the branches. Its summary's status is 'stable'.
    branch_points: tuple[int, ...] = ()
    # A branch: starts from the checkpoint that stable run `branch_of` saved at `branch_step`.
    branch_of: str | None = None
    branch_step: int | None = None
    # The compute budget an IsoFLOP design planned this run for (recorded in its summary for
    # Approach 2; not in its id: the run computes the same whatever budget it serves).
    budget: float | None = None
    budget_measure: str | None = None  # what `budget` counts (scaling.train.counts.COMPUTE_MEASURES)
    # What the run is for when it is not a fit point: "validation" (scaling.validate: it checks a
    # fit's prediction, and the fitter leaves it out). In its summary; not in its id.
    role: str | None = None

    @property
    def steps(self) -> int:
        """AdamW updates of the run: its budget rounded up to whole batches."""
        return math.ceil(self.tokens / self.train.batch_tokens)

    @property
    def stable(self) -> bool:
        return bool(self.branch_points)

    @property
    def branch(self) -> tuple[str, int] | None:
        """(the stable run, the step) a WSD branch starts from; None for any other run."""
        if self.branch_of is None or self.branch_step is None:
            return None
        return self.branch_of, self.branch_step

    def schedule(self) -> tuple[int, int]:
        """(warmup steps, step after which the decay starts) of this run's learning-rate schedule."""
        return schedule_bounds(self.steps, self.train, self.warmup, constant=self.stable)

    @property
    def start_tokens(self) -> int:
        """Tokens of the budget this run does not train itself: a WSD branch starts at its branch point."""
        return (self.branch_step or 0) * self.train.batch_tokens

    def trained_flops(self, tokens: int | None = None) -> float:
        """Exact FLOPs of the first `tokens` of the budget (all of it by default) that this run
        trains itself: none of a branch's tokens before its branch point."""
        tokens = self.tokens if tokens is None else tokens
        return float(flops_by_measure(self.model)["exact"]) * max(0, tokens - self.start_tokens)
