"""Finding and loading what a report needs: the fit, its points, and the run store behind them.

    inputs = load_inputs("runs/tiny", bootstrap=1000)         # fit a run store here
    inputs = load_inputs("fits/tiny")                          # or read a fit.json (and its runs)
    inputs = load_inputs("runs/tiny", fit="fits/tiny")         # a store with an existing fit's numbers
    inputs = load_inputs(dataset="chinchilla", drop_highest_loss=5)

What comes from where:

* A run store (runs/<sweep>): its points are loaded as `scaling fit` loads them
  (`readers.from_runs`, `apply_filters`), except that a finished run lacking a number is left
  out with the reason instead of refused, and fitted once by `analysis.fit_data` (so the fit.json
  written beside the report is byte-identical to `scaling fit RUNS_DIR --bootstrap K`'s). The
  run table, every run's curve (`scaling.laws.curves.store.read_curves`) and config.yaml feed the loss
  curves, the run table and the sweep's settings.
* A fit.json (or its folder): every number is the file's and its side files': the bootstrap's
  resamples (fit.bootstrap.csv), the hold-out refit ("holdout"). Nothing is refitted or
  resampled. Its `data.provenance` names the points, drawn in the figures: a run store is looked
  for at its recorded absolute path, else as given and relative to the fit's folder and its
  parents; a packaged dataset or a table is reloaded; the file's filters are applied again, and
  the digest says whether these are still the points it was fitted to. What cannot be found is
  listed in `notes`, and the figures that need it are left out.
* A packaged dataset: fitted here; there are no training curves.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from scaling.errors import UsageError
from scaling.formats import flatten
from scaling.laws import analysis
from scaling.laws.curves.runs import read_curve_runs
from scaling.laws.curves.store import curves_from_store, read_curves
from scaling.laws.fitting import fitdata, readers, selection
from scaling.laws.results import lawfit as results
from scaling.laws.results.fit_file import FILENAME, load_fit, samples_path
from scaling.runs import store
from scaling.train.counts import COMPUTE_MEASURES
from scaling.validation.result import FILENAME as VALIDATION_FILE
from scaling.validation.result import Validation, load_validation

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
    context_curves: pd.DataFrame | None = None   # the same, context use in place of the loss (if logged)
    settings: dict | None = None              # {"common": {key: value}, "varying": [key]}
    left_out: list = field(default_factory=list)   # (what, why): runs or parts left out
    notes: list = field(default_factory=list)      # what the report cannot show, and why
    fit_command: str | None = None                 # the `scaling fit` call that gives the same fit.json
    validation: Validation | None = None           # validate.json beside the fit, where there is one


def _count(what: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
        raise UsageError(f"{what} must be a whole number >= 0; got {value!r}")
    return int(value)


def load_inputs(source: str | Path | None = None, *, dataset: str | None = None, fit: str | Path | None = None,
                bootstrap: int | None = None, seed: int = 0, drop_highest_loss: int = 0,
                param_convention: str | None = None, curves: bool = False) -> Inputs:
    """Find and load what a report needs (see the module doc). UsageError for bad inputs.

    source: a run store folder, a fit folder (holding fit.json) or a fit.json file; or None
    with `dataset`. fit: a fit.json to use with a run store instead of fitting here. bootstrap
    (default 1000, as `scaling fit`), seed, the filters and the parameter convention: the options
    of a fit made here; a fit.json records its own, and they are refused with one. curves: a run
    store's fit made here also fits the law to its training curves, as `scaling fit --curves`.
    """
    if bootstrap is not None:
        bootstrap = _count("the number of bootstrap resamples", bootstrap)
    seed = _count("the seed", seed)
    drop_highest_loss = _count("the number of highest losses to drop", drop_highest_loss)
    if (source is None) == (dataset is None):
        raise UsageError("give exactly one input: a run store, a fit folder or fit.json, or a packaged dataset")
    if dataset is not None:
        if fit is not None or param_convention is not None or curves:
            raise UsageError("an existing fit, a parameter convention and the curves apply to a run store, not to a "
                         "dataset")
        data = selection.apply_filters(readers.from_dataset(dataset), drop_highest_loss=drop_highest_loss)
        return _fit_here(dataset, f"--dataset {dataset}", data, None, bootstrap, seed)
    assert source is not None          # exactly one of source and dataset, checked above
    source = Path(source)
    if not source.exists():
        raise UsageError(f"{source} does not exist (expected a run store runs/<sweep>, a fit folder or a fit.json)")
    is_fit = _is_fit(source)
    if fit is None and not is_fit:
        return _store_here(source, bootstrap, seed, drop_highest_loss, param_convention, curves)
    given = [what for what, value in (("the filters", drop_highest_loss),
                                      ("the parameter convention", param_convention is not None),
                                      ("the number of bootstrap resamples", bootstrap is not None),
                                      ("the seed", seed), ("the curves", curves)) if value]
    if given:
        raise UsageError(f"{', '.join(given)} apply to a fit made here from a run store; a fit.json records its "
                         "own (its resamples are in fit.bootstrap.csv): refit with `scaling fit` to change them")
    if fit is None:
        return _with_validation(_from_fit_file(source))
    if is_fit:
        raise UsageError(f"an existing fit applies to a run store; {source} is a fit already")
    return _with_validation(_store_with_fit(source, fit))


def _store_here(runs_dir: Path, bootstrap: int | None, seed: int, drop_highest_loss: int,
                param_convention: str | None, curves: bool = False) -> Inputs:
    """A run store fitted here, once, as `scaling fit` fits it; its run table, curves and settings."""
    convention = param_convention or DEFAULT_CONVENTION
    data = selection.apply_filters(_store_points(runs_dir, convention), drop_highest_loss=drop_highest_loss)
    envelope = curves_from_store(runs_dir, param_convention=convention)
    flag = f" --param-convention {param_convention}" if param_convention else ""
    inputs = _fit_here(runs_dir.resolve().name, f"{runs_dir}{flag}", data, envelope, bootstrap, seed)
    if curves:      # as `scaling fit --curves` (scaling.laws.api.fit): the same fit.json
        inputs.fit = analysis.with_curves(inputs.fit, read_curve_runs(runs_dir, convention),
                                          resamples=inputs.fit.options.bootstrap, seed=seed)
        inputs.fit_command = f"{inputs.fit_command} --curves"
    inputs.runs_dir = runs_dir
    _read_store(inputs, runs_dir)
    return inputs


def _is_fit(path: Path) -> bool:
    """True for a fit.json or its folder, False for a run store; UsageError when it is neither."""
    if path.is_file() or (path / FILENAME).is_file():
        return True
    if store.run_dirs(path) or (path / store.TABLE).is_file():
        return False
    raise UsageError(f"{store.not_a_store(path)}; nor is it a fit folder (no {FILENAME})")


def _with_validation(inputs: Inputs) -> Inputs:
    """The validation beside the fit.json (`scaling validate`'s validate.json), if there is one.
    One that is there but not a regular file is refused (by the reader), not left out unsaid."""
    if inputs.fit_path is None:     # fitted here: no fit.json, nothing validated beside it
        return inputs
    path = inputs.fit_path.parent / VALIDATION_FILE
    if path.exists() or path.is_symlink():      # a link loop or to nothing is refused, not skipped
        inputs.validation = load_validation(path)
    return inputs


def _store_points(runs_dir: Path, convention: str, fit: results.LawFit | None = None) -> fitdata.FitData:
    """The store's points as `scaling fit` loads them (in `fit`'s compute measure: a fit.json from
    before the measure was recorded counted 6 N D in its own N), less the finished runs that lack a
    number."""
    measure = "exact" if fit is None else fit.law.flops.measure
    if measure not in COMPUTE_MEASURES:
        measure = f"6n_{convention}"
    return readers.from_runs(runs_dir, convention, compute_measure=measure, drop_unmeasured=True)


def _fit_here(name: str, fit_source: str, data: fitdata.FitData, curves: pd.DataFrame | None, bootstrap: int | None,
              seed: int) -> Inputs:
    """The one fit `scaling fit` makes of these points, and the command that makes it."""
    k = results.DEFAULT_BOOTSTRAP if bootstrap is None else bootstrap
    fit = analysis.fit_data(data, bootstrap=k, seed=seed, curves=curves)
    drop = data.filters.get("drop_highest_loss")
    command = (f"scaling fit {fit_source}{f' --drop-highest-loss {drop}' if drop else ''} --bootstrap {k} "
               f"--seed {seed}")
    inputs = Inputs(name=name, fit=fit, data=fit.points, fitted_here=True, fit_command=command)
    if not k:
        inputs.notes.append("no bootstrap (0 resamples): no intervals and no bootstrap distributions")
    return inputs


def _store_with_fit(runs_dir: Path, fit_path: str | Path) -> Inputs:
    """A run store's points and curves, with the numbers of an existing fit.json."""
    fit = load_fit(fit_path)
    fit_path = Path(fit_path)
    fit_file = fit_path / FILENAME if fit_path.is_dir() else fit_path
    inputs = Inputs(name=runs_dir.resolve().name, fit=fit, runs_dir=runs_dir, fit_path=fit_file)
    _use_points(inputs, _store_points(runs_dir, fit.data.param_convention or DEFAULT_CONVENTION, fit))
    _note_missing_parts(inputs, fit_file)
    return inputs


