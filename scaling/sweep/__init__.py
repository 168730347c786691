"""A sweep: the grid of runs a config asks for, their order, and the executors that train them.

`plan` (the runs of the grid, their ids, sizes and order), `estimates` (their wall time before
they run), `driver` (`run_sweep`: train the runs not yet ended into the run store), `claims`
(each run's lock, and the start of WSD branches), `job` (what an executor is given and returns),
`executor` with `packing` and `worker` (local worker processes), `ray_executor` (a Ray cluster)
and `executors` (the one a config asks for). Every run ends in the run store (`scaling.runs`).
"""

import sys
from types import ModuleType


class _CallableStage(ModuleType):
    """`scaling.sweep(config)` trains a sweep while `scaling.sweep.plan` stays a module: the
    package is the function as well (a module's class may be swapped for a subclass of
    ModuleType, the documented way to give a module behaviour)."""

    def __call__(self, config, runs_dir="runs", *, cache_dir=None, reporter=None):
        """Train every run of the sweep `config` (a SweepConfig or a YAML path) not yet ended into
        runs_dir/<name>, as `scaling sweep` does; the `driver.SweepResult`. Loads torch."""
        from scaling.config import SweepConfig, load_config
        from scaling.sweep.driver import run_sweep

        cfg = config if isinstance(config, SweepConfig) else load_config(config)
        return run_sweep(cfg, runs_dir, cache_dir, reporter)


sys.modules[__name__].__class__ = _CallableStage
