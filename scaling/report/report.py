"""The report a researcher reads instead of fit.json: figures, tables, a hold-out check.

    inputs = load_inputs("runs/tiny", bootstrap=1000)         # fit a run store here
    inputs = load_inputs("fits/tiny")                          # or read a fit.json (and its runs)
    inputs = load_inputs(dataset="chinchilla", drop_highest_loss=5)
    report = build_report(inputs)                              # figures, hold-out, the text
    paths = write_report(report, "fits/tiny/report", fmt="md") # report.md, figures/*.png|svg
    print(format_holdout(report.holdout))

`scaling report` is exactly these calls. What comes from where:

* A run store (runs/<sweep>): its points are loaded as `scaling fit` loads them
  (`fitdata.from_runs`, `apply_filters`) and fitted here with the same functions as
  `results.fit_json` (the fit.json written beside the report is byte-identical to
  `scaling fit RUNS_DIR --bootstrap K`'s); the run table, every run's metrics.jsonl and
  config.yaml feed the loss curves, the run table and the sweep's settings. `fit=` uses an
  existing fit.json for the numbers instead.
* A fit.json (or its folder): the numbers are the file's. Its `data.source` names the points;
  a run store is looked for at that path (as given, then relative to the fit's folder and its
  parents), a packaged dataset is reloaded, and the file's filters are applied again; the
  digest says whether they are still the points it was fitted to. What cannot be found is
  listed in the report, and the figures that need it are left out.
* A packaged dataset: fitted here; there are no training curves.

The bootstrap distributions are recomputed, seeded, when fit.json was read from a file (its
samples are not stored in it), with the file's resamples, seed and reference compute, so they
reproduce its intervals; the report says if they do not.

The hold-out check (`holdout`) refits the law on the points without the ones with the largest
compute (by default the top 20%), predicts those, and gives each prediction's absolute relative
error and their mean: how far the law can be trusted beyond the sweep.

Same inputs, same bytes: no timestamps, seeded resampling, sorted tables, and figures saved
without dates or random ids (`scaling.figures.save`).
"""

from __future__ import annotations

import base64
import html
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from scaling.errors import UsageError
from scaling.laws import allocation, approaches, compare, fitdata, kaplan, results
from scaling.laws import fit as fitting
from scaling.laws.law import PARAM_NAMES, Law
from scaling.laws.references import BESIROGLU, CHINCHILLA, KAPLAN
from scaling.report import figures as figs
from scaling.runs import store

DEFAULT_HOLDOUT = 0.2
PLAN_BUDGETS = (1e18, 1e21, 1e23)
FRONTIER_MAX_C = 1e24
FORMATS = ("md", "html")
MAX_POINTS_LISTED = 60       # longer point tables (a dataset) are summarised instead
FIGURE_DIR = "figures"

FIGURE_TITLES = {
    "loss_curves": "Validation loss against tokens for every run",
    "final_loss": "Final loss against N at each D and against D at each N, with the fitted law",
    "isoflop": "IsoFLOP profiles (Approach 2) and the law's optimum (Approach 3)",
    "frontiers": "Iso-loss contours of the fitted law and compute-optimal frontiers to 1e24 FLOPs",
    "residuals": "Residuals of the fit",
    "bootstrap": "Bootstrap distributions of alpha, beta, a and tokens per parameter",
}

# Value formats, as `scaling fit` prints them (results.format_summary).
FMT = {"E": ".4f", "A": ".4g", "B": ".4g", "alpha": ".4f", "beta": ".4f", "a": ".4f", "b": ".4f",
       "G": ".4g", "tokens_per_param": ".4g"}


# ============================================================================ inputs

@dataclass
class Inputs:
    """Everything the report is drawn from. Only `fit` and `law` are always there."""

    name: str
    fit: dict
    law: Law
    data: fitdata.FitData | None = None
    fitted_here: bool = False
    fit_path: Path | None = None
    runs_dir: Path | None = None
    runs: pd.DataFrame | None = None          # store.read_runs: every run, any status
    curves: pd.DataFrame | None = None        # run_id, n, tokens, loss, status: every evaluation
    settings: dict | None = None              # {"common": {key: value}, "varying": [key]}
    full: fitting.FitResult | None = None
    boot: fitting.BootstrapResult | None = None
    left_out: list = field(default_factory=list)   # (what, why): runs or parts left out
    notes: list = field(default_factory=list)      # what the report cannot show, and why
    fit_command: str | None = None                 # the `scaling fit` call that gives the same fit.json


