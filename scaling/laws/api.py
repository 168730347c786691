"""The way in from a notebook: `scaling.fit` (points in, a `LawFit` out), `scaling.load`,
`scaling.plan` (the allocation of any law) and `scaling.compare` (a fit beside the published laws).

    f = scaling.fit("points.csv", n="N", d="D", loss="loss", drop_highest_loss=5)
    f.alpha, f.verdict, f.interval("a"), f.plan([1e23, 1e24]), f.predict(1e9, 2e10), scaling.fit_figure(f)
    print(f.summary())                       # what `scaling fit` prints
    f = scaling.load("fits/points")          # a fit directory (fit.json, its bootstrap and points)
    scaling.plan(1e24, law="chinchilla")     # a published law's allocation, as `scaling plan`
    scaling.compare(f)                       # its exponents beside the published ones, as `scaling compare`

`scaling fit` is this function too: the command checks its flags, calls `fit` and writes the
result (`fit_file.write_fit`). The steps are those of docs/architecture.md: a `fitdata` loader,
`selection.apply_filters`, the training curves of a run store (Approach 1), `analysis.fit_data`.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any, cast

import numpy as np
import numpy.typing as npt
import pandas as pd

from scaling.errors import UsageError
from scaling.laws import analysis, tasks
from scaling.laws.curves.runs import read_curve_runs
from scaling.laws.curves.store import curves_from_store
from scaling.laws.fitting import fitdata, readers, selection
from scaling.laws.fitting.fit import DEFAULT_DELTA
from scaling.laws.fitting.quantiles import normal_quantile
from scaling.laws.forms import catalog
from scaling.laws.forms.law import Law
from scaling.laws.forms.references import REFERENCES
from scaling.laws.optimal import allocation
from scaling.laws.optimal import compare as comparison
from scaling.laws.results import fit_file
from scaling.laws.results import lawfit as results
from scaling.reading import excerpt

KINDS = ("store", "table", "dataset", "frame")
# The column options, by the name `fit` takes and `readers.from_frame`'s.
COLUMNS = {"n": "n_col", "d": "d_col", "c": "c_col", "loss": "loss_col", "embedding": "embedding_col",
           "budget": "budget_col", "unique": "unique_col"}


def kind_of(source: object) -> str:
    """What `source` is: a DataFrame ("frame"), a run store's folder ("store"), a packaged
    dataset's name ("dataset", where no file of that name exists) or a CSV/parquet file ("table")."""
    if isinstance(source, pd.DataFrame):
        return "frame"
    if not isinstance(source, (str, Path)):
        raise UsageError(f"the points must be a DataFrame, a table's path, a run store or a dataset name; "
                         f"got {type(source).__name__}")
    path = Path(source)
    if path.is_dir():
        return "store"
    if not path.exists() and str(source) in readers.DATASETS:
        return "dataset"
    return "table"


