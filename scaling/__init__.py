"""Measure your own neural scaling laws.

The Python API mirrors the command line, stage by stage:

    cfg = scaling.load_config("configs/tiny.yaml")
    result = scaling.run_sweep(cfg, "runs")                 # scaling sweep
    from scaling.laws import fit, fitdata
    data = fitdata.from_runs("runs/tiny")                   # scaling fit runs/tiny
    result = fit.fit_law(data.n, data.d, data.loss)
    scaling.Law(E=1.69, A=406.4, B=410.7, alpha=0.34, beta=0.28).n_opt(1e23)

The subpackages follow the data flow (docs/architecture.md): config, runs, data, train,
sweep, laws, cost, report, cli.

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
    "Law": "scaling.laws.law",
    "REFERENCES": "scaling.laws.references",
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
