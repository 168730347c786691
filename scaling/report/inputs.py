"""Finding and loading what a report needs: the fit, its points, and the run store behind them.

    inputs = load_inputs("runs/tiny", bootstrap=1000)         # fit a run store here
    inputs = load_inputs("fits/tiny")                          # or read a fit.json (and its runs)
    inputs = load_inputs("runs/tiny", fit="fits/tiny")         # a store with an existing fit's numbers
    inputs = load_inputs(dataset="chinchilla", drop_highest_loss=5)

What comes from where:

* A run store (runs/<sweep>): its points are loaded as `scaling fit` loads them
  (`fitdata.from_runs`, `apply_filters`), except that a finished run lacking a number is left
  out with the reason instead of refused, and fitted by `analysis.fit_data` (so the fit.json
  written beside the report is byte-identical to `scaling fit RUNS_DIR --bootstrap K`'s). The
  run table, every run's curve (`scaling.laws.curves.read_curves`) and config.yaml feed the loss curves,
  the run table and the sweep's settings.
* A fit.json (or its folder): the numbers are the file's. Its `data.source` names the points; a
  run store is looked for at that path (as given, then relative to the fit's folder and its
  parents), a packaged dataset is reloaded, and the file's filters are applied again; the
  digest says whether they are still the points it was fitted to. What cannot be found is
  listed in `notes`, and the figures that need it are left out.
* A packaged dataset: fitted here; there are no training curves.

A fit read from a file has no optimum or bootstrap samples in memory: both are recomputed,
seeded, with the file's options, resamples, seed and reference compute, so that they reproduce
its intervals (a note says if they do not), and set on the LawFit.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import pandas as pd

from scaling.config import parse_yaml
from scaling.errors import UsageError
from scaling.formats import flatten
from scaling.laws import analysis, fitdata, results, selection
from scaling.laws import bootstrap as resampling
from scaling.laws import fit as fitting
from scaling.laws.curves import curves_from_store, read_curves
from scaling.runs import store
from scaling.train.counts import COMPUTE_MEASURES
from scaling.validate.result import FILENAME as VALIDATION_FILE
from scaling.validate.result import Validation, load_validation

DEFAULT_CONVENTION = "total"


@dataclass
class Inputs:
    """Everything a report is drawn from. Only `name` and `fit` are always there."""

    name: str
    fit: results.LawFit
    data: fitdata.FitData | None = None      # the points drawn (for a read fit: as found now)
    fitted_here: bool = False
    fit_path: Path | None = None
    runs_dir: Path | None = None
    runs: pd.DataFrame | None = None          # store.read_runs: every run, any status
    curves: pd.DataFrame | None = None        # run_id, n, tokens, loss, status: every evaluation
    settings: dict | None = None              # {"common": {key: value}, "varying": [key]}
    left_out: list = field(default_factory=list)   # (what, why): runs or parts left out
    notes: list = field(default_factory=list)      # what the report cannot show, and why
    fit_command: str | None = None                 # the `scaling fit` call that gives the same fit.json
    validation: Validation | None = None           # validate.json beside the fit, where there is one


def _count(what: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
        raise UsageError(f"{what} must be a whole number >= 0; got {value!r}")
    return int(value)


def load_inputs(source=None, *, dataset: str | None = None, fit=None, bootstrap: int | None = None,
                seed: int = 0, drop_highest_loss: int = 0, param_convention: str | None = None) -> Inputs:
    """Find and load what a report needs (see the module doc). UsageError for bad inputs.

    source: a run store folder, a fit folder (holding fit.json) or a fit.json file; or None
    with `dataset`. fit: a fit.json to use with a run store instead of fitting here.
    bootstrap: resamples for a fit made here (default 1000, as `scaling fit`), or for
    recomputing a read fit's distribution (default: the file's own number). seed, and the
    filters and parameter convention, apply to a fit made here.
    """
    if bootstrap is not None:
        bootstrap = _count("the number of bootstrap resamples", bootstrap)
    seed = _count("the seed", seed)
    drop_highest_loss = _count("the number of highest losses to drop", drop_highest_loss)
    if (source is None) == (dataset is None):
        raise UsageError("give exactly one input: a run store, a fit folder or fit.json, or a packaged dataset")
    here = drop_highest_loss or param_convention is not None    # options of a fit made here
    if dataset is not None:
        if fit is not None or param_convention is not None:
            raise UsageError("an existing fit and a parameter convention apply to a run store, not to a dataset")
        data = selection.apply_filters(fitdata.from_dataset(dataset), drop_highest_loss=drop_highest_loss)
        return _fit_here(dataset, f"--dataset {dataset}", data, None, bootstrap, seed)
    source = Path(source)
    if not source.exists():
        raise UsageError(f"{source} does not exist (expected a run store runs/<sweep>, a fit folder or a fit.json)")
    if _is_fit(source):
        if fit is not None or here:
            raise UsageError("an existing fit, the filters and the parameter convention apply to a run store; "
                             f"{source} is a fit, which records its own")
        return _with_validation(_from_fit_file(source, bootstrap))
    if fit is not None:
        if here:
            raise UsageError("the filters and the parameter convention apply to a fit made here, not to an "
                             "existing fit")
        return _with_validation(_store_with_fit(source, fit, bootstrap))
    data = selection.apply_filters(_store_points(source, param_convention or DEFAULT_CONVENTION),
                                 drop_highest_loss=drop_highest_loss)
    curves = curves_from_store(source, param_convention=data.param_convention)
    flag = f" --param-convention {param_convention}" if param_convention else ""
    inputs = _fit_here(source.resolve().name, f"{source}{flag}", data, curves, bootstrap, seed)
    inputs.runs_dir = source
    _read_store(inputs)
    return inputs


def _is_fit(path: Path) -> bool:
    """True for a fit.json or its folder, False for a run store; UsageError when it is neither."""
    if path.is_file() or (path / results.FILENAME).is_file():
        return True
    if store.run_dirs(path) or (path / store.TABLE).is_file():
        return False
    raise UsageError(f"{path} is neither a run store (no <run-id>/{store.CONFIG} or {store.TABLE}) nor a "
                     f"fit folder (no {results.FILENAME})")


def _with_validation(inputs: Inputs) -> Inputs:
    """The validation beside the fit.json (`scaling validate`'s validate.json), if there is one.
    One that is there but not a regular file is refused (by the reader), not left out unsaid."""
    path = inputs.fit_path.parent / VALIDATION_FILE
    if path.exists():
        inputs.validation = load_validation(path)
    return inputs


def _store_points(runs_dir: Path, convention: str, fit: results.LawFit | None = None) -> fitdata.FitData:
    """The store's points as `scaling fit` loads them (in `fit`'s compute measure: a fit.json from
    before the measure was recorded counted 6 N D in its own N), less the finished runs that lack a
    number."""
    measure = "exact" if fit is None else fit.law.flops.measure
    if measure not in COMPUTE_MEASURES:
        measure = f"6n_{convention}"
    return fitdata.from_runs(runs_dir, convention, compute_measure=measure, drop_unmeasured=True)


def _fit_here(name: str, fit_source: str, data: fitdata.FitData, curves, bootstrap: int | None,
              seed: int) -> Inputs:
    k = results.DEFAULT_BOOTSTRAP if bootstrap is None else bootstrap
    fit = analysis.fit_data(data, bootstrap=k, seed=seed, curves=curves)
    drop = data.filters.get("drop_highest_loss")
    command = (f"scaling fit {fit_source}{f' --drop-highest-loss {drop}' if drop else ''} --bootstrap {k} "
               f"--seed {seed}")
    inputs = Inputs(name=name, fit=fit, data=data, fitted_here=True, fit_command=command)
    if not k:
        inputs.notes.append("no bootstrap (0 resamples): no intervals and no bootstrap distributions")
    return inputs


def _store_with_fit(runs_dir: Path, fit_path, bootstrap: int | None) -> Inputs:
    """A run store's points and curves, with the numbers of an existing fit.json."""
    fit = results.load_fit(fit_path)
    fit_path = Path(fit_path)
    inputs = Inputs(name=runs_dir.resolve().name, fit=fit, runs_dir=runs_dir,
                    fit_path=fit_path / results.FILENAME if fit_path.is_dir() else fit_path)
    data = _store_points(runs_dir, fit.data.param_convention or DEFAULT_CONVENTION, fit)
    _use_points(inputs, data, bootstrap)
    return inputs