def points(source: pd.DataFrame | str | Path, *, kind: str | None = None, n: str | None = None, d: str | None = None,
           c: str | None = None, loss: str | None = None, embedding: str | None = None, budget: str | None = None,
           unique: str | None = None, unique_tokens: float | None = None, param_convention: str | None = None,
           compute_measure: str | None = None, metric: str = "loss") -> fitdata.FitData:
    """The points of `source` (see `kind_of`; `kind` says it instead of guessing).

    The columns of a table or a DataFrame (default: the Chinchilla table's): n (parameters),
    loss, and d (tokens) or c (FLOPs, D = C / 6N); embedding (embedding parameters), budget (each
    run's planned compute budget), unique (each run's unique tokens) or unique_tokens (one count
    for all): `readers.from_frame`. param_convention: what a table's N counts, or how to count a
    run store's (default total); compute_measure: a run store's count of compute (default exact);
    metric: a run store's number to fit in place of the loss (`tasks.FIT_METRICS`)."""
    columns = {"n": n, "d": d, "c": c, "loss": loss, "embedding": embedding, "budget": budget, "unique": unique}
    kind = kind or kind_of(source)
    if kind not in KINDS:
        raise UsageError(f"the kind of source must be one of {', '.join(KINDS)}; got {kind!r}")
    tasks.fit_metric(metric)            # a metric the law does not describe: refused before any reading
    if metric != "loss" and kind != "store":
        raise UsageError("the metric applies to a run store; a table or dataset has only its loss column")
    named = {k: v for k, v in {**columns, "unique_tokens": unique_tokens}.items() if v is not None}
    given: dict[str, Any] = {COLUMNS.get(k, k): v for k, v in named.items()}        # readers' names
    if given and kind in ("store", "dataset"):
        raise UsageError(f"column options ({', '.join(named)}) apply to a table or a DataFrame; "
                         f"a {'run store' if kind == 'store' else 'packaged dataset'} names its own")
    if compute_measure is not None and kind != "store":
        raise UsageError("the compute measure applies to a run store; a table's C is 6 N D of its own N")
    if kind == "store":
        return readers.from_runs(cast("str | Path", source), param_convention or "total",
                                 compute_measure=compute_measure or "exact", metric=metric)
    if kind == "dataset":
        if param_convention is not None:
            raise UsageError("a packaged dataset records its own parameter convention")
        return readers.from_dataset(cast(str, source))
    if kind == "frame":
        _check_real_columns(cast(pd.DataFrame, source))
        return readers.from_frame(cast(pd.DataFrame, source), source="a DataFrame",
                                  param_convention=param_convention, **given)
    return readers.from_table(cast("str | Path", source), param_convention=param_convention, **given)


def _check_real_columns(frame: pd.DataFrame) -> None:
    """A DataFrame's complex columns refused by name (numpy casts them to their real part, silently)."""
    complex_columns = [str(name) for name, dtype in frame.dtypes.items() if pd.api.types.is_complex_dtype(dtype)]
    if complex_columns:
        raise UsageError(f"the DataFrame's column(s) {', '.join(map(repr, complex_columns))} hold complex numbers; "
                         "N, D, C and the loss are real numbers")