def _check_count(flag: str, value, minimum: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise UsageError(f"{flag} must be a whole number >= {minimum}; got {value!r}")
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
        bootstrap = _check_count("--bootstrap", bootstrap)
    seed = _check_count("--seed", seed)
    drop_highest_loss = _check_count("--drop-highest-loss", drop_highest_loss)
    if (source is None) == (dataset is None):
        raise UsageError("give exactly one input: a run store or fit folder / fit.json, or --dataset NAME")
    if dataset is not None:
        if fit is not None:
            raise UsageError("--fit applies to a run store only")
        if param_convention is not None:
            raise UsageError("--param-convention applies to a run store only")
        data = fitdata.apply_filters(fitdata.from_dataset(dataset), drop_highest_loss=drop_highest_loss)
        inputs = _fit_here(dataset, data, None, bootstrap, seed)
        inputs.fit_command = _fit_command(f"--dataset {dataset}", inputs.fit, drop_highest_loss)
        return inputs

    source = Path(source)
    if not source.exists():
        raise UsageError(f"{source} does not exist (expected a run store runs/<sweep>, a fit folder "
                         "or a fit.json)")
    kind = _kind(source)
    if kind == "fit":
        for flag, value in (("--fit", fit), ("--param-convention", param_convention)):
            if value is not None:
                raise UsageError(f"{flag} applies to a run store, not to a fit.json")
        if drop_highest_loss:
            raise UsageError("--drop-highest-loss applies to a fit made here; this fit.json records its own filters")
        return _from_fit_file(source, bootstrap)

    # A run store.
    runs_dir = source
    name = runs_dir.resolve().name
    if fit is not None:
        if drop_highest_loss or param_convention is not None:
            raise UsageError("--drop-highest-loss and --param-convention apply to a fit made here, not with --fit")
        law, fit_dict = results.load_fit(fit)
        fit_path = Path(fit)
        inputs = Inputs(name=name, fit=fit_dict, law=law, fit_path=fit_path / results.FILENAME
                        if fit_path.is_dir() else fit_path)
        inputs.runs_dir = runs_dir
        convention = (fit_dict.get("data") or {}).get("param_convention") or "non_embedding"
        data = _store_points(runs_dir, convention, inputs.left_out)
        data = _refilter(data, (fit_dict.get("data") or {}).get("filters"))
        inputs.data = data
        _check_digest(inputs)
        _read_store(inputs)
        _bootstrap_again(inputs, bootstrap)
        return inputs
    left_out: list = []
    data = _store_points(runs_dir, param_convention or "non_embedding", left_out)
    data = fitdata.apply_filters(data, drop_highest_loss=drop_highest_loss)
    curves = approaches.curves_from_store(runs_dir, param_convention=data.param_convention)
    inputs = _fit_here(name, data, curves, bootstrap, seed)
    inputs.fit_command = _fit_command(str(runs_dir) + (f" --param-convention {param_convention}"
                                                       if param_convention else ""), inputs.fit, drop_highest_loss)
    inputs.runs_dir = runs_dir
    inputs.left_out[:0] = left_out
    _read_store(inputs)
    return inputs


def _fit_command(source: str, fit: dict, drop_highest_loss: int) -> str:
    drop = f" --drop-highest-loss {drop_highest_loss}" if drop_highest_loss else ""
    return (f"scaling fit {source}{drop} --bootstrap {fit['options']['bootstrap']} --seed {fit['seed']}")


def _kind(path: Path) -> str:
    """'fit' or 'runs', from what the path holds; UsageError when it is neither."""
    if path.is_file():
        return "fit"
    if (path / results.FILENAME).is_file():
        return "fit"
    if store.run_dirs(path) or (path / store.TABLE).is_file():
        return "runs"
    raise UsageError(f"{path} is neither a run store (no <run-id>/{store.CONFIG} or {store.TABLE}) nor a "
                     f"fit folder (no {results.FILENAME})")


def _fit_here(name: str, data: fitdata.FitData, curves, bootstrap: int | None, seed: int) -> Inputs:
    """Fit as `results.fit_json` does, keeping the fit and bootstrap results it does not return."""
    k = results.DEFAULT_BOOTSTRAP if bootstrap is None else bootstrap
    fitdata.check_fittable(data)
    reference_compute = float(data.compute.max())
    result = fitting.fit_law(data.n, data.d, data.loss)
    boot = None
    if k:
        boot = fitting.bootstrap(data.n, data.d, data.loss, n_resamples=k, seed=seed,
                                 reference_compute=reference_compute, full_fit=result)
    fit = results.fit_to_json(data, result, boot, seed=seed, reference_compute=reference_compute)
    fit["approaches"] = results.allocation_approaches(data, fit, curves)
    fit["kaplan"] = results._jsonable(kaplan.fit_kaplan(
        data.n, data.d, data.loss, param_convention=data.param_convention or "unknown").to_dict())
    inputs = Inputs(name=name, fit=fit, law=result.law, data=data, fitted_here=True, full=result, boot=boot)
    if not k:
        inputs.notes.append("no bootstrap (--bootstrap 0): no intervals and no bootstrap distributions")
    return inputs


def _store_points(runs_dir: Path, convention: str, left_out: list) -> fitdata.FitData:
    """The store's points as `scaling fit` loads them; where a finished run lacks a number the
    fit needs (which `scaling fit` refuses), that run is left out here with the reason."""
    try:
        return fitdata.from_runs(runs_dir, convention)
    except UsageError as exc:
        if "finished run(s) have no positive, finite" not in str(exc):
            raise
    table = store.read_runs(runs_dir)
    column = fitdata.RUN_COLUMNS[convention]
    dropped, keep = [], []
    for i, row in table.iterrows():
        status = row["status"] if isinstance(row["status"], str) else "unknown"
        if status != fitdata.FINISHED:
            reason = row["reason"] if isinstance(row["reason"], str) and row["reason"] else "no reason recorded"
            dropped.append(fitdata.Dropped(str(row["run_id"]), f"{status}: {reason}"))
            continue
        bad = [col for col in (column, "tokens", "final_val_loss")
               if not _positive(row[col])]
        if bad:
            why = f"finished, but {store.SUMMARY} has no positive, finite {', '.join(bad)}"
            dropped.append(fitdata.Dropped(str(row["run_id"]), why))
        else:
            keep.append(i)
    rows = table.loc[keep]
    if rows.empty:
        raise UsageError(f"{runs_dir}: no finished run has the numbers a fit needs; nothing to report")
    return fitdata.FitData(
        n=rows[column].astype(float).to_numpy(), d=rows["tokens"].astype(float).to_numpy(),
        loss=rows["final_val_loss"].astype(float).to_numpy(), source=f"runs {runs_dir}",
        ids=tuple(str(r) for r in rows["run_id"]), dropped=tuple(dropped), param_convention=convention)


def _positive(value) -> bool:
    try:
        v = float(value)
    except (TypeError, ValueError):
        return False
    return math.isfinite(v) and v > 0


def _refilter(data: fitdata.FitData, filters: dict | None) -> fitdata.FitData:
    """Apply a fit.json's recorded filters to freshly loaded points."""
    if not filters:
        return data
    return fitdata.apply_filters(data, drop_highest_loss=int(filters.get("drop_highest_loss") or 0),
                                 min_tokens_per_param=filters.get("min_tokens_per_param"),
                                 min_tokens=filters.get("min_tokens"))


def _from_fit_file(path: Path, bootstrap: int | None) -> Inputs:
    law, fit = results.load_fit(path)
    fit_path = path / results.FILENAME if path.is_dir() else path
    name = fit_path.parent.resolve().name
    inputs = Inputs(name=name, fit=fit, law=law, fit_path=fit_path)
    meta = fit.get("data") or {}
    source = meta.get("source")
    if not source:
        inputs.notes.append(f"{fit_path} names no data source: only the law itself can be shown "
                            "(no points, residuals, hold-out check or bootstrap distributions)")
        return inputs
    data = None
    if source.startswith("runs "):
        runs_dir = _find_runs(source[len("runs "):], fit_path)
        if runs_dir is None:
            inputs.notes.append(f"the run store of this fit ({source[len('runs '):]}) was not found (looked "
                                f"relative to the current folder and to {fit_path.parent} and its parents): "
                                "no points, loss curves, run table, residuals, hold-out check or "
                                "bootstrap distributions")
            return inputs
        inputs.runs_dir = runs_dir
        data = _store_points(runs_dir, meta.get("param_convention") or "non_embedding", inputs.left_out)
    elif source.startswith("dataset "):
        name_ = source[len("dataset "):].split(":", 1)[0].strip()
        if name_ not in fitdata.DATASETS:
            inputs.notes.append(f"unknown packaged dataset {name_!r}: only the law can be shown")
            return inputs
        data = fitdata.from_dataset(name_)
    else:
        inputs.notes.append(f"the points of this fit ({source}) cannot be reloaded (fit.json does not record "
                            "a table's columns): no points, residuals, hold-out check or bootstrap "
                            "distributions; report the run store or dataset itself for those")
        return inputs
    inputs.data = _refilter(data, meta.get("filters"))
    _check_digest(inputs)
    if inputs.runs_dir is not None:
        _read_store(inputs)
    _bootstrap_again(inputs, bootstrap)
    return inputs


def _find_runs(text: str, fit_path: Path) -> Path | None:
    candidate = Path(text)
    if candidate.is_dir():
        return candidate
    if not candidate.is_absolute():
        for parent in fit_path.resolve().parents:
            if (parent / candidate).is_dir():
                return parent / candidate
    return None


def _check_digest(inputs: Inputs) -> None:
    meta = inputs.fit.get("data") or {}
    digest = meta.get("digest")
    if digest and inputs.data is not None and digest != inputs.data.digest:
        inputs.notes.append(
            f"the points found now ({len(inputs.data)}) are not the ones this fit.json was fitted to "
            f"({meta.get('n_points')}; the sha256 digests differ): runs were added, removed or changed since. "
            "The figures, residuals and hold-out check use the points found now against the fit's law; "
            "refit (`scaling fit`) to bring the numbers up to date")


def _bootstrap_again(inputs: Inputs, bootstrap: int | None) -> None:
    """Refit the full data and redo the seeded bootstrap of a fit read from a file."""
    fit, data = inputs.fit, inputs.data
    options = fit.get("options") or {}
    k = int(options.get("bootstrap") or 0) if bootstrap is None else bootstrap
    if data is None:
        return
    if len(data) < 5:
        inputs.notes.append(f"only {len(data)} points: too few to refit, so no bootstrap distributions")
        return
    delta = float(options.get("delta") or fitting.DEFAULT_DELTA)
    fixed_E = options.get("fixed_E")
    try:
        fitdata.check_fittable(data, fixed_E)
        inputs.full = fitting.fit_law(data.n, data.d, data.loss, delta=delta, fixed_E=fixed_E)
    except UsageError as exc:
        inputs.notes.append(f"the points cannot be refitted ({exc}): no bootstrap distributions")
        return
    if options.get("grid") not in (None, "hoffmann"):
        inputs.notes.append("this fit used a custom start grid; the refit here (for the bootstrap and the "
                            "hold-out check) uses Hoffmann's grid")
    if not k:
        inputs.notes.append("this fit.json has no bootstrap (and --bootstrap was not given): no bootstrap "
                            "distributions")
        return
    reference = float(fit.get("reference_compute") or data.compute.max())
    seed = int(fit.get("seed") or 0)
    inputs.boot = fitting.bootstrap(data.n, data.d, data.loss, n_resamples=k, seed=seed, delta=delta,
                                    fixed_E=fixed_E, reference_compute=reference, full_fit=inputs.full)
    ci = fit.get("ci") or {}
    if ci and ci.get("n_resamples") == k:
        worst = 0.0
        for key, (lo, hi) in inputs.boot.intervals.items():
            mine = ci.get(key)
            if not mine or None in mine:
                continue
            for x, y in zip((lo, hi), mine):
                worst = max(worst, abs(x - y) / max(abs(y), 1e-300))
        if worst > 1e-6:
            inputs.notes.append(f"the bootstrap redone here differs from fit.json's intervals (largest relative "
                                f"difference {worst:.2g}; another machine or library version?): the "
                                "histograms are this run's, the intervals quoted are fit.json's")
    elif ci:
        inputs.notes.append(f"the bootstrap distributions are from {k} resamples (--bootstrap), not the "
                            f"{ci.get('n_resamples')} behind fit.json's intervals, which are the ones quoted")


def _read_store(inputs: Inputs) -> None:
    """Run table, every run's validation curve and the sweep's settings; what is missing, listed."""
    runs_dir = inputs.runs_dir
    inputs.runs = store.read_runs(runs_dir)
    convention = (inputs.data.param_convention if inputs.data is not None else None) or "non_embedding"
    column = fitdata.RUN_COLUMNS[convention]
    rows = []
    for run_dir in store.run_dirs(runs_dir):
        summary = store.read_summary(run_dir) or {}
        run_id = summary.get("run_id", run_dir.name)
        status = summary.get("status", "incomplete")
        path = run_dir / store.METRICS
        n = summary.get(column)
        if n is None:
            n = _n_from_config(run_dir, column)
        if not path.exists():
            if status == "finished":
                why = (f"no {store.METRICS}: no loss curve, and no part in Approach 1 (the envelope of "
                       "training curves); its final loss (summary.json) is still fitted")
            else:
                why = f"no {store.METRICS}: no loss curve"
            inputs.left_out.append((run_id, why))
            continue
        if n is None:
            inputs.left_out.append((run_id, f"no parameter count in {store.SUMMARY} or {store.CONFIG}: no loss curve"))
            continue
        found = 0
        for rec in store.read_jsonl(path):
            if rec.get("tokens") is None or rec.get("val_loss") is None:
                continue
            rows.append({"run_id": run_id, "n": float(n), "tokens": float(rec["tokens"]),
                         "loss": float(rec["val_loss"]), "status": status})
            found += 1
        if not found:
            inputs.left_out.append((run_id, f"{store.METRICS} has no validation loss: no loss curve"))
    inputs.curves = pd.DataFrame(rows, columns=["run_id", "n", "tokens", "loss", "status"])
    inputs.settings = sweep_settings(runs_dir)


def _n_from_config(run_dir: Path, column: str):
    try:
        cfg = yaml.safe_load((run_dir / store.CONFIG).read_text()) or {}
    except (OSError, yaml.YAMLError):
        return None
    return cfg.get(column)


def _flatten(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(_flatten(v, key + "."))
        else:
            out[key] = v
    return out


def sweep_settings(runs_dir) -> dict:
    """The settings every run shares ("common", in file order) and the keys that vary between runs."""
    configs = []
    for run_dir in store.run_dirs(runs_dir):
        try:
            cfg = yaml.safe_load((run_dir / store.CONFIG).read_text())
        except (OSError, yaml.YAMLError):
            continue
        if isinstance(cfg, dict):
            configs.append(_flatten(cfg))
    if not configs:
        return {"common": {}, "varying": []}
    keys = list(configs[0])
    for cfg in configs[1:]:
        keys += [k for k in cfg if k not in keys]
    common, varying = {}, []
    for k in keys:
        values = [repr(cfg.get(k)) for cfg in configs]
        if len(set(values)) == 1:
            common[k] = configs[0].get(k)
        else:
            varying.append(k)
    return {"common": common, "varying": varying}


# ============================================================================ analyses

@dataclass(frozen=True)
class HoldoutRow:
    id: str
    n: float
    d: float
    compute: float
    loss: float
    predicted: float            # by the law refitted without the held-out points
    abs_rel_error: float
    full_predicted: float       # by the full fit, which saw these points


@dataclass(frozen=True)
class Holdout:
    fraction: float
    n_points: int
    n_train: int
    rows: tuple = ()
    mean_abs_rel_error: float | None = None
    full_mean_abs_rel_error: float | None = None
    train_max_compute: float | None = None
    law: Law | None = None
    reason: str | None = None

    def to_dict(self) -> dict:
        return {"fraction": self.fraction, "n_points": self.n_points, "n_train": self.n_train,
                "mean_abs_rel_error": self.mean_abs_rel_error,
                "full_mean_abs_rel_error": self.full_mean_abs_rel_error,
                "train_max_compute": self.train_max_compute, "reason": self.reason,
                "law": None if self.law is None else self.law.to_dict(),
                "rows": [r.__dict__ for r in self.rows]}


def holdout_split(compute, fraction: float = DEFAULT_HOLDOUT) -> tuple[np.ndarray, np.ndarray]:
    """(train indices, held-out indices): the round(fraction * M) points (at least 1) with the
    largest compute are held out; ties go to the later point. Both in ascending index order."""
    c = np.asarray(compute, dtype=float)
    m = c.size
    k = max(1, int(round(fraction * m)))
    order = np.lexsort((-np.arange(m), -c))      # largest C first; among equal C, later index first
    held = np.sort(order[:k])
    train = np.sort(order[k:])
    return train, held


def holdout(data: fitdata.FitData, law: Law, *, fraction: float = DEFAULT_HOLDOUT,
            delta: float = fitting.DEFAULT_DELTA, fixed_E: float | None = None) -> Holdout:
    """Refit without the top-compute points; predict them; absolute relative error of each.

    The refit is the same Approach-3 fit (Hoffmann's 4,500 starts, Huber `delta`, `fixed_E`).
    `law` is the full fit, whose (in-sample) errors on the same points are given beside.
    """
    if not (isinstance(fraction, (int, float)) and 0 < fraction < 1):
        raise UsageError(f"--holdout-fraction must be between 0 and 1 (exclusive); got {fraction!r}")
    m = len(data)
    train, held = holdout_split(data.compute, fraction)
    common = dict(fraction=float(fraction), n_points=m, n_train=int(train.size))
    sub = fitdata.FitData(n=data.n[train], d=data.d[train], loss=data.loss[train], source=data.source,
                          ids=tuple(data.ids[i] for i in train), param_convention=data.param_convention)
    try:
        fitdata.check_fittable(sub, fixed_E)
    except UsageError as exc:
        return Holdout(**common, reason=f"too few points are left to refit without the top {held.size}: {exc}")
    refit = fitting.fit_law(sub.n, sub.d, sub.loss, delta=delta, fixed_E=fixed_E).law
    pred = refit.loss(data.n[held], data.d[held])
    full = law.loss(data.n[held], data.d[held])
    obs = data.loss[held]
    err = np.abs(pred - obs) / obs
    full_err = np.abs(full - obs) / obs
    order = np.lexsort((held, data.compute[held]))
    rows = tuple(HoldoutRow(str(data.ids[held[j]]), float(data.n[held[j]]), float(data.d[held[j]]),
                            float(data.compute[held[j]]), float(obs[j]), float(pred[j]), float(err[j]),
                            float(full[j])) for j in order)
    return Holdout(**common, rows=rows, mean_abs_rel_error=float(err.mean()),
                   full_mean_abs_rel_error=float(full_err.mean()),
                   train_max_compute=float(data.compute[train].max()), law=refit)


def isoflop_profiles(data: fitdata.FitData) -> tuple[approaches.IsoFLOPResult, list[figs.Profile]]:
    """Approach 2 on the points (as fit.json's approach_2), with each budget's runs and parabola.

    The grouping is `approaches.isoflop`'s default, redone here to know which runs made each budget.
    """
    res = approaches.isoflop(data.n, data.d, data.loss)
    c = data.compute
    if res.grouping.startswith("exact budgets"):
        labels = approaches.group_by_exact_budget(c, 1e-3)
    else:
        per = float(re.search(r"([0-9.]+) per decade", res.grouping).group(1))
        labels = np.floor(np.log10(c) * per + 1e-9).astype(int)
    groups = [np.flatnonzero(labels == k) for k in np.unique(labels)]
    groups.sort(key=lambda idx: float(np.exp(np.log(c[idx]).mean())))
    profiles = []
    for budget, idx in zip(res.budgets, groups):
        n, loss = data.n[idx], data.loss[idx]
        parabola = None
        if budget.usable:
            centre = float(np.log(n).mean())
            p2, p1, p0 = np.polyfit(np.log(n) - centre, loss, 2)
            parabola = (centre, float(p2), float(p1), float(p0))
        order = np.argsort(n, kind="stable")
        profiles.append(figs.Profile(compute=budget.compute, n=n[order], loss=loss[order], status=budget.status,
                                     parabola=parabola, n_opt=budget.n_opt, loss_opt=budget.loss_opt))
    return res, profiles


def log_residuals(data: fitdata.FitData, law: Law) -> np.ndarray:
    """ln L_observed - ln L_fitted for each point."""
    return np.log(data.loss) - np.log(law.loss(data.n, data.d))


# ============================================================================ the document

class Doc:
    """A few block types, rendered to Markdown or to self-contained HTML."""

    def __init__(self):
        self.blocks: list[tuple] = []

    def h(self, level: int, text: str):
        self.blocks.append(("h", level, text))

    def p(self, text: str):
        self.blocks.append(("p", text))

    def ul(self, items):
        items = list(items)
        if items:
            self.blocks.append(("ul", items))

    def table(self, header, rows, align=None):
        align = align or ["l"] + ["r"] * (len(header) - 1)
        self.blocks.append(("table", list(header), [list(r) for r in rows], align))

    def figure(self, name: str, number: int, caption: str):
        self.blocks.append(("fig", name, number, caption))

    def pre(self, text: str):
        self.blocks.append(("pre", text))

    def markdown(self) -> str:
        out = []
        for block in self.blocks:
            kind = block[0]
            if kind == "h":
                out.append("#" * block[1] + " " + block[2])
            elif kind == "p":
                out.append(block[1])
            elif kind == "ul":
                out.append("\n".join(f"- {item}" for item in block[1]))
            elif kind == "table":
                _, header, rows, align = block
                cell = lambda s: str(s).replace("|", "\\|")  # noqa: E731
                lines = ["| " + " | ".join(cell(h) for h in header) + " |",
                         "|" + "|".join("---:" if a == "r" else ":---" for a in align) + "|"]
                lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
                out.append("\n".join(lines))
            elif kind == "fig":
                _, name, number, caption = block
                out.append(f"![Figure {number}: {FIGURE_TITLES[name]}]({FIGURE_DIR}/{name}.png)\n\n"
                           f"*Figure {number}. {caption}* ([SVG]({FIGURE_DIR}/{name}.svg))")
            elif kind == "pre":
                out.append("```\n" + block[1] + "\n```")
        return "\n\n".join(out) + "\n"

    def html(self, title: str, images: dict) -> str:
        body = []
        for block in self.blocks:
            kind = block[0]
            if kind == "h":
                body.append(f"<h{block[1]}>{_inline(block[2])}</h{block[1]}>")
            elif kind == "p":
                body.append(f"<p>{_inline(block[1])}</p>")
            elif kind == "ul":
                body.append("<ul>\n" + "\n".join(f"<li>{_inline(i)}</li>" for i in block[1]) + "\n</ul>")
            elif kind == "table":
                _, header, rows, align = block
                style = lambda a: ' class="num"' if a == "r" else ""  # noqa: E731
                head = "".join(f"<th{style(a)}>{_inline(str(h))}</th>" for h, a in zip(header, align))
                trs = "\n".join("<tr>" + "".join(f"<td{style(a)}>{_inline(str(c))}</td>"
                                                 for c, a in zip(row, align)) + "</tr>" for row in rows)
                body.append(f"<table>\n<thead><tr>{head}</tr></thead>\n<tbody>\n{trs}\n</tbody>\n</table>")
            elif kind == "fig":
                _, name, number, caption = block
                data = base64.b64encode(images[name]).decode("ascii")
                body.append(f'<figure id="{name}"><img alt="Figure {number}: {html.escape(FIGURE_TITLES[name])}" '
                            f'src="data:image/png;base64,{data}">\n'
                            f"<figcaption>Figure {number}. {_inline(caption)}</figcaption></figure>")
            elif kind == "pre":
                body.append(f"<pre>{html.escape(block[1])}</pre>")
        return (f"<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
                f"<title>{html.escape(title)}</title>\n<style>\n{_CSS}</style>\n</head>\n<body>\n"
                + "\n".join(body) + "\n</body>\n</html>\n")


_CSS = """body { font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; max-width: 1100px;
  margin: 2em auto; padding: 0 1em; line-height: 1.45; color: #222; }
table { border-collapse: collapse; margin: 0.8em 0; font-size: 0.92em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; }
th { background: #f3f3f3; } td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
figure { margin: 1.2em 0; } figure img { max-width: 100%; height: auto; border: 1px solid #eee; }
figcaption { font-style: italic; font-size: 0.92em; color: #444; }
code, pre { background: #f6f6f6; font-family: Menlo, Consolas, monospace; font-size: 0.9em; }
pre { padding: 0.6em; overflow-x: auto; }
"""


def _inline(text: str) -> str:
    """Escape for HTML, then `code` and **bold** as in the Markdown."""
    s = html.escape(text, quote=False)
    s = re.sub(r"`([^`]+)`", r"<code>\1</code>", s)
    return re.sub(r"\*\*([^*]+)\*\*", r"<strong>\1</strong>", s)


# ============================================================================ building

@dataclass
class Report:
    inputs: Inputs
    doc: Doc
    figures: dict                  # name -> matplotlib Figure
    holdout: Holdout | None
    title: str
    missing_figures: dict = field(default_factory=dict)   # name -> why it is not drawn
    left_out: list = field(default_factory=list)          # (run or point, why), one row each


def _fmt(value, f: str) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    return format(value, f)


def _interval(ci, key, f):
    iv = (ci or {}).get(key)
    if not iv or None in iv:
        return "-"
    return f"[{format(iv[0], f)}, {format(iv[1], f)}]"


def _pct(x) -> str:
    return "-" if x is None else f"{100 * x:.2f}%"


def _n_label(convention: str | None) -> str:
    return {"non_embedding": "non-embedding parameters", "total": "total parameters"}.get(convention, "parameters")


def build_report(inputs: Inputs, *, holdout_fraction: float = DEFAULT_HOLDOUT) -> Report:
    """Analyses, figures and the document (nothing is written; see `write_report`)."""
    fit, law, data = inputs.fit, inputs.law, inputs.data
    meta = fit.get("data") or {}
    options = fit.get("options") or {}
    convention = meta.get("param_convention") or (data.param_convention if data is not None else None)
    n_label = _n_label(convention)
    title = f"Scaling-law report: {inputs.name}"
    doc = Doc()
    figures, missing = {}, {}

    # Colours: every model size of the store (or of the points), once, for all figures.
    all_n = []
    if inputs.curves is not None and len(inputs.curves):
        all_n += list(inputs.curves.n)
    if data is not None:
        all_n += list(data.n)
    colours = figs.SizeColours(all_n, f"N ({n_label})")

    ho = None
    if data is not None:
        ho = holdout(data, law, fraction=holdout_fraction, delta=float(options.get("delta") or fitting.DEFAULT_DELTA),
                     fixed_E=options.get("fixed_E"))

    # ---------------------------------------------------------------- title and summary
    doc.h(1, title)
    doc.p(_source_line(inputs))
    doc.p(f"The fitted law: **L(N, D) = {law.E:.4g} + {law.A:.4g} / N^{law.alpha:.4f} + {law.B:.4g} / D^{law.beta:.4f}**, "
          f"with N in {n_label} and D in training tokens; L in nats per token.")
    doc.ul(_at_a_glance(fit, law, ho))

    number = iter(range(1, 10))

    # ---------------------------------------------------------------- left out
    left = [(str(d.get("id")), d.get("reason", "")) for d in meta.get("dropped") or []]
    fitted_ids = set(map(str, data.ids)) if data is not None else set()
    left += [(str(what), why) for what, why in inputs.left_out]
    if left or inputs.notes:
        doc.h(2, "What was left out, and why")
        if left:
            doc.table(["run / point", "why"], _merge(left), align=["l", "l"])
        doc.ul(inputs.notes)

    # ---------------------------------------------------------------- the sweep
    doc.h(2, "The sweep" if inputs.runs_dir is not None else "The data")
    if inputs.settings is not None:
        doc.ul(_settings_lines(inputs))
    elif data is not None:
        doc.p(f"Points: {meta.get('source', data.source)}.")
    if inputs.runs is not None:
        doc.p(f"{len(inputs.runs)} runs in the store, {len(fitted_ids)} fitted. "
              "N_ne: non-embedding parameters; N: total; C = 6 N_ne D (the store's flops_6nd); "
              "loss: final validation loss in nats/token; bpb: bits per byte.")
        held = {r.id for r in ho.rows} if ho is not None else set()
        doc.table(["run", "status", "N_ne", "N", "D (tokens)", "C (FLOPs)", "lr", "loss", "bpb", "epochs",
                   "wall (s)", "in the fit"], _run_rows(inputs.runs, fitted_ids, held),
                  align=["l", "l"] + ["r"] * 9 + ["l"])
    elif data is not None:
        doc.p(_points_summary(data))
        if len(data) <= MAX_POINTS_LISTED:
            doc.table(["point", "N", "D (tokens)", "C (FLOPs)", "loss"],
                      [(str(i), f"{n:.4g}", f"{d:.4g}", f"{6 * n * d:.4g}", f"{l:.4f}")
                       for i, n, d, l in zip(data.ids, data.n, data.d, data.loss)])
    if inputs.curves is not None and len(inputs.curves):
        k = next(number)
        figures["loss_curves"] = figs.loss_curves(inputs.curves, colours, n_label=n_label)
        doc.figure("loss_curves", k, "Validation loss against tokens seen for every run (log tokens). One "
                   "colour per model size, the same in every figure; each run's line ends at its own "
                   "budget, at the dot (its final loss). Runs that did not finish are dashed and end in a cross.")
    else:
        missing["loss_curves"] = ("no training curves: a packaged dataset or table has only final losses"
                                  if inputs.runs_dir is None else "no run has a validation curve")

    # ---------------------------------------------------------------- the fit
    doc.h(2, "The fitted law")
    ci = fit.get("ci")
    level = (ci or {}).get("level", 0.95)
    doc.p(f"Approach 3 of Hoffmann et al.: Huber loss (delta {options.get('delta', fitting.DEFAULT_DELTA):g}) on "
          f"log residuals, L-BFGS from {options.get('n_starts', 4500)} starts; "
          + (f"{100 * level:g}% percentile intervals from {ci['n_resamples']} bootstrap resamples (seed "
             f"{fit.get('seed', 0)})." if ci else "no bootstrap, so no intervals."))
    rows = [(name, _fmt(fit["params"].get(name), FMT[name]), _interval(ci, name, FMT[name])) for name in PARAM_NAMES]
    alloc = fit.get("allocation") or {}
    rows += [(name, _fmt(alloc.get(name), FMT[name]), _interval(ci, name, FMT[name])) for name in ("a", "b", "G")]
    ref_c = fit.get("reference_compute")
    if ref_c is not None:
        rows.append((f"tokens_per_param at C = {ref_c:.3g}", _fmt(fit.get("tokens_per_param_at_reference"), FMT["tokens_per_param"]),
                     _interval(ci, "tokens_per_param", FMT["tokens_per_param"])))
    doc.table(["constant", "value", f"{100 * level:g}% interval"], rows)
    if fit.get("residual_rms") is not None:
        doc.p(f"Residual RMS {fit['residual_rms']:.4g} in log loss; {fit.get('n_starts_at_optimum')} of "
              f"{options.get('n_starts')} starts ended at the optimum. a = beta/(alpha+beta) is the exponent "
              "of N_opt ~ C^a, b = alpha/(alpha+beta) that of D_opt ~ C^b.")
    if data is not None:
        k = next(number)
        figures["final_loss"] = figs.final_loss(data.n, data.d, data.loss, law, colours, n_label=n_label)
        grid = np.unique(data.d).size <= 8 and np.unique(data.n).size <= 8
        doc.figure("final_loss", k, "Final loss of the fitted runs against model size at each token budget "
                   "(left) and against tokens at each model size (right), with the fitted law's curves "
                   + ("in the same colours." if grid else "at five representative values (the points scatter "
                      "over many values of N and D; the colour bars match points to curves)."))
        resid = log_residuals(data, law)
        k = next(number)
        figures["residuals"] = figs.residuals(data.n, data.compute, resid, colours, n_label=n_label)
        worst = int(np.argmax(np.abs(resid)))
        doc.figure("residuals", k, f"Residuals ln L_observed - ln L_fitted against compute and model size (RMS "
                   f"{np.sqrt(np.mean(resid ** 2)):.3g}; largest {resid[worst]:+.3g} at {data.ids[worst]}). A trend "
                   "with compute or size means the law's form misses something there; scatter without trend is noise.")
    else:
        for name in ("final_loss", "residuals"):
            missing[name] = "no points to draw (see above)"
    if inputs.boot is not None:
        k = next(number)
        boot = inputs.boot
        estimates = {"alpha": law.alpha, "beta": law.beta, "a": law.a,
                     "tokens_per_param": fit.get("tokens_per_param_at_reference")}
        intervals = {key: (ci or {}).get(key) for key in ("alpha", "beta", "a", "tokens_per_param")}
        refs = {"chinchilla": {"alpha": CHINCHILLA.law.alpha, "beta": CHINCHILLA.law.beta, "a": CHINCHILLA.law.a},
                "besiroglu": {"alpha": BESIROGLU.law.alpha, "beta": BESIROGLU.law.beta, "a": BESIROGLU.law.a},
                "kaplan": {"a": KAPLAN.a["kaplan"]}}
        figures["bootstrap"] = figs.bootstrap_distributions(
            boot.samples, estimates, intervals, references=refs, reference_compute=boot.reference_compute,
            n_resamples=boot.n_resamples, level=boot.level)
        doc.figure("bootstrap", k, f"Bootstrap distributions over {boot.n_resamples} resamples of the points "
                   f"(seed {boot.seed}), each refitted: alpha, beta, a and tokens per parameter at C = "
                   f"{boot.reference_compute:.3g} FLOPs. Solid black: the full fit; dashed: the "
                   f"{100 * level:g}% interval; coloured lines: published values (E, A, B and tokens per "
                   "parameter depend on the setup and are not compared).")
    else:
        missing["bootstrap"] = "no bootstrap resamples (see above)"

    # ---------------------------------------------------------------- hold-out
    doc.h(2, "Hold-out check: does the law predict runs it has not seen?")
    if ho is None:
        doc.p("Not possible without the points (see above).")
    else:
        doc.p(_holdout_intro(ho))
        if ho.reason:
            doc.p(ho.reason)
        else:
            doc.table(["held-out run", "N", "D (tokens)", "C (FLOPs)", "observed loss", "predicted",
                       "abs rel error", "full fit's error"],
                      [(r.id, f"{r.n:.4g}", f"{r.d:.4g}", f"{r.compute:.4g}", f"{r.loss:.4f}", f"{r.predicted:.4f}",
                        _pct(r.abs_rel_error), _pct(abs(r.full_predicted - r.loss) / r.loss)) for r in ho.rows])
            doc.p(f"**Mean absolute relative error of the held-out predictions: {_pct(ho.mean_abs_rel_error)}** "
                  f"(the full fit, which saw these runs: {_pct(ho.full_mean_abs_rel_error)}). The refit without them: "
                  f"alpha = {ho.law.alpha:.4f}, beta = {ho.law.beta:.4f}, a = {ho.law.a:.4f} (full fit: "
                  f"{law.alpha:.4f}, {law.beta:.4f}, {law.a:.4f}).")

    # ---------------------------------------------------------------- approaches
    doc.h(2, "Three estimates of the allocation exponent a")
    apps = fit.get("approaches") or {}
    rows = []
    published = {"approach_1": CHINCHILLA.a["approach_1"], "approach_2": CHINCHILLA.a["approach_2"],
                 "approach_3": CHINCHILLA.a["approach_3"]}
    for key in ("approach_1", "approach_2", "approach_3"):
        e = apps.get(key)
        name = compare.APPROACH_NAMES[key]
        if e is None:
            why = "needs training curves (a run store)" if key == "approach_1" else "not in this fit.json"
            rows.append((name, "-", "-", "-", f"{published[key]:.2f}", why))
            continue
        iv = e.get("a_ci")
        rows.append((name, _fmt(e.get("a"), ".4f"), "-" if not iv or None in iv else f"[{iv[0]:.4f}, {iv[1]:.4f}]",
                     _fmt(e.get("b"), ".4f"), f"{published[key]:.2f}", _approach_note(e)))
    doc.table(["approach", "a", "interval", "b", "Hoffmann et al.", "notes"], rows,
              align=["l", "r", "r", "r", "r", "l"])
    if apps:
        _, warnings = compare.compare_approaches(apps, law, ci)
        doc.ul(f"warning: {w}" for w in warnings)
    if data is not None:
        iso, profiles = isoflop_profiles(data)
        a2 = None if iso.n_fit is None else (iso.n_fit.coefficient, iso.n_fit.exponent)
        frontier = None
        if inputs.curves is not None and len(inputs.curves):
            cur = inputs.curves[(inputs.curves.status == "finished") & inputs.curves.run_id.isin(list(fitted_ids))]
            env = approaches.envelope(cur)
            if len(env.frontier):
                frontier = (env.frontier.compute.to_numpy(float), env.frontier.n.to_numpy(float))
        doc.p(f"Approach 2 budgets ({iso.grouping}): a budget is used when at least 3 model sizes sampled it and "
              "its parabola in ln N has a minimum inside the sampled sizes.")
        doc.table(["budget C (FLOPs)", "runs", "sizes", "N sampled", "status", "N_opt (parabola)",
                   "N_opt (law)"],
                  [(f"{b.compute:.3g}", b.n_runs, b.n_sizes, f"{b.n_range[0]:.3g} - {b.n_range[1]:.3g}", b.status,
                    _fmt(b.n_opt, ".3g"), f"{float(law.n_opt(b.compute)):.3g}") for b in iso.budgets],
                  align=["r", "r", "r", "r", "l", "r", "r"])
        k = next(number)
        figures["isoflop"] = figs.isoflop(profiles, law, a2=a2, frontier=frontier,
                                          data_c_range=(float(data.compute.min()), float(data.compute.max())),
                                          n_label=n_label)
        doc.figure("isoflop", k, "Left: final loss against model size along each compute budget; the parabola in "
                   "ln N fitted to each budget's runs and its minimum (Approach 2), and the fitted law along the "
                   "same budget with its optimum (Approach 3). Right: compute-optimal N against C from each approach.")
    else:
        missing["isoflop"] = "no points to group by budget"

    # ---------------------------------------------------------------- Kaplan
    kap = fit.get("kaplan")
    if kap:
        doc.h(2, "Kaplan-style single-variable laws")
        doc.p(f"L(X) = (X_c / X)^alpha_X without an irreducible term (Kaplan et al. 2020), fitted on the runs "
              f"closest to each law's condition; N counted as {kap.get('param_convention')}. Kaplan's own "
              "exponents are for non-embedding parameters on WebText2.")
        theirs = {"L_N": KAPLAN.extra["alpha_N"], "L_D": KAPLAN.extra["alpha_D"], "L_C": KAPLAN.extra["alpha_C"]}
        rows = []
        for key, label in (("L_N", "L(N)"), ("L_D", "L(D)"), ("L_C", "L(C)")):
            e = kap.get(key)
            if e is None:
                rows.append((label, "-", "-", "-", "-", f"{theirs[key]:.3f}"))
                continue
            iv = e.get("alpha_ci")
            rows.append((label, _fmt(e.get("alpha"), ".4f"), "-" if not iv or None in iv else f"[{iv[0]:.4f}, {iv[1]:.4f}]",
                         _fmt(e.get("x_c"), ".3g"), e.get("n_points"), f"{theirs[key]:.3f}"))
        doc.table(["law", "alpha_X", "interval", "X_c", "points", "Kaplan et al."], rows)
        doc.ul(kap.get("reasons") or [])

    # ---------------------------------------------------------------- published
    doc.h(2, "Comparison with published laws")
    rows_cmp = compare.compare(law, ci, ref_c)
    doc.table(*_compare_table(rows_cmp, ref_c))
    doc.p("in / OUT: the published value lies inside / outside your interval.")
    doc.ul(compare.CAVEATS)
    k = next(number)
    n_pts = data.n if data is not None else np.array([])
    c_pts = data.compute if data is not None else np.array([])
    c_range = meta.get("c_range")
    figures["frontiers"] = figs.frontiers(
        law, n_pts, c_pts, colours, c_range=c_range, c_max=FRONTIER_MAX_C, budgets=PLAN_BUDGETS, n_label=n_label,
        references={"chinchilla": CHINCHILLA.law.n_opt, "besiroglu": BESIROGLU.law.n_opt,
                    "kaplan": lambda c: allocation.KAPLAN_N_COEFF * (np.asarray(c) / allocation.PF_DAY_FLOP)
                    ** allocation.KAPLAN_N_EXPONENT})
    doc.figure("frontiers", k, "Iso-loss contours of the fitted L(N, D = C/6N) over compute and model size (each "
               "contour is the loss the fit reaches at a power of ten of C with the best split, and touches "
               "the fitted frontier there); your runs as points; your compute-optimal N_opt(C), solid over your "
               "runs' compute and dashed beyond; Chinchilla's, Besiroglu et al.'s and Kaplan's frontiers, to "
               f"{figs.sci(FRONTIER_MAX_C)} FLOPs; dotted: the budgets of the plan below. "
               + ("The published frontiers count total parameters (Kaplan: non-embedding); "
                  f"yours counts {n_label}." if convention else ""))

    # ---------------------------------------------------------------- plan
    doc.h(2, "Plan for a few budgets")
    top = (c_range or [None, None])[1]
    rows = []
    for c in PLAN_BUDGETS:
        for a in allocation.compare_allocations(law, c):
            rows.append((figs.sci(c), "law optimum" if a.method == "law" else a.method, f"{a.n:.3g}", f"{a.d:.3g}",
                         f"{a.tokens_per_param:.3g}", _fmt(a.loss, ".4f")))
    doc.table(["C (FLOPs)", "allocation", "N (params)", "D (tokens)", "D/N", "predicted loss"], rows,
              align=["r", "l", "r", "r", "r", "r"])
    plan_notes = ["predicted loss: what your law predicts for each allocation (the law's optimum is lowest by "
                  "construction); kaplan: N = 1.3e9 (C / 8.64e19)^0.73 non-embedding parameters, D = C / (6N)."]
    if top:
        plan_notes += [f"C = {figs.sci(c)} is {math.log10(c / top):.1f} orders of magnitude above your largest run "
                       f"({top:.3g} FLOPs): an extrapolation of the fitted form" for c in PLAN_BUDGETS if c > top]
    doc.ul(plan_notes)

    # ---------------------------------------------------------------- evidence and limitations
    doc.h(2, "Evidence")
    doc.ul(list(fit.get("evidence") or []) + _more_evidence(ho))
    doc.h(2, "Limitations")
    doc.ul(list(fit.get("limitations") or []) + _more_limitations(inputs, ho))
    if missing:
        doc.h(2, "Figures not drawn")
        doc.ul(f"{FIGURE_TITLES[name]}: {why}" for name, why in missing.items())

    doc.h(2, "How this report was made")
    doc.ul(_provenance(inputs, holdout_fraction))
    return Report(inputs=inputs, doc=doc, figures=figures, holdout=ho, title=title, missing_figures=missing,
                  left_out=_merge(left))


def _merge(pairs) -> list[tuple[str, str]]:
    """One row per run or point, its reasons joined in the order they were found."""
    reasons: dict[str, list[str]] = {}
    for what, why in pairs:
        found = reasons.setdefault(what, [])
        if why not in found:
            found.append(why)
    return [(what, "; ".join(whys)) for what, whys in reasons.items()]


def _source_line(inputs: Inputs) -> str:
    meta = inputs.fit.get("data") or {}
    src = meta.get("source") or "an unnamed source"
    if inputs.fitted_here:
        how = "fitted here (the same fit as `scaling fit`; its fit.json is written beside this report)"
    else:
        how = f"read from `{inputs.fit_path}`"
    n = meta.get("n_points")
    return f"Data: {src}" + (f", {n} points" if n is not None else "") + f". Fit: {how}."


def _at_a_glance(fit: dict, law: Law, ho: Holdout | None) -> list[str]:
    ci = fit.get("ci") or {}
    out = []
    alloc = fit.get("allocation") or {}
    if alloc.get("a") is not None:
        out.append(f"Compute-optimal allocation: N_opt ~ C^{alloc['a']:.3f}"
                   + (f" (interval {_interval(ci, 'a', '.3f')})" if ci.get("a") else "")
                   + f", D_opt ~ C^{alloc['b']:.3f}.")
    tpp = fit.get("tokens_per_param_at_reference")
    if tpp is not None:
        out.append(f"Tokens per parameter at C = {fit['reference_compute']:.3g} FLOPs: {tpp:.3g}"
                   + (f" (interval {_interval(ci, 'tokens_per_param', '.3g')})" if ci.get("tokens_per_param") else "")
                   + "; Chinchilla's rule of thumb is 20.")
    if ho is not None and ho.mean_abs_rel_error is not None:
        out.append(f"Hold-out check: refitted without the {len(ho.rows)} largest-compute runs, the law predicts "
                   f"their loss with a mean absolute relative error of {_pct(ho.mean_abs_rel_error)}.")
    c_range = (fit.get("data") or {}).get("c_range")
    if c_range:
        out.append(f"Measured from C = {c_range[0]:.3g} to {c_range[1]:.3g} FLOPs; everything beyond is extrapolation.")
    return out


def _settings_lines(inputs: Inputs) -> list[str]:
    common = inputs.settings["common"]
    varying = inputs.settings["varying"]
    skip = {"run_id", "n_params_total", "n_params_non_embedding"}
    if "lr" in varying:
        skip.add("train.lr")      # the base rate; each run's own lr is in the run table
    sections: dict[str, list[str]] = {}
    for key, value in common.items():
        if key in skip or value is None or value == []:
            continue
        section, _, rest = key.partition(".")
        if not rest:
            section, rest = "sweep", {"sweep": "name"}.get(key, key)
        sections.setdefault(section, []).append(f"{rest} `{value}`")
    out = [f"{section}: " + ", ".join(items) for section, items in sections.items()]
    if varying:
        out.append("varies between runs: " + ", ".join(f"`{k}`" for k in varying))
    runs = inputs.runs
    if runs is not None and "epochs" in runs:
        ep = pd.to_numeric(runs.epochs, errors="coerce")
        tok = pd.to_numeric(runs.tokens, errors="coerce")
        ok = (ep > 0) & (tok > 0)
        if ok.any():
            split = float((tok[ok] / ep[ok]).median())
            out.append(f"training split: about {split:.4g} tokens (tokens / epochs of the runs); the largest run saw "
                       f"{float(ep[ok].max()):.3g} epochs of it")
    return out


def _run_rows(runs: pd.DataFrame, fitted: set, held: set) -> list:
    def num(v, f):
        try:
            v = float(v)
        except (TypeError, ValueError):
            return "-"
        return format(v, f) if math.isfinite(v) else "-"

    df = runs.copy()
    df["_n"] = pd.to_numeric(df.n_params_non_embedding, errors="coerce")
    df["_d"] = pd.to_numeric(df.tokens, errors="coerce")
    df = df.sort_values(["_n", "_d", "run_id"], na_position="last", kind="stable")
    rows = []
    for _, r in df.iterrows():
        rid = str(r.run_id)
        if rid in held:
            role = "yes; held out in the check"
        elif rid in fitted:
            role = "yes"
        else:
            reason = r.reason if isinstance(r.reason, str) and r.reason else ""
            role = "no" + (f": {reason}" if reason else "")
        rows.append((rid, r.status if isinstance(r.status, str) else "-", num(r.n_params_non_embedding, ".4g"),
                     num(r.n_params_total, ".4g"), num(r.tokens, ".4g"), num(r.flops_6nd, ".3g"),
                     num(r.lr, ".3g"), num(r.final_val_loss, ".4f"), num(r.final_val_bpb, ".4f"), num(r.epochs, ".3g"),
                     num(r.wall_s, ".1f"), role))
    return rows


def _points_summary(data: fitdata.FitData) -> str:
    r = data.ranges()
    listed = "listed below" if len(data) <= MAX_POINTS_LISTED else "not listed here; see the source"
    return (f"{len(data)} points ({listed}): {data.n_sizes} distinct N from {r['n_range'][0]:.3g} to "
            f"{r['n_range'][1]:.3g}, D from {r['d_range'][0]:.3g} to {r['d_range'][1]:.3g} tokens, C = 6ND from "
            f"{r['c_range'][0]:.3g} to {r['c_range'][1]:.3g} FLOPs, loss from {data.loss.min():.4g} to "
            f"{data.loss.max():.4g} nats/token.")


def _holdout_intro(ho: Holdout) -> str:
    k = ho.n_points - ho.n_train
    text = (f"The law is refitted (same method, same options) on the {ho.n_train} of {ho.n_points} points with the "
            f"smallest compute, leaving out the {k} with the largest C (the top {100 * ho.fraction:g}%), and "
            "then predicts the loss of those.")
    if ho.rows:
        reach = max(r.compute for r in ho.rows) / ho.train_max_compute
        text += (f" The held-out runs reach up to {reach:.3g}x the largest compute the refit saw "
                 f"({ho.train_max_compute:.3g} FLOPs). Their error is a fair guess of the error of a prediction "
                 "that far beyond a sweep; further out, expect more.")
    return text


def _approach_note(e: dict) -> str:
    if e.get("reason"):
        return e["reason"]
    method = e.get("method")
    if method == "isoflop":
        return f"{e.get('n_budgets_used')} budgets; {e.get('grouping')}"
    if method == "envelope":
        notes = "; ".join(e.get("notes") or [])
        return f"{e.get('n_winning_sizes')} winning sizes, no interval" + (f"; {notes}" if notes else "")
    if method == "parametric":
        return "the fitted law; bootstrap interval" if e.get("a_ci") else "the fitted law"
    return ""


def _compare_table(rows: list[dict], reference_compute):
    c = compare.LARGE_COMPUTE if reference_compute is None else float(reference_compute)
    fmts = {"alpha": ".3f", "beta": ".3f", "a": ".3f", "b": ".3f", "tokens_per_param": ".3g",
            "tokens_per_param_large": ".3g"}
    header = ["", "alpha", "beta", "a", "b", f"D/N at {figs.sci(c)}", f"D/N at {figs.sci(compare.LARGE_COMPUTE)}"]
    out = []
    for row in rows:
        cells = [row["name"]]
        for key, f in fmts.items():
            text = _fmt(row.get(key), f)
            if "ci" in row and row["ci"].get(key):
                lo, hi = row["ci"][key]
                text += f" [{format(lo, f)}, {format(hi, f)}]"
            elif text != "-" and (row.get("inside") or {}).get(key) is not None:
                text += " in" if row["inside"][key] else " **OUT**"
            cells.append(text)
        out.append(cells)
    return header, out


def _more_evidence(ho: Holdout | None) -> list[str]:
    out = []
    if ho is not None and ho.mean_abs_rel_error is not None:
        out.append(f"hold-out check: refitted on the {ho.n_train} lowest-compute points, the law predicts the "
                   f"{len(ho.rows)} highest-compute ones with mean absolute relative error "
                   f"{_pct(ho.mean_abs_rel_error)} (largest {_pct(max(r.abs_rel_error for r in ho.rows))})")
    return out


def _more_limitations(inputs: Inputs, ho: Holdout | None) -> list[str]:
    out = []
    data = inputs.data
    fit = inputs.fit
    if data is not None:
        nmax = float(data.n.max())
        conv = _n_label(data.param_convention)
        if nmax < 1e8:
            out.append(f"fitted on tiny models: the largest has {figs.human(nmax)} {conv}, "
                       f"{math.log10(70e9 / nmax):.1f} orders of magnitude below Chinchilla (70B); "
                       "the exponents of models this small need not hold for large ones")
    law = inputs.law
    if data is not None and law.E < 0.05 * float(data.loss.min()):
        out.append(f"E = {law.E:.3g} is pinned near zero: these runs are far from the irreducible loss, so E is "
                   f"not determined and A/N^alpha absorbs it; read alpha = {law.alpha:.3g} as the local slope "
                   "over the measured sizes, not as the exponent of the reducible loss")
    settings = (inputs.settings or {}).get("common") or {}
    if settings:
        corpus = settings.get("corpus.source")
        detail = {"builtin": "the builtin State of the Union corpus", "files": f"files {settings.get('corpus.paths')}",
                  "hf": f"the dataset {settings.get('corpus.dataset')}"}.get(corpus, str(corpus))
        vocab = settings.get("tokenizer.vocab_size")
        out.append(f"one corpus ({detail}), one tokenizer (byte-level BPE, {vocab} tokens), one architecture "
                   "and one learning-rate rule: E, A and B, and possibly the exponents, change with any of them")
        ctx = settings.get("model.context_length")
        if ctx:
            out.append(f"context length {ctx} tokens: loss per token at a short context is higher than at a long "
                       "one, and the gap need not scale the same way")
    elif (fit.get("data") or {}).get("source", "").startswith("dataset chinchilla"):
        out.append("the points were read off a figure of Hoffmann et al. (Besiroglu et al.'s extraction): their "
                   "precision is that of the plot, and Hoffmann et al.'s runs are not all in it")
    runs = inputs.runs
    if runs is not None and "epochs" in runs:
        ep = pd.to_numeric(runs.epochs, errors="coerce")
        multi = runs[ep > 1.0]
        if len(multi):
            out.append(f"{len(multi)} run(s) trained for more than one epoch (up to {float(ep.max()):.3g}): repeated "
                       "tokens are worth less than fresh ones, so their losses are higher than the law's D assumes")
    c_range = (fit.get("data") or {}).get("c_range")
    if c_range:
        top = float(c_range[1])
        span = ", ".join(f"{figs.sci(c)} is {math.log10(c / top):.1f}" for c in PLAN_BUDGETS if c > top)
        if span:
            out.append(f"the plan and the frontiers extrapolate: {span} orders of magnitude of compute beyond the "
                       f"largest run ({top:.3g} FLOPs)")
    if ho is not None and ho.mean_abs_rel_error is None and ho.reason:
        out.append(f"no hold-out check: {ho.reason}")
    return out


def _provenance(inputs: Inputs, fraction: float) -> list[str]:
    out = []
    if inputs.fitted_here:
        out.append(f"fitted here; `{inputs.fit_command}` writes the same fit.json")
    else:
        out.append(f"fit read from `{inputs.fit_path}`")
    if inputs.boot is not None and not inputs.fitted_here:
        out.append(f"bootstrap distributions recomputed here: {inputs.boot.n_resamples} resamples, seed "
                   f"{inputs.boot.seed}")
    out.append(f"hold-out: the top {100 * fraction:g}% of points by C = 6ND (at least one), refitted with Hoffmann's "
               "4,500 starts")
    out.append("figures: PNG and SVG beside this report in figures/; the same inputs give byte-identical files")
    return out


# ============================================================================ writing

def write_report(report: Report, out, fmt: str = "md") -> list[Path]:
    """Write the figures (PNG and SVG), fit.json when fitted here, and report.md or report.html."""
    if fmt not in FORMATS:
        raise UsageError(f"--format must be one of {', '.join(FORMATS)}; got {fmt!r}")
    out = Path(out)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot create {out}: {exc}") from None
    if out.is_file():
        raise UsageError(f"{out} is a file; --out needs a folder")
    paths = []
    images = {}
    for name, fig in report.figures.items():
        paths += figs.save(fig, out / FIGURE_DIR, name)
        images[name] = (out / FIGURE_DIR / f"{name}.png").read_bytes()
    if report.inputs.fitted_here:
        paths.append(results.write_fit(out / results.FILENAME, report.inputs.fit))
    # Plain writes (not store.write_atomic, whose temporary file is private to the user): a
    # report is meant to be shared, and nothing reads it back.
    if fmt == "md":
        path = out / "report.md"
        path.write_text(report.doc.markdown())
    else:
        path = out / "report.html"
        path.write_text(report.doc.html(report.title, images))
    paths.append(path)
    return paths


def format_holdout(ho: Holdout | None) -> str:
    """The hold-out check as plain text: one line per held-out run, then the mean."""
    if ho is None:
        return "hold-out check: not possible, the points of this fit were not found (see the report's first section)"
    head = (f"hold-out check: refit on the {ho.n_train} of {ho.n_points} points with the smallest C, "
            f"predict the {ho.n_points - ho.n_train} with the largest (top {100 * ho.fraction:g}%)")
    if ho.reason:
        return head + "\n" + ho.reason
    table = [("run", "N", "D", "C", "loss", "predicted", "abs rel error")]
    for r in ho.rows:
        table.append((r.id, f"{r.n:.4g}", f"{r.d:.4g}", f"{r.compute:.3g}", f"{r.loss:.4f}", f"{r.predicted:.4f}",
                      _pct(r.abs_rel_error)))
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    lines = [head]
    for j, row in enumerate(table):
        lines.append("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths))).rstrip())
        if j == 0:
            lines.append("  ".join("-" * w for w in widths))
    lines.append(f"mean absolute relative error: {_pct(ho.mean_abs_rel_error)} (full fit, which saw them: "
                 f"{_pct(ho.full_mean_abs_rel_error)})")
    return "\n".join(lines)


def make_report(source=None, *, out, fmt: str = "md", dataset: str | None = None, fit=None,
                bootstrap: int | None = None, seed: int = 0, holdout_fraction: float = DEFAULT_HOLDOUT,
                drop_highest_loss: int = 0, param_convention: str | None = None) -> tuple[Report, list[Path]]:
    """load_inputs + build_report + write_report: what `scaling report` does."""
    if fmt not in FORMATS:
        raise UsageError(f"--format must be one of {', '.join(FORMATS)}; got {fmt!r}")
    inputs = load_inputs(source, dataset=dataset, fit=fit, bootstrap=bootstrap, seed=seed,
                         drop_highest_loss=drop_highest_loss, param_convention=param_convention)
    report = build_report(inputs, holdout_fraction=holdout_fraction)
    return report, write_report(report, out, fmt)