def _from_fit_file(path: Path, bootstrap: int | None) -> Inputs:
    fit = results.load_fit(path)
    fit_path = path / results.FILENAME if path.is_dir() else path
    inputs = Inputs(name=fit_path.parent.resolve().name, fit=fit, fit_path=fit_path)
    source = fit.data.source
    if not source:
        inputs.notes.append(f"{fit_path} names no data source: only the law itself can be shown "
                            "(no points, residuals, hold-out check or bootstrap distributions)")
    elif source.startswith("runs "):
        # The absolute path and digest a newer fit records; an older one's store as typed then.
        recorded = fit.data.store
        inputs.runs_dir = (store.recorded_store(recorded, str(fit_path)) if recorded is not None
                           else _find_runs(source[len("runs "):], fit_path))
        if inputs.runs_dir is None:
            inputs.notes.append(f"the run store of this fit ({source[len('runs '):]}) was not found (looked "
                                f"relative to the current folder and to {fit_path.parent} and its parents): "
                                "no points, loss curves, run table, residuals, hold-out check or "
                                "bootstrap distributions")
        else:
            _use_points(inputs, _store_points(inputs.runs_dir, fit.data.param_convention or DEFAULT_CONVENTION, fit),
                        bootstrap)
    elif source.startswith("dataset "):
        name = source[len("dataset "):].split(":", 1)[0].strip()
        if name in fitdata.DATASETS:
            _use_points(inputs, fitdata.from_dataset(name), bootstrap)
        else:
            inputs.notes.append(f"unknown packaged dataset {name!r}: only the law can be shown")
    elif fit.data.table is not None and Path(fit.data.table["path"]).is_file():
        _use_points(inputs, fitdata.from_table(**fit.data.table), bootstrap)
    else:
        why = ("was not found" if fit.data.table is not None
               else "cannot be reloaded (this fit.json predates recording a table's columns)")
        inputs.notes.append(f"the points of this fit ({source}) {why}: no points, residuals, hold-out check or "
                            "bootstrap distributions")
    return inputs


