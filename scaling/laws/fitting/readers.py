"""Reading the (N, D, loss) points a law is fitted to: from a run store, a table, or a packaged dataset.

I/O happens here, at the edge; `scaling.laws.fitting.fit` only sees arrays. Every reader returns a
validated `scaling.laws.fitting.fitdata.FitData`.

    data = from_runs("runs/tiny")                                   # finished runs only
    data = from_table("points.csv", n_col="N", loss_col="loss", d_col="D")
    data = from_dataset("chinchilla")                               # Hoffmann et al.'s 245 runs

Bad input raises `UsageError` with the problem named: which column is missing (and which are
there), which column has how many non-positive or non-finite values and where the first is.
"""

from __future__ import annotations

import difflib
from dataclasses import replace
from importlib import resources
from importlib.abc import Traversable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from scaling.errors import UsageError
from scaling.laws import tasks
from scaling.laws.fitting.fitdata import Dropped, FitData, not_positive, show_cell
from scaling.laws.fitting.provenance import Provenance
from scaling.laws.fitting.selection import MAX_POINTS
from scaling.reading import MAX_FILE_BYTES, check_header
from scaling.runs import store
from scaling.runs.imports.resolve import LOSS_TAGS, N_KEYS, TOKENS_KEYS
from scaling.train.compute import SIX_N, FlopsPerToken, fit_flops_per_token
from scaling.train.counts import COMPUTE_MEASURES, PARAM_CONVENTIONS

FINISHED = "finished"
RUN_COLUMNS = {"non_embedding": "n_params_non_embedding", "total": "n_params_total"}
# A run's training FLOPs in each measure (runs.csv), and the measure of budgets written before
# the measure was recorded.
COMPUTE_COLUMNS = {"exact": "flops_exact", "6n_total": "flops_6n_total", "6n_non_embedding": "flops_6nd"}
LEGACY_BUDGET_MEASURE = "6n_non_embedding"

# Packaged datasets: name -> (file in scaling/laws/datasets, columns, parameter convention, description).
DATASETS = {
    "chinchilla": {
        "file": "chinchilla.csv",
        "n_col": "Model Size", "c_col": "Training FLOP", "loss_col": "loss",
        "param_convention": "total",
        "description": "Hoffmann et al. 2022 Figure 4 runs as extracted by Besiroglu et al. 2024 "
                       "(epoch-research/analyzing-chinchilla, data/svg_extracted_data.csv)",
    },
}
CHINCHILLA_COLUMNS = {k: DATASETS["chinchilla"][k] for k in ("n_col", "c_col", "loss_col")}
# A table's columns found by name when not given: the names `scaling import` looks for, and
# Chinchilla's. A table's "loss" is its final loss (a log's "loss" is usually the training loss,
# so the import does not guess it).
TABLE_NAMES = {"n_col": (*N_KEYS, CHINCHILLA_COLUMNS["n_col"]),
               "d_col": TOKENS_KEYS,
               "c_col": ("C", "compute", "flops", CHINCHILLA_COLUMNS["c_col"]),
               "loss_col": (CHINCHILLA_COLUMNS["loss_col"], *LOSS_TAGS)}
WHAT = {"n_col": "N", "d_col": "D", "c_col": "C", "loss_col": "the loss"}
# The keyword of each column, scaling.fit's and (with dashes) `scaling fit --csv`'s flag: --n, --loss.
KEYWORDS = {"n_col": "n", "d_col": "d", "c_col": "c", "loss_col": "loss"}


