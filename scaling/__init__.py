"""Measure your own neural scaling laws.

The Python API mirrors the command line (docs/api.md):

    f = scaling.fit("points.csv", n="N", d="D", loss="loss")   # scaling fit --csv ...; or a run store
    f.alpha, f.verdict, f.interval("a")                         # a LawFit; f.intervals: all of them
    f.plan([1e23, 1e24]), f.predict(1e9, 2e10)                  # with intervals; arrays broadcast
    f.plot()                                                    # points, law, IsoFLOP profiles, intervals
    print(f.summary())                                          # what `scaling fit` prints
    f = scaling.load("fits/points")                             # a fit directory written by `scaling fit`
    scaling.plan(1e24, law="chinchilla")                        # scaling plan: a fit, a Law or a published law
    scaling.sweep("configs/tiny.yaml", "runs")                  # scaling sweep (trains: loads torch)
    scaling.plan_sweep(scaling.load_config("configs/tiny.yaml"))  # its runs, before any trains
    scaling.validate("fits/tiny", 1e13)                         # scaling validate
    scaling.Law(E=1.69, A=406.4, B=410.7, alpha=0.34, beta=0.28).n_opt(1e23)

The subpackages follow the data flow (docs/architecture.md): config, runs, data, train,
sweep, laws, tune, cost, validate, report, cli.

Names are imported on first use, so `import scaling` stays fast and torch loads only for the
stages that train.
"""

import sys
from importlib import import_module
from types import ModuleType
from typing import Any

__version__ = "0.1.0"

_EXPORTS = {   # name: (module, its name there)
    "UsageError": ("scaling.errors", "UsageError"),
    "load_config": ("scaling.config", "load_config"),
    "parse_config": ("scaling.config", "parse_config"),
    "SweepConfig": ("scaling.config", "SweepConfig"),
    "plan_sweep": ("scaling.sweep.plan", "plan"),       # the runs of a sweep's grid, in order
    "run_sweep": ("scaling.sweep.driver", "run_sweep"),
    "read_runs": ("scaling.runs.store", "read_runs"),
    "fit": ("scaling.laws.api", "fit"),
    "load": ("scaling.laws.api", "load"),
    "plan": ("scaling.laws.api", "plan"),               # the compute-optimal allocation
    "fit_figure": ("scaling.report.plot", "fit_figure"),
    "LawFit": ("scaling.laws.results.lawfit", "LawFit"),
    "Law": ("scaling.laws.forms.law", "Law"),
    "REFERENCES": ("scaling.laws.forms.references", "REFERENCES"),
}

__all__ = sorted(_EXPORTS)


class _StagePackage(ModuleType):
    """A stage's package that calls its stage's function: `scaling.sweep(config)` is
    `scaling.sweep.driver.sweep(config)` while `scaling.sweep.plan` stays a module."""

    _function: tuple[str, str]

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        module, name = self._function
        return getattr(import_module(module), name)(*args, **kwargs)


def stage_function(package: str, module: str, name: str) -> None:
    """Make the stage package `package` callable as `module.name`, a plain function.

    Why not export the function as `scaling.sweep`: importing any `scaling.sweep.<module>` binds
    the package to the attribute `scaling.sweep`, over the function, so the name must be the
    package. A module's class may be swapped for a subclass of ModuleType (the documented way to
    give a module behaviour); the work stays in the function."""
    stage = sys.modules[package]
    stage.__class__ = _StagePackage
    stage._function = (module, name)   # type: ignore[attr-defined]


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        module, attribute = _EXPORTS[name]
        return getattr(import_module(module), attribute)
    try:
        return import_module(f"scaling.{name}")  # stages: scaling.laws, scaling.cost, ...
    except ModuleNotFoundError as exc:
        if exc.name != f"scaling.{name}":
            raise
        raise AttributeError(f"module 'scaling' has no attribute {name!r}") from None
