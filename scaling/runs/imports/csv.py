"""A CSV table of runs: one row per run (its N, D and final loss), or one row per logged step of
each run (with a step column: its curve).

The run column is named by the run key (default: the first of RUN_KEYS present); the step
column is STEP_KEYS' first present, and without one each run must be one row. Each numeric
column is a scalar series over the steps, and a column constant within a run is also one of its
hyperparameters (N, or D as a total): the names N, D and the loss are then found as in any log.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pandas as pd

from scaling.errors import UsageError
from scaling.reading import check_header
from scaling.runs.imports.source import SourceRun

RUN_KEYS = ("run", "run_id", "name")
STEP_KEYS = ("step", "_step")


def _first(frame: pd.DataFrame, keys: Iterable[str]) -> str | None:
    return next((k for k in keys if k in frame.columns), None)


def read(src: Path, run_key: str | None = None) -> list[SourceRun]:
    """One SourceRun per value of the run column of the table `src`."""
    check_header(src)
    try:
        frame = pd.read_csv(src)
    except (ValueError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read {src} as a CSV table: {exc}") from None
    run_col = run_key or _first(frame, RUN_KEYS)
    if run_col not in frame.columns:
        # options: the CLI names the flag (a table of final losses alone is `scaling fit --csv`'s).
        raise UsageError(f"{src}: no run column {run_key or ' or '.join(RUN_KEYS)!r}; columns: "
                         f"{', '.join(map(str, frame.columns))}: name the column of run names as the run "
                         f"key, or fit a table of final losses as a table, without importing it",
                         options=("run_key",))
    step_col = _first(frame, STEP_KEYS)
    if step_col is None and frame[run_col].duplicated().any():
        first = frame[run_col][frame[run_col].duplicated()].iloc[0]
        raise UsageError(f"{src}: run {first!r} has several rows but the table has no step column "
                         f"({' or '.join(STEP_KEYS)}); which row is the end of the run?")
    runs = []
    for name, rows in frame.groupby(run_col, sort=True):
        rows = rows.sort_values(step_col) if step_col else rows
        steps = pd.to_numeric(rows[step_col], errors="coerce") if step_col else pd.Series([1] * len(rows))
        if not np.isfinite(steps).all() or (steps != steps.round()).any():
            raise UsageError(f"{src}: run {name!r} has a step that is not a whole number")
        columns = [c for c in rows.columns if c not in (run_col, step_col)]
        numeric = {c: pd.to_numeric(rows[c], errors="coerce") for c in columns}
        scalars = {c: [(int(s), float(v)) for s, v in zip(steps, numeric[c]) if v == v]
                   for c in columns if numeric[c].notna().any()}
        params = {c: rows[c].iloc[0] for c in columns if rows[c].nunique(dropna=False) == 1}
        runs.append(SourceRun(name=str(name), params=params, scalars=scalars, origin={"rows": len(rows)}))
    return runs