def from_runs(sweep_dir: str | Path, param_convention: str = "total", *, compute_measure: str = "exact",
              drop_unmeasured: bool = False, metric: str = "loss") -> FitData:
    """Finished runs of a run store runs/<sweep>/: N (by `param_convention`, Chinchilla's total
    count by default), tokens, final val loss, and each run's training FLOPs in `compute_measure`
    (the exact count by default: what the run spent), with c(N) fitted to them.

    Runs that diverged, failed or never finished are left out and listed in `dropped` with
    their status and the reason the store gives. A finished run whose summary lacks a positive,
    finite N, D or loss is an error (the store is damaged), unless `drop_unmeasured`: then it is
    left out too, with the missing numbers as its reason (a report still shows such a store).

    `metric` puts another of the run's numbers in the place of the loss (scaling.laws.tasks.FIT_METRICS,
    e.g. token_error = 1 - per-token accuracy); UsageError for one the law does not describe.
    """
    if param_convention not in PARAM_CONVENTIONS:
        raise UsageError(f"the parameter convention must be one of {', '.join(PARAM_CONVENTIONS)}; "
                         f"got {param_convention!r}")
    if compute_measure not in COMPUTE_MEASURES:
        raise UsageError(f"the compute measure must be one of {', '.join(COMPUTE_MEASURES)}; got {compute_measure!r}")
    fitted = tasks.fit_metric(metric)
    sweep_dir = Path(sweep_dir)
    table = store.read_store(sweep_dir)
    finished = (table["status"] == FINISHED).to_numpy()
    if not finished.any():
        raise UsageError(f"{sweep_dir}: none of its {len(table)} runs finished "
                         f"({_status_counts(table)}); nothing to fit")
    columns = {"n": RUN_COLUMNS[param_convention], "d": "tokens", "loss": fitted.column}
    values = {key: pd.to_numeric(table[col], errors="coerce").to_numpy(dtype=float) for key, col in columns.items()}
    if metric != "loss" and not np.isfinite(values["loss"][finished]).any():
        raise UsageError(f"{sweep_dir}: no finished run recorded {fitted.column!r} (runs trained before it was "
                         f"recorded); retrain them, or fit another metric")
    with np.errstate(divide="ignore", invalid="ignore"):
        values["loss"] = fitted.transform(values["loss"])
    unmeasured = {col: finished & (~np.isfinite(values[key]) | (values[key] <= 0)) for key, col in columns.items()}
    if not drop_unmeasured:
        _check_measured(sweep_dir, table, unmeasured)
    keep, dropped = _runs_kept(table, finished, unmeasured)
    if not keep:
        raise UsageError(f"{sweep_dir}: no finished run has a positive, finite N, D and final loss; nothing to fit")
    n, d = values["n"][keep], values["d"][keep]
    spent, measure = _spent(table, keep, compute_measure, param_convention)
    return FitData(n=n, d=d, loss=values["loss"][keep], source=f"runs {sweep_dir}",
                   provenance=Provenance("runs", str(sweep_dir)),
                   store={"path": str(sweep_dir.resolve()), "digest": store.table_digest(table)},
                   ids=tuple(str(table["run_id"].iloc[i]) for i in keep), dropped=tuple(dropped),
                   param_convention=param_convention,
                   flops=FlopsPerToken(measure) if spent is None else fit_flops_per_token(n, spent / d, measure),
                   spent=spent, **_recorded_extras(table, keep, param_convention))


def _check_measured(sweep_dir: Path, table: pd.DataFrame, unmeasured: dict) -> None:
    """UsageError for finished runs without a positive, finite N, D or loss: a damaged store."""
    for col, bad in unmeasured.items():
        if bad.any():
            first = int(np.flatnonzero(bad)[0])
            raise UsageError(f"{sweep_dir}: {int(bad.sum())} finished run(s) have no positive, finite "
                             f"{col!r} in {store.SUMMARY} (first: run {table['run_id'].iloc[first]}, value "
                             f"{show_cell(table[col].iloc[first])})")


def _runs_kept(table: pd.DataFrame, finished: np.ndarray, unmeasured: dict) -> tuple[list[int], list[Dropped]]:
    """(the rows fitted, the runs left out with their reasons): validation runs, runs that did not
    finish (their status and the store's reason), finished runs without the numbers."""
    dropped, keep = [], []
    for i, row in enumerate(table.itertuples(index=False)):
        missing = [col for col, bad in unmeasured.items() if bad[i]]
        if row.role == store.VALIDATION_ROLE:
            dropped.append(Dropped(str(row.run_id), "a validation run: it checks a fit, and is never fitted"))
        elif not finished[i]:
            status = row.status if isinstance(row.status, str) else "unknown"
            reason = row.reason if isinstance(row.reason, str) and row.reason else "no reason recorded"
            dropped.append(Dropped(str(row.run_id), f"{status}: {reason}"))
        elif missing:
            dropped.append(Dropped(str(row.run_id), f"finished, but {store.SUMMARY} has no positive, finite "
                                                    f"{', '.join(missing)}"))
        else:
            keep.append(i)
    return keep, dropped