def _from_fit_file(path: Path) -> Inputs:
    """A fit.json's numbers, and its points reloaded from where its provenance says they came from."""
    fit = load_fit(path)
    fit_path = path / FILENAME if path.is_dir() else path
    inputs = Inputs(name=fit_path.parent.resolve().name, fit=fit, fit_path=fit_path)
    origin = fit.data.provenance
    if origin is None:
        inputs.notes.append(f"{fit_path} names no source its points can be reloaded from: only the law and the "
                            "numbers fit.json holds can be shown (no points, residuals or loss curves)")
    elif origin.kind == "runs":
        # The absolute path and digest a newer fit records; an older one's store as typed then.
        recorded = fit.data.store
        inputs.runs_dir = (store.recorded_store(recorded, str(fit_path)) if recorded is not None
                           else _find_runs(origin.location, fit_path))
        if inputs.runs_dir is None:
            inputs.notes.append(f"the run store of this fit ({origin.location}) was not found (looked relative to "
                                f"the current folder and to {fit_path.parent} and its parents): no points, loss "
                                "curves, run table or residuals")
        else:
            _use_points(inputs, _store_points(inputs.runs_dir, fit.data.param_convention or DEFAULT_CONVENTION, fit))
    elif origin.kind == "dataset" and origin.location in readers.DATASETS:
        _use_points(inputs, readers.from_dataset(origin.location))
    elif origin.kind == "table" and fit.data.table is not None and Path(fit.data.table["path"]).is_file():
        _use_points(inputs, readers.from_table(**fit.data.table))
    else:
        why = {"dataset": "is not a dataset packaged with this scaling",
               "table": "was not found" if fit.data.table is not None
               else "cannot be reloaded (this fit.json predates recording a table's columns)"}[origin.kind]
        inputs.notes.append(f"the points of this fit ({fit.data.source}) {why}: no points or residuals")
    _note_missing_parts(inputs, fit_path)
    return inputs


