"""The run store: one folder per run under runs/<sweep>/, and the table of all runs.

    runs/<sweep>/
        runs.csv                 one row per run (written by the sweep, read by the fitter)
        <run-id>/
            config.yaml          the resolved settings of this run
            metrics.jsonl        one JSON record per logged step (append-only)
            summary.json         written once at the end: status, N, D, C, final losses
            checkpoint.pt        latest training state (weights_only-loadable)

Writes of whole files are atomic (temporary file, fsync, rename), so a kill leaves either the
old file or the new one, never half of one. metrics.jsonl is appended line by line; a torn last
line (a kill mid-write) is skipped on read with a warning.
"""

from __future__ import annotations

import json
import os
import tempfile
import warnings
from pathlib import Path

import pandas as pd

from scaling.errors import UsageError

SUMMARY = "summary.json"
METRICS = "metrics.jsonl"
CONFIG = "config.yaml"
CHECKPOINT = "checkpoint.pt"
TABLE = "runs.csv"

# Columns of runs.csv, in order. Shape columns first, then sizes, then outcomes.
TABLE_COLUMNS = (
    "run_id", "status", "d_model", "n_layers", "n_heads", "lr",
    "n_params_total", "n_params_non_embedding", "tokens", "flops_6nd", "flops_exact",
    "final_val_loss", "final_val_bpb", "epochs", "wall_s", "seed", "reason",
)


def write_atomic(path: Path, data: bytes | str) -> None:
    """Replace `path` with `data` so that readers see the old or the new file, never a mix."""
    path = Path(path)
    payload = data.encode() if isinstance(data, str) else data
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(payload)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json(path: Path, obj) -> None:
    write_atomic(path, json.dumps(obj, indent=2, sort_keys=True) + "\n")


def append_jsonl(path: Path, record: dict) -> None:
    """Append one record as a single line; flushed so a kill loses at most this line."""
    with open(path, "a") as f:
        f.write(json.dumps(record, sort_keys=True) + "\n")
        f.flush()


def read_jsonl(path: Path) -> list[dict]:
    """Records of a metrics.jsonl; a torn or corrupt line is skipped with a warning naming it."""
    records = []
    with open(path) as f:
        for lineno, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError:
                warnings.warn(f"{path}:{lineno}: skipping a torn or corrupt line", stacklevel=2)
    return records


def read_summary(run_dir: Path) -> dict | None:
    """The run's summary.json, or None when the run has not ended (or never started)."""
    path = Path(run_dir) / SUMMARY
    if not path.exists():
        return None
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise UsageError(f"{path} is not valid JSON ({exc}); move it aside to retrain that run") from exc


def run_dirs(sweep_dir: Path) -> list[Path]:
    """Run folders of a sweep (those with a config.yaml), sorted by name."""
    return sorted(p.parent for p in Path(sweep_dir).glob(f"*/{CONFIG}"))


def read_runs(sweep_dir: Path) -> pd.DataFrame:
    """One row per run folder, from summary.json; runs without one have status 'incomplete'."""
    sweep_dir = Path(sweep_dir)
    if not sweep_dir.is_dir():
        raise UsageError(f"no run store at {sweep_dir} (expected a folder runs/<sweep> made by `scaling sweep`)")
    rows = []
    for run_dir in run_dirs(sweep_dir):
        summary = read_summary(run_dir) or {"run_id": run_dir.name, "status": "incomplete",
                                            "reason": "no summary.json: interrupted or running"}
        rows.append({col: summary.get(col) for col in TABLE_COLUMNS})
    return pd.DataFrame(rows, columns=list(TABLE_COLUMNS))


def write_table(sweep_dir: Path) -> pd.DataFrame:
    """Rewrite runs/<sweep>/runs.csv from the summaries on disk and return it."""
    table = read_runs(sweep_dir)
    write_atomic(Path(sweep_dir) / TABLE, table.to_csv(index=False))
    return table