def _recorded_extras(table: pd.DataFrame, keep: list[int], param_convention: str) -> dict:
    """What a store records beyond N, D and loss, for the kept runs, each None where not all of
    them have it: planned budgets (an IsoFLOP design) and their measure, unique tokens, N counted
    the other way, the final context use."""
    budgets = pd.to_numeric(table["budget"], errors="coerce").to_numpy(dtype=float)[keep] \
        if "budget" in table else None
    if budgets is not None and not (np.isfinite(budgets).all() and (budgets > 0).all()):
        budgets = None                         # not an IsoFLOP design (or not all of it): Approach 2 bins C
    recorded = _unique_tokens(table)[keep]      # not all: a store from before U was recorded, without epochs
    unique = recorded if np.isfinite(recorded).all() and (recorded > 0).all() else None
    other = RUN_COLUMNS["total" if param_convention == "non_embedding" else "non_embedding"]
    n_other = pd.to_numeric(table[other], errors="coerce").to_numpy(dtype=float)[keep] if other in table else None
    if n_other is not None and not (np.isfinite(n_other).all() and (n_other > 0).all()):
        n_other = None                         # a damaged summary: no side-by-side fit, nothing worse
    context_use = pd.to_numeric(table["final_context_use"], errors="coerce").to_numpy(dtype=float)[keep] \
        if "final_context_use" in table else None
    if context_use is not None and not np.isfinite(context_use).all():
        context_use = None                     # runs from before it was recorded
    budget_measure = None if budgets is None else _budget_measure(table, keep)
    return {"n_other": n_other, "unique": unique, "budgets": budgets if budget_measure else None,
            "budget_measure": budget_measure, "context_use": context_use}


def _spent(table: pd.DataFrame, keep: list[int], measure: str, param_convention: str
           ) -> tuple[np.ndarray | None, str]:
    """(each kept run's training FLOPs in `measure`, the measure): 6 N_total D where a run predates
    flops_6n_total; (None, 6n_<convention>) for a store that records no FLOPs at all (hand-made):
    then C = 6 N D in the fit's own N, and the fit says so."""
    def number(col: str) -> np.ndarray:
        return pd.to_numeric(table[col], errors="coerce").to_numpy(dtype=float)[keep] if col in table else \
            np.full(len(keep), np.nan)
    spent = number(COMPUTE_COLUMNS[measure])
    if measure == "6n_total":
        spent = np.where(np.isfinite(spent), spent, 6.0 * number("n_params_total") * number("tokens"))
    if not np.isfinite(spent).any():
        return None, f"6n_{param_convention}"
    if not (np.isfinite(spent).all() and (spent > 0).all()):
        first = int(np.flatnonzero(~(np.isfinite(spent) & (spent > 0)))[0])
        raise UsageError(f"run {table['run_id'].iloc[keep[first]]} has no positive, finite "
                         f"{COMPUTE_COLUMNS[measure]!r} in {store.SUMMARY}, though other runs of the store do")
    return spent, measure


def _budget_measure(table: pd.DataFrame, keep: list[int]) -> str | None:
    """The one measure the kept runs' budgets count (a store from before it was recorded: 6N
    non-embedding); None when they mix measures (then Approach 2 bins the compute)."""
    recorded = table["budget_measure"] if "budget_measure" in table else pd.Series([None] * len(table))
    found = {m if isinstance(m, str) and m else LEGACY_BUDGET_MEASURE for m in recorded.iloc[keep]}
    return found.pop() if len(found) == 1 else None


def _unique_tokens(table: pd.DataFrame) -> np.ndarray:
    """Each run's unique training tokens: recorded, or (stores from before) its tokens / epochs."""
    def number(col: str) -> np.ndarray:
        return pd.to_numeric(table[col], errors="coerce").to_numpy(dtype=float) if col in table else \
            np.full(len(table), np.nan)
    recorded = number("unique_tokens")
    with np.errstate(divide="ignore", invalid="ignore"):
        derived = np.round(number("tokens") / number("epochs"))
    return np.where(np.isfinite(recorded), recorded, derived)