def _use_points(inputs: Inputs, data: fitdata.FitData, bootstrap: int | None) -> None:
    """Take freshly loaded points for a read fit: its filters again, the digest, the store, the bootstrap."""
    filters = inputs.fit.data.filters
    if filters:
        data = selection.apply_filters(data, drop_highest_loss=int(filters.get("drop_highest_loss") or 0),
                                     min_tokens_per_param=filters.get("min_tokens_per_param"),
                                     min_tokens=filters.get("min_tokens"))
    data = data.canonical()                 # the order the fit took them in (analysis.fit_data)
    inputs.data = data
    recorded = inputs.fit.data
    if recorded.digest and recorded.digest != data.digest:
        inputs.notes.append(
            f"the points found now ({len(data)}) are not the ones this fit.json was fitted to "
            f"({recorded.n_points}; the sha256 digests differ): runs were added, removed or changed since. "
            "The figures, residuals and hold-out check use the points found now against the fit's law; "
            "refit (`scaling fit`) to bring the numbers up to date")
    if inputs.runs_dir is not None:
        _read_store(inputs)
    _bootstrap_again(inputs, bootstrap)


def _find_runs(text: str, fit_path: Path) -> Path | None:
    candidate = Path(text)
    if candidate.is_dir():
        return candidate
    if not candidate.is_absolute():
        for parent in fit_path.resolve().parents:
            if (parent / candidate).is_dir():
                return parent / candidate
    return None


