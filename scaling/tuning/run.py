"""`scaling.tune(config)`: what `scaling tune` does, as one call (docs/api.md).

    tuned = scaling.tune("configs/tiny.yaml", lrs=[1e-3, 3e-3, 1e-2], tokens=500_000)   # trains
    tuned.law.describe()                   # lr_opt = c N^k over the shapes with an inside optimum
    tried = scaling.tune("configs/tiny.yaml", budgets=True, beta2=[0.95, 0.99])
    tried.chosen.law                       # lr_opt = c N^p D^q at the beta2 chosen

One budget (`shapes`: each shape at a log grid of rates, lr_opt = c N^k by `lr_law`) or the sweep's
own cells (`budgets=True`, `budgets.tune_each_beta2`). The options of one mode are refused in the
other, as the command refuses its flags (`check_mode`). The runs go into the run store, as any
sweep's; the files (tune.json, the tuned config, the figure) are the command's to write
(`scaling.tuning.files`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal, overload

from scaling.config import SweepConfig, load_config
from scaling.errors import UsageError
from scaling.tuning.budgets import Beta2Tunings, tune_each_beta2
from scaling.tuning.lr_law import LRLaw, lr_law
from scaling.tuning.shapes import DEFAULT_LRS, Tuning, learning_rates, tune_shapes

if TYPE_CHECKING:
    from scaling.sweeps.job import Reporter

ONE_BUDGET = ("tokens", "lrs")                  # the options of a tuning at one budget
AT_BUDGETS = ("seeds", "beta2", "cells")        # and those of a tuning at the sweep's own cells


@dataclass(frozen=True)
class TunedRates:
    """A tuning at one budget: each shape's rates, losses and choice (`tuning`), and lr_opt = c N^k
    fitted over the shapes whose optimum lies inside their grid (`law`)."""

    tuning: Tuning
    law: LRLaw

    @property
    def failed(self) -> bool:
        """Whether a tuning run failed (the command then exits 1)."""
        return any("failed" in s.statuses for s in self.tuning.shapes)


def check_mode(budgets: bool, given: dict[str, object], spell: Callable[[str], str] = str) -> None:
    """Refuse the options of the other mode: `given` maps an option to its value (None: not given);
    `spell` writes an option's name (the command line's: its flag)."""
    if budgets:
        wrong = [spell(k) for k in ONE_BUDGET if given.get(k) is not None]
        if wrong:
            raise UsageError(f"{spell('budgets')} tunes each cell at its own D and rates: {', '.join(wrong)} "
                             "cannot go with it")
        return
    wrong = [spell(k) for k in AT_BUDGETS if given.get(k) is not None]
    if wrong:
        raise UsageError(f"{', '.join(wrong)}: only with {spell('budgets')}")


def training_seeds(seeds: Sequence[int]) -> list[int]:
    """Distinct non-negative whole numbers, at least one."""
    if not seeds or any(isinstance(s, bool) or int(s) != s or s < 0 for s in seeds) or len(set(seeds)) != len(seeds):
        raise UsageError(f"the seeds must be distinct non-negative integers; got {list(seeds)}", options=("seeds",))
    return [int(s) for s in seeds]


def beta2_values(values: Sequence[float]) -> list[float]:
    """Distinct AdamW beta2 values in (0, 1), ascending."""
    if not values or not all(0 < v < 1 for v in values):
        raise UsageError(f"each beta2 must lie in (0, 1); got {list(values)}", options=("beta2",))
    return sorted({float(v) for v in values})


@overload
def tune(config: SweepConfig | str | Path, *, lrs: Sequence[float | str] | None = ..., tokens: int | None = ...,
         budgets: Literal[False] = ..., cells: str | None = ..., seeds: Sequence[int] | None = ...,
         beta2: Sequence[float] | None = ..., runs_dir: str | Path = ..., cache_dir: Path | None = ...,
         reporter: Reporter | None = ...) -> TunedRates: ...
@overload
def tune(config: SweepConfig | str | Path, *, lrs: Sequence[float | str] | None = ..., tokens: int | None = ...,
         budgets: Literal[True], cells: str | None = ..., seeds: Sequence[int] | None = ...,
         beta2: Sequence[float] | None = ..., runs_dir: str | Path = ..., cache_dir: Path | None = ...,
         reporter: Reporter | None = ...) -> Beta2Tunings: ...
def tune(config: SweepConfig | str | Path, *, lrs: Sequence[float | str] | None = None, tokens: int | None = None,
         budgets: bool = False, cells: str | None = None, seeds: Sequence[int] | None = None,
         beta2: Sequence[float] | None = None, runs_dir: str | Path = "runs", cache_dir: Path | None = None,
         reporter: Reporter | None = None) -> TunedRates | Beta2Tunings:
    """Tune the learning rates of `config` (a SweepConfig, or its YAML) as `scaling tune` does,
    training the tuning runs not yet ended into `runs_dir` (loads torch).

        tuned = scaling.tune("configs/tiny.yaml", lrs=[1e-3, 3e-3, 1e-2], tokens=500_000)
        tuned.tuning.shapes[0].choice.lr, tuned.law.describe()

    At one budget: each shape at the rates `lrs` (at least 3; default: 7 from 1e-3 to 3e-2) on
    `tokens` tokens (default: the smallest D of the sweep's runs), each shape's rate chosen and
    lr_opt = c N^k fitted: a `TunedRates`. With `budgets=True`: the sweep's own cells (`cells`,
    "corners" by default, or "all") at their own D, once per training seed in `seeds` (default: the
    config's seed) at each AdamW beta2 in `beta2` (default: the config's), lr_opt = c N^p D^q
    fitted: a `scaling.tuning.budgets.Beta2Tunings`. `reporter`: one-budget runs' progress
    (`scaling.sweeps.job.Reporter`). Bad input raises UsageError before any training."""
    cfg = config if isinstance(config, SweepConfig) else load_config(config)
    check_mode(budgets, {"tokens": tokens, "lrs": lrs, "seeds": seeds, "beta2": beta2, "cells": cells})
    if budgets:
        return tune_each_beta2(cfg, runs_dir, cache_dir, cells or "corners",
                               None if seeds is None else training_seeds(seeds),
                               [None] if beta2 is None else beta2_values(beta2))
    rates = DEFAULT_LRS if lrs is None else learning_rates(lrs)
    tuning = tune_shapes(cfg, rates, tokens, runs_dir, cache_dir, reporter)    # tokens checked by tuning_config
    return TunedRates(tuning, lr_law(tuning.shapes))