def _status_counts(table: pd.DataFrame) -> str:
    counts = table["status"].fillna("unknown").value_counts()
    return ", ".join(f"{int(v)} {k}" for k, v in sorted(counts.items()))


def read_table(path: str | Path) -> pd.DataFrame:
    """A CSV or parquet file as a DataFrame, with a UsageError for a missing or unreadable file."""
    path = Path(path)
    if not path.exists():
        raise UsageError(f"table {path} does not exist")
    if not path.is_file():    # a FIFO or a device (/dev/zero) would be read forever
        raise UsageError(f"cannot read table {path}: not a regular file (a FIFO, a device or a folder)")
    if path.stat().st_size > MAX_FILE_BYTES:   # far past MAX_POINTS rows: refused before pandas holds it
        raise UsageError(f"cannot read table {path}: larger than {MAX_FILE_BYTES // 2**20} MiB, more rows than a fit "
                         f"takes (at most {MAX_POINTS:,} points); average replicates or subsample it")
    suffix = path.suffix.lower()
    try:
        if suffix in (".parquet", ".pq"):
            return pd.read_parquet(path)
        if suffix in (".csv", ".txt", ".tsv"):
            check_header(path, sep="\t" if suffix == ".tsv" else ",")
            return pd.read_csv(path, sep="\t" if suffix == ".tsv" else ",")
    except (OSError, ValueError) as exc:
        raise UsageError(f"cannot read {path}: {exc}") from None
    raise UsageError(f"{path}: expected a .csv or .parquet file (got {suffix or 'no suffix'!r})")


def _named(frame: pd.DataFrame, source: str, option: str) -> str | None:
    """The one column of `frame` under a conventional name of `option` (TABLE_NAMES), None if none."""
    found = [c for c in dict.fromkeys(TABLE_NAMES[option]) if c in frame.columns]
    if len(found) > 1:
        raise UsageError(f"{source}: columns {found[0]!r} and {found[1]!r} could both be {WHAT[option]}; "
                         f"name the one to use")
    return found[0] if found else None


def _did_you_mean(name: str, present: list[str]) -> str:
    """'; did you mean 'params'?' for a column name close to one present (a typo), else ''."""
    close = difflib.get_close_matches(name, present, n=1, cutoff=0.8)
    return f"; did you mean {close[0]!r}?" if close else ""


def _close(frame: pd.DataFrame, option: str) -> str:
    """'; did you mean 'paramss'?' for a column present whose name is close to a conventional name
    of `option` (a header's typo: paramss, val_los), else ''."""
    present = [str(c) for c in frame.columns]
    for name in TABLE_NAMES[option]:
        if close := difflib.get_close_matches(name, present, n=1, cutoff=0.8):
            return f"; did you mean {close[0]!r}?"
    return ""


def table_columns(frame: pd.DataFrame, source: str, n_col: str | None, loss_col: str | None,
                  d_col: str | None, c_col: str | None) -> tuple[str, str, str | None, str | None]:
    """(n_col, loss_col, d_col, c_col) with each one not given found by its conventional names
    (TABLE_NAMES): D before C, since a table's tokens need no 6N. Every one missing is named in
    one error, with the columns present."""
    n_col = n_col if n_col is not None else _named(frame, source, "n_col")
    loss_col = loss_col if loss_col is not None else _named(frame, source, "loss_col")
    if d_col is None and c_col is None:
        d_col = _named(frame, source, "d_col")
        c_col = None if d_col is not None else _named(frame, source, "c_col")
    unfound = [o for o, col in (("n_col", n_col), ("loss_col", loss_col)) if col is None]
    missing = [f"{WHAT[o]} (under none of {', '.join(map(repr, dict.fromkeys(TABLE_NAMES[o])))}{_close(frame, o)})"
               for o in unfound]
    if d_col is None and c_col is None:
        unfound += ["d_col", "c_col"]
        missing.append(f"D or C (under none of {', '.join(map(repr, TABLE_NAMES['d_col'] + TABLE_NAMES['c_col']))}"
                       f"{_close(frame, 'd_col') or _close(frame, 'c_col')})")
    if missing:
        present = ", ".join(repr(str(c)) for c in frame.columns) or "none"
        raise UsageError(f"{source}: no column for {'; '.join(missing)}; the columns present are: {present}; "
                         "name the columns to use", options=tuple(KEYWORDS[o] for o in unfound))
    return n_col or "", loss_col or "", d_col, c_col    # not None: missing ones raised above