def fit(source: pd.DataFrame | str | Path, *, kind: str | None = None, n: str | None = None, d: str | None = None,
        c: str | None = None, loss: str | None = None, embedding: str | None = None, budget: str | None = None,
        unique: str | None = None, unique_tokens: float | None = None, param_convention: str | None = None,
        compute_measure: str | None = None, metric: str = "loss", drop_highest_loss: int = 0,
        min_tokens_per_param: float | None = None, min_tokens: float | None = None, delta: float = DEFAULT_DELTA,
        fixed_E: float | None = None, bootstrap: int = results.DEFAULT_BOOTSTRAP, seed: int = 0,
        reference_compute: float | None = None, data_constrained: bool = False, curves: bool = False,
        E_prior: tuple | None = None, form: str | None = None, forms: bool = False) -> results.LawFit:
    """Fit L(N, D) = E + A/N^alpha + B/D^beta to `source`, as `scaling fit` does: a `LawFit`, the
    law with its intervals, verdict and backtest, which predicts (`predict`) and plans (`plan`).

        f = scaling.fit("points.csv", n="N", d="D", loss="loss")    # a table (or a DataFrame)
        f = scaling.fit("runs/tiny")                                # a run store
        f = scaling.fit("chinchilla", drop_highest_loss=5)          # Besiroglu et al.'s refit
        print(f.summary())                                          # what `scaling fit` prints

    source: a DataFrame, a CSV or parquet file, a run store runs/<sweep> or a packaged dataset
    ("chinchilla"); kind ("frame", "table", "store", "dataset") says which instead of guessing
    (`kind_of`). n, d, c, loss: a table's columns of parameters, tokens (or c: FLOPs, D = C / 6N)
    and final loss, found under their usual names where not given (N, n_params, params; D, tokens;
    loss, val_loss; docs/import.md). embedding, budget, unique, unique_tokens, param_convention,
    compute_measure: its other columns and conventions (`points`). metric: fit a run store's `metric`
    (see `tasks.FIT_METRICS`) in place of the loss; fit.json's limitations then say so first.
    drop_highest_loss, min_tokens_per_param, min_tokens: leave points out (`selection`).
    delta, fixed_E, bootstrap, seed, reference_compute, data_constrained, form, forms: as
    `analysis.fit_data` (form: the one law that predicts and plans, by default the fitted law, or
    one form of scaling.laws.forms.catalog, or "median", the median of the forms as one surface;
    forms: every other form fitted beside it as a cross-check).
    A run store's training curves give Approach 1 too. curves: also fit the law to the store's
    whole training curves (`curve_fit`, fit.json's 'curves' section). E_prior: (mean, sd), a
    Gaussian prior on E (`analysis.fit_data`); another fit's E as one: `E_prior_from(path)`.
    Bad input raises UsageError, naming the problem in words and the keywords that fix it (`options`).
    """
    _check_options(delta=delta, fixed_E=fixed_E, form=form, reference_compute=reference_compute, E_prior=E_prior)
    kind = kind or kind_of(source)
    if curves and (kind != "store" or metric != "loss"):
        raise UsageError("fitting the training curves needs a run store and the loss (no other metric): the "
                         "curves are the runs' validation losses", options=("curves", "metric"))
    data = points(source, kind=kind, n=n, d=d, c=c, loss=loss, embedding=embedding, budget=budget, unique=unique,
                  unique_tokens=unique_tokens, param_convention=param_convention, compute_measure=compute_measure,
                  metric=metric)
    data = selection.apply_filters(data, drop_highest_loss=drop_highest_loss,
                                   min_tokens_per_param=min_tokens_per_param, min_tokens=min_tokens)
    convention = data.param_convention or "total"    # a store's points always have one (from_runs' default)
    envelope = None
    if kind == "store" and metric == "loss":   # the curves are of the loss: Approach 1's envelope
        envelope = curves_from_store(cast("str | Path", source), param_convention=convention)
    fit = analysis.fit_data(data, delta=delta, fixed_E=fixed_E, bootstrap=bootstrap, seed=seed,
                            reference_compute=reference_compute, curves=envelope, data_constrained=data_constrained,
                            E_prior=E_prior, form=form, forms=forms)
    if curves:
        fit = analysis.with_curves(fit, read_curve_runs(cast("str | Path", source), convention), resamples=bootstrap,
                                   seed=seed)
    if metric != "loss":   # fit.json says what its "loss" is, where the report and a reader see it
        what = f"fitted to {metric} = {tasks.FIT_METRICS[metric].meaning}, in place of the validation loss"
        fit = replace(fit, limitations=(f"{what}: L is this metric", *fit.limitations))
    return fit


def _check_options(*, delta: object, fixed_E: object, form: object, reference_compute: object,
                   E_prior: object) -> None:
    """`fit`'s numbers and names checked where they come in (each a UsageError naming the keyword),
    not met inside numpy or difflib: a number is a real int or float (no bool, text or complex)."""
    _real(delta, "delta", "the Huber loss's threshold, a positive number")
    for value, name, what in ((fixed_E, "fixed_E", "E held fixed, a number"),
                              (reference_compute, "reference_compute", "a number of FLOPs")):
        if value is not None:
            _real(value, name, f"{what}, or None")
    if form is not None and not isinstance(form, str):
        raise UsageError(f"form must be a form's name (median, {', '.join(catalog.FORMS)}) or None; got "
                         f"{excerpt(form)}", options=("form",))
    if E_prior is not None and not (isinstance(E_prior, (tuple, list)) and len(E_prior) in (2, 3)
                                    and all(_is_real(v) for v in E_prior[:2])):
        raise UsageError(f"E_prior must be (mean, sd), two numbers (or E_prior_from(path)); got {excerpt(E_prior)}",
                         options=("E_prior",))


def _is_real(value: object) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_))


def _real(value: object, name: str, what: str) -> None:
    if not _is_real(value):
        raise UsageError(f"{name} must be {what}; got {excerpt(value)}", options=(name,))


def _path(path: object, name: str, what: str = "a fit directory or its fit.json (a str or a Path)") -> str | Path:
    """`path` where it is one (a str or a Path); UsageError naming the argument otherwise (None, a number)."""
    if not isinstance(path, (str, Path)):
        raise UsageError(f"{name} must be {what}; got {excerpt(path)}")
    return path