def _note_missing_parts(inputs: Inputs, fit_path: Path) -> None:
    """Say what an older or partial fit.json (`fit_path`) cannot show (the report never recomputes it)."""
    fit = inputs.fit
    if fit.options.bootstrap and fit.resampled is None:
        inputs.notes.append(f"{samples_path(fit_path).name} (the bootstrap's resamples) is not beside "
                            f"{fit_path}: no bootstrap distributions; rerun `scaling fit` to write it")
    elif not fit.options.bootstrap:
        inputs.notes.append("this fit.json has no bootstrap: no intervals and no bootstrap distributions")
    if fit.holdout is None:
        inputs.notes.append("this fit.json predates recording its hold-out check: rerun `scaling fit` for one")


def _use_points(inputs: Inputs, data: fitdata.FitData) -> None:
    """Take freshly loaded points for a read fit: its filters again, the digest, the store."""
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
            "The figures and residuals use the points found now against the fit's law; the hold-out check and "
            "the bootstrap are fit.json's. Refit (`scaling fit`) to bring the numbers up to date")
    if inputs.runs_dir is not None:
        _read_store(inputs, inputs.runs_dir)


def _find_runs(text: str, fit_path: Path) -> Path | None:
    candidate = Path(text)
    if candidate.is_dir():
        return candidate
    if not candidate.is_absolute():
        for parent in fit_path.resolve().parents:
            if (parent / candidate).is_dir():
                return parent / candidate
    return None


def _read_store(inputs: Inputs, runs_dir: Path) -> None:
    """Run table, every run's validation curve and the sweep's settings (of the store `runs_dir`); runs
    without a curve, listed."""
    convention = (inputs.data.param_convention if inputs.data is not None else None) or DEFAULT_CONVENTION
    found = read_curves(runs_dir, param_convention=convention, also=("val_context_use",))
    fitted = set(inputs.data.ids) if inputs.data is not None else set()
    for run_id, status, why in found.missing:
        why += ": no loss curve"
        if status == readers.FINISHED:
            why += ", and no part in Approach 1 (the envelope of training curves)"
        if run_id in fitted:
            why += f"; its final loss ({store.SUMMARY}) is still fitted"
        inputs.left_out.append((run_id, why))
    inputs.runs = store.read_runs(runs_dir)
    curves = found.curves
    inputs.curves = curves.drop(columns="val_context_use")
    logged = curves.dropna(subset=["val_context_use"])      # every evaluation logs it since 2026-12-05
    inputs.context_curves = logged.assign(loss=logged.val_context_use).drop(columns="val_context_use")
    inputs.settings = sweep_settings(runs_dir)


def sweep_settings(runs_dir: str | Path) -> dict:
    """The settings every run shares ("common", in file order) and the keys that vary between runs."""
    configs = []
    for run_dir in store.run_dirs(runs_dir):
        try:
            cfg = store.read_config(run_dir)
        except (OSError, UsageError):
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