def from_frame(frame: pd.DataFrame, *, source: str, n_col: str | None = None,
               loss_col: str | None = None, d_col: str | None = None,
               c_col: str | None = None, param_convention: str | None = None,
               embedding_col: str | None = None, budget_col: str | None = None, unique_col: str | None = None,
               unique_tokens: float | None = None) -> FitData:
    """Points from a DataFrame: N from n_col, loss from loss_col, D from d_col or D = C/(6N) from c_col.

    A column not given is found by its conventional names (`table_columns`: N, n_params, params,
    Model Size, ...; D, tokens, ...; C, Training FLOP, ...; loss, val_loss, ...).
    param_convention says what n_col counts; embedding_col (which needs it) gives each row's
    embedding parameters, so N is known both ways and the fit can set the two side by side.
    budget_col: each run's planned compute budget (an IsoFLOP design), which Approach 2 then
    groups by instead of binning C. unique_col, or one unique_tokens for every row: the unique
    tokens each run drew its D from, for the data-constrained fit.
    """
    _check_table_options(param_convention, d_col=d_col, c_col=c_col, embedding_col=embedding_col,
                         unique_col=unique_col, unique_tokens=unique_tokens)
    n_col, loss_col, d_col, c_col = table_columns(frame, source, n_col, loss_col, d_col, c_col)
    d_or_c_col = d_col or c_col or ""      # table_columns found one of them
    wanted = {"N": n_col, "loss": loss_col, ("D" if d_col is not None else "C"): d_or_c_col,
              **({"embedding parameters": embedding_col} if embedding_col is not None else {}),
              **({"compute budget": budget_col} if budget_col is not None else {}),
              **({"unique tokens": unique_col} if unique_col is not None else {})}
    _check_distinct_roles(wanted, source)
    present_names = [str(c) for c in frame.columns]
    missing = [f"{col!r} (for {what}{_did_you_mean(col, present_names)})" for what, col in wanted.items()
               if col not in frame.columns]
    if missing:
        present = ", ".join(repr(str(c)) for c in frame.columns) or "none"
        raise UsageError(f"{source}: column(s) {', '.join(missing)} not found; the columns present are: "
                         f"{present} (name the N, D or C, and loss columns to use)")
    if frame.empty:
        raise UsageError(f"{source}: the table has no rows")

    def column(col: str) -> np.ndarray:
        values = pd.to_numeric(frame[col], errors="coerce").to_numpy(dtype=float)
        if found := not_positive(values):
            count, first = found
            raise UsageError(f"{source}: column {col!r} must be positive and finite, but {count} "
                             f"of {values.size} rows are not (first at row index {first}: "
                             f"{show_cell(frame[col].iloc[first])})")
        return values

    n = column(n_col)
    loss = column(loss_col)
    d = column(d_or_c_col) if d_col is not None else column(d_or_c_col) / (6.0 * n)
    n_other = None
    if embedding_col is not None:
        embedding = pd.to_numeric(frame[embedding_col], errors="coerce").to_numpy(dtype=float)
        n_other = n - embedding if param_convention == "total" else n + embedding
    unique = column(unique_col) if unique_col is not None else \
        None if unique_tokens is None else np.full(n.size, float(unique_tokens))
    return FitData(n=n, d=d, loss=loss, source=source, ids=tuple(range(len(frame))),
                   param_convention=param_convention, n_other=n_other,
                   budgets=None if budget_col is None else column(budget_col),
                   budget_measure=None if budget_col is None else SIX_N, unique=unique)