def load(path: str | Path) -> results.LawFit:
    """The fit in a fit directory (or its fit.json), with its bootstrap samples where they were
    written beside it, so `plan` and `predict` give intervals as the fit that wrote it did."""
    return fit_file.load_fit(_path(path, "path"))


def plan(compute: npt.ArrayLike, law: results.LawFit | Law | str | Path = "chinchilla", *,
         seed: int = 0) -> allocation.Plan:
    """The compute-optimal N, D at `compute` FLOPs (a number, or an array: arrays back) and the loss
    they reach, as `scaling plan` gives them: an `allocation.Plan`.

    law: a LawFit (its plan, with bootstrap intervals: `LawFit.plan`), a fit directory or
    fit.json (`load`, then the same), a `Law` (no intervals), or a published law's name,
    "chinchilla" (the default, as the command's) or "besiroglu" (no intervals).

        scaling.plan(1e24)                    # Plan(C=1e+24: n=4.13e+10, d=4.04e+12, tokens_per_param=97.7, ...)
        scaling.plan([1e22, 1e24], law="fits/tiny").n      # your fit's N_opt at two budgets
    """
    if isinstance(law, results.LawFit):
        return law.plan(compute, seed=seed)
    if isinstance(law, Law):
        return results.LawFit(law=law).plan(compute, seed=seed)
    if isinstance(law, str) and law in REFERENCES:
        if REFERENCES[law].law is None:
            raise UsageError(f"{law} publishes no L(N, D) to plan with; the laws with one are "
                             f"{', '.join(k for k, r in REFERENCES.items() if r.law is not None)}")
        return results.LawFit(law=REFERENCES[law].parametric_law).plan(compute, seed=seed)
    if isinstance(law, (str, Path)):
        return load(law).plan(compute, seed=seed)
    raise UsageError(f"the law must be a LawFit, a fit directory, a Law or a published law's name "
                     f"({', '.join(REFERENCES)}); got {type(law).__name__}")



def compare(fit: results.LawFit | str | Path) -> list[dict]:
    """Your fit's alpha, beta, a, b and tokens per parameter beside Kaplan's, Chinchilla's,
    Besiroglu's and the 20-tokens rule's, as `scaling compare` gives them (its --json "rows"):
    your row first, with its 95% intervals (`ci`), then one per published law, each with
    `inside`: per quantity, whether the published value lies inside your interval.

    fit: a LawFit, or a fit directory or fit.json (`load`). `pd.DataFrame(rows)` shows them as a
    table; `scaling.laws.optimal.compare.format_table(rows, fit.reference_compute, measure=fit.law.flops.name)`
    as the command prints them.
    UsageError for a law with no compute-optimal allocation (alpha or beta not positive)."""
    if not isinstance(fit, results.LawFit):
        fit = fit_file.load_fit(_path(fit, "fit", "a LawFit, a fit directory or its fit.json"))
    allocation.check_allocatable(fit.law, f"fitted to {fit.data.source or 'these points'}")  # a, b: / (alpha + beta)
    return comparison.compare(fit.law, fit.ci, fit.reference_compute)


def E_prior_from(path: str | Path) -> tuple[float, float, str]:
    """(mean, sd, source): another fit's E (a reference's, or a larger run's fit.json) as a prior,
    its 95% interval read as +-1.96 sd. UsageError where that fit has no interval for E."""
    other = fit_file.load_fit(_path(path, "path"))
    interval = other.interval("E")
    if interval is None or not interval[1] > interval[0]:
        raise UsageError(f"{path}: its fit has no interval for E (refit it with a bootstrap) to give a prior's "
                         "standard deviation; give one with --E-prior MEAN,SD")
    level = other.ci.level if other.ci is not None else 0.95
    sd = (interval[1] - interval[0]) / (2 * normal_quantile(0.5 + level / 2))
    return other.law.E, sd, f"E of {path} ({level:.0%} interval [{interval[0]:.4g}, {interval[1]:.4g}])"