def _bootstrap_again(inputs: Inputs, bootstrap: int | None) -> None:
    """Refit the points and redo the seeded bootstrap of a fit read from a file."""
    fit, data = inputs.fit, inputs.data
    options = fit.options
    k = int(options.bootstrap or 0) if bootstrap is None else bootstrap
    if len(data) < 5:
        inputs.notes.append(f"only {len(data)} points: too few to refit, so no bootstrap distributions")
        return
    delta = float(options.delta or fitting.DEFAULT_DELTA)
    try:
        selection.check_fittable(data, options.fixed_E)
        optimum = fitting.fit_law(data.n, data.d, data.loss, delta=delta, fixed_E=options.fixed_E)
    except UsageError as exc:
        inputs.notes.append(f"the points cannot be refitted ({exc}): no bootstrap distributions")
        return
    inputs.fit = fit = replace(fit, optimum=optimum)
    if options.grid not in (None, "hoffmann"):
        inputs.notes.append("this fit used a custom start grid; the refit here (for the bootstrap and the "
                            "hold-out check) uses Hoffmann's grid")
    if not k:
        inputs.notes.append("this fit.json has no bootstrap (and no number of resamples was asked for): no "
                            "bootstrap distributions")
        return
    boot = resampling.bootstrap(data.n, data.d, data.loss, n_resamples=k, seed=int(fit.seed or 0), delta=delta,
                             fixed_E=options.fixed_E, full_fit=optimum,
                             reference_compute=float(fit.reference_compute or data.compute.max()),
                             flops=fit.law.flops)
    inputs.fit = replace(fit, boot=boot)
    if fit.ci is None:
        return
    if fit.ci.n_resamples != k:
        inputs.notes.append(f"the bootstrap distributions are from {k} resamples (asked for), not the "
                            f"{fit.ci.n_resamples} behind fit.json's intervals, which are the ones quoted")
        return
    worst = max((abs(x - y) / max(abs(y), 1e-300) for key, pair in boot.intervals.items()
                 if (mine := fit.interval(key)) is not None for x, y in zip(pair, mine)), default=0.0)
    if worst > 1e-6:
        inputs.notes.append(f"the bootstrap redone here differs from fit.json's intervals (largest relative "
                            f"difference {worst:.2g}; another machine or library version?): the "
                            "histograms are this run's, the intervals quoted are fit.json's")


def _read_store(inputs: Inputs) -> None:
    """Run table, every run's validation curve and the sweep's settings; runs without a curve, listed."""
    convention = (inputs.data.param_convention if inputs.data is not None else None) or DEFAULT_CONVENTION
    found = read_curves(inputs.runs_dir, param_convention=convention)
    fitted = set(inputs.data.ids) if inputs.data is not None else set()
    for run_id, status, why in found.missing:
        why += ": no loss curve"
        if status == fitdata.FINISHED:
            why += ", and no part in Approach 1 (the envelope of training curves)"
        if run_id in fitted:
            why += f"; its final loss ({store.SUMMARY}) is still fitted"
        inputs.left_out.append((run_id, why))
    inputs.runs = store.read_runs(inputs.runs_dir)
    inputs.curves = found.curves
    inputs.settings = sweep_settings(inputs.runs_dir)


def sweep_settings(runs_dir) -> dict:
    """The settings every run shares ("common", in file order) and the keys that vary between runs."""
    configs = []
    for run_dir in store.run_dirs(runs_dir):
        path = run_dir / store.CONFIG
        try:
            cfg = parse_yaml(path.read_text(encoding="utf-8"), str(path))
        except (OSError, UnicodeDecodeError, UsageError):
            continue
        if isinstance(cfg, dict):
            configs.append(flatten(cfg))
    if not configs:
        return {"common": {}, "varying": []}
    keys = list(configs[0])
    for cfg in configs[1:]:
        keys += [k for k in cfg if k not in keys]
    common, varying = {}, []
    for k in keys:
        if len({repr(cfg.get(k)) for cfg in configs}) == 1:
            common[k] = configs[0].get(k)
        else:
            varying.append(k)
    return {"common": common, "varying": varying}