# The keyword of `scaling.fit` (and so the flag of `scaling fit`) that names each role's column.
ROLE_OPTIONS = {"N": "n", "loss": "loss", "D": "d", "C": "c", "embedding parameters": "embedding",
                "compute budget": "budget", "unique tokens": "unique"}


def _check_distinct_roles(wanted: dict, source: str) -> None:
    """UsageError where one column is named for two roles (the loss as the compute budget, N as the
    loss): it was taken, and the fit grouped runs by their loss or fitted N against itself. A
    budget may be the C column: a run's planned compute can be the compute it used."""
    roles: dict = {}
    for what, col in wanted.items():
        roles.setdefault(col, []).append(what)
    for col, named in roles.items():
        if len(named) > 1 and set(named) != {"C", "compute budget"}:
            raise UsageError(f"{source}: column {col!r} is named for both {' and '.join(named)}; "
                             "each needs a column of its own", options=tuple(ROLE_OPTIONS[what] for what in named))


def _check_table_options(param_convention: str | None, *, d_col: str | None, c_col: str | None,
                         embedding_col: str | None, unique_col: str | None, unique_tokens: float | None) -> None:
    """UsageError for options of `from_frame` that exclude or need each other."""
    if unique_col is not None and unique_tokens is not None:
        raise UsageError("give the unique-tokens column or one number of unique tokens, not both")
    if param_convention is not None and param_convention not in PARAM_CONVENTIONS:
        raise UsageError(f"the parameter convention must be one of {', '.join(PARAM_CONVENTIONS)}; "
                         f"got {param_convention!r}")
    if embedding_col is not None and param_convention is None:
        raise UsageError("an embedding-parameter column needs the table's parameter convention "
                         "(does its N count embeddings or not?)")
    if d_col is not None and c_col is not None:
        raise UsageError("give the tokens column (d_col) or the compute column (c_col), not both")

def from_table(path: str | Path, n_col: str | None = None, loss_col: str | None = None,
               d_col: str | None = None, c_col: str | None = None,
               param_convention: str | None = None, embedding_col: str | None = None,
               budget_col: str | None = None, unique_col: str | None = None,
               unique_tokens: float | None = None) -> FitData:
    """Points from a CSV or parquet file (see `from_frame` for the columns). The path and columns
    are kept in `table`, so the same points can be read again from the fit's record."""
    frame = read_table(path)
    n_col, loss_col, d_col, c_col = table_columns(frame, f"table {path}", n_col, loss_col, d_col, c_col)
    columns: dict[str, Any] = dict(
        n_col=n_col, loss_col=loss_col, d_col=d_col, c_col=c_col, param_convention=param_convention,
        embedding_col=embedding_col, budget_col=budget_col, unique_col=unique_col, unique_tokens=unique_tokens)
    data = from_frame(frame, source=f"table {path}", **columns)
    return replace(data, table={"path": str(path), **columns}, provenance=Provenance("table", str(path)))


def data_file(filename: str) -> Traversable:
    """A file of scaling/laws/datasets, through importlib.resources.

    Where `scaling` is imported as a namespace package (seen here with an editable install
    whose finder predates scaling/__init__.py), Python 3.11's resources.files() fails with
    NotADirectoryError from MultiplexedPath; then the file is taken from the laws package's
    folder (this module's parent's), which is where both the wheel and the editable install keep it.
    """
    try:
        return resources.files("scaling.laws") / "datasets" / filename
    except (NotADirectoryError, TypeError, ValueError):
        return Path(__file__).resolve().parents[1] / "datasets" / filename


def from_dataset(name: str = "chinchilla") -> FitData:
    """A dataset packaged with scaling: "chinchilla" (245 runs; D = C / (6N))."""
    if name not in DATASETS:
        raise UsageError(f"unknown dataset {name!r}; known: {', '.join(DATASETS)}")
    spec = DATASETS[name]
    with data_file(spec["file"]).open("r") as f:
        frame = pd.read_csv(f)
    data = from_frame(frame, source=f"dataset {name}: {spec['description']}", n_col=spec["n_col"],
                      loss_col=spec["loss_col"], c_col=spec["c_col"], param_convention=spec["param_convention"])
    return replace(data, provenance=Provenance("dataset", name))
