"""Measure your own neural scaling laws.

The Python API mirrors the command line (docs/api.md):

    f = scaling.fit("points.csv", n="N", d="D", loss="loss")   # scaling fit --csv ...; or a run store
    f.alpha, f.verdict, f.interval("a")                         # a LawFit; f.intervals: all of them
    f.plan([1e23, 1e24]), f.predict(1e9, 2e10)                  # with intervals; arrays broadcast
    scaling.fit_figure(f)                                       # points, law, IsoFLOP profiles, intervals
    print(f.summary())                                          # what `scaling fit` prints
    f = scaling.load("fits/points")                             # a fit directory written by `scaling fit`
    scaling.plan(1e24, law="chinchilla")                        # scaling plan: a fit, a Law or a published law
    scaling.compare(f)                                          # scaling compare: beside Kaplan, Chinchilla, Besiroglu
    scaling.sweep("configs/tiny.yaml", "runs")                  # scaling sweep (trains: loads torch)
    scaling.plan_sweep(scaling.load_config("configs/tiny.yaml"))  # its runs, before any trains
    scaling.validate("fits/tiny", 1e13)                         # scaling validate
    scaling.tune("configs/tiny.yaml", tokens=500_000)           # scaling tune (trains): each shape's lr
    scaling.design("configs/tiny.yaml", fit="fits/tiny")        # scaling design: what the sweep would determine
    scaling.read_runs("runs/tiny")                              # scaling runs: a DataFrame
    scaling.Law(E=1.69, A=406.4, B=410.7, alpha=0.34, beta=0.28).n_opt(1e23)

The subpackages follow the data flow (docs/architecture.md): config, runs, data, train,
sweeps, laws, tuning, cost, validation, report, cli. The stages' functions are named for what they
do (`scaling.sweep`, `scaling.validate`), their packages for what they hold (`scaling.sweeps`,
`scaling.validation`), so that a function and a package never share a name.

The functions behind import, report and cost are in docs/api.md's table. Names
are imported on first use, so `import scaling` stays fast and torch loads only for the stages
that train; `dir(scaling)` lists them, for a notebook's completion.
"""

from importlib import import_module
from typing import Any

__version__ = "0.1.0"

_EXPORTS = {   # name: (module, its name there)
    "UsageError": ("scaling.errors", "UsageError"),
    "load_config": ("scaling.config", "load_config"),
    "parse_config": ("scaling.config", "parse_config"),
    "SweepConfig": ("scaling.config", "SweepConfig"),
    "plan_sweep": ("scaling.sweeps.plan", "plan"),      # the runs of a sweep's grid, in order
    "run_sweep": ("scaling.sweeps.driver", "run_sweep"),
    "sweep": ("scaling.sweeps.driver", "sweep"),        # train a sweep's runs not yet ended
    "validate": ("scaling.validation.run", "validate_fit"),
    "tune": ("scaling.tuning.run", "tune"),             # each shape's learning rate measured (trains)
    "design": ("scaling.laws.design.outlooks", "design"),   # what a planned sweep would determine
    "read_runs": ("scaling.runs.store", "read_runs"),
    "fit": ("scaling.laws.api", "fit"),
    "load": ("scaling.laws.api", "load"),
    "plan": ("scaling.laws.api", "plan"),               # the compute-optimal allocation
    "compare": ("scaling.laws.api", "compare"),         # a fit beside the published laws
    "fit_figure": ("scaling.report.plot", "fit_figure"),
    "LawFit": ("scaling.laws.results.lawfit", "LawFit"),
    "Law": ("scaling.laws.forms.law", "Law"),
    "REFERENCES": ("scaling.laws.forms.references", "REFERENCES"),
}

__all__ = sorted(_EXPORTS)


def __dir__() -> list[str]:
    return sorted({*_EXPORTS, *(name for name in globals() if name.startswith("__"))})


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
