"""Measure your own neural scaling laws.

The Python API mirrors the command line (docs/api.md):

    f = scaling.fit("points.csv", n="N", d="D", loss="loss")   # scaling fit --csv ...; or a run store
    f.alpha, f.verdict, f.intervals["a"]                        # a LawFit
    f.plan(1e24), f.predict(1e9, 2e10)                          # with intervals from the bootstrap
    print(f.summary())                                          # what `scaling fit` prints
    f = scaling.load("fits/points")                             # a fit directory written by `scaling fit`
    scaling.sweep("configs/tiny.yaml", "runs")                  # scaling sweep (trains: loads torch)
    scaling.validate("fits/tiny", 1e13)                         # scaling validate
    scaling.Law(E=1.69, A=406.4, B=410.7, alpha=0.34, beta=0.28).n_opt(1e23)

The subpackages follow the data flow (docs/architecture.md): config, runs, data, train,
sweep, laws, cost, validate, report, cli.

Names are imported on first use, so `import scaling` stays fast and torch loads only for the
stages that train.
"""

from importlib import import_module

__version__ = "0.1.0"

_EXPORTS = {
    "UsageError": "scaling.errors",
    "load_config": "scaling.config",
    "parse_config": "scaling.config",
    "SweepConfig": "scaling.config",
    "plan": "scaling.sweep.plan",
    "run_sweep": "scaling.sweep.driver",
    "read_runs": "scaling.runs.store",
    "fit": "scaling.laws.api",
    "load": "scaling.laws.api",
    "LawFit": "scaling.laws.results.lawfit",
    "Law": "scaling.laws.forms.law",
    "REFERENCES": "scaling.laws.forms.references",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(import_module(_EXPORTS[name]), name)
    try:
        return import_module(f"scaling.{name}")  # stages: scaling.laws, scaling.cost, ...
    except ModuleNotFoundError as exc:
        if exc.name != f"scaling.{name}":
            raise
        raise AttributeError(f"module 'scaling' has no attribute {name!r}") from None
