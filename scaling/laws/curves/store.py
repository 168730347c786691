"""The training curves of a sweep's runs, read from the run store: Approach 1's input and the report's
loss curves.

    curves = curves_from_store("runs/tiny")          # finished runs: run_id, n, tokens, loss
    found = read_curves("runs/tiny")                 # every run, its status, and the runs without a curve

I/O at the edge, like `scaling.laws.fitting.fitdata`; `scaling.laws.optimal.approaches.envelope` takes the frame.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from scaling.errors import UsageError
from scaling.laws.fitting.readers import RUN_COLUMNS
from scaling.laws.optimal.approaches import CURVE_COLUMNS
from scaling.reading import finite_number
from scaling.runs import store


@dataclass(frozen=True)
class StoreCurves:
    """Every run's validation curve (columns run_id, n, tokens, loss, status; one row per
    evaluation), and the runs without one: (run_id, status, why)."""

    curves: pd.DataFrame
    missing: tuple = ()


def read_curves(sweep_dir: str | Path, *, param_convention: str = "non_embedding", tokens_key: str = "tokens",
                loss_key: str = "val_loss", also: tuple[str, ...] = ()) -> StoreCurves:
    """The training curves of every run of a sweep, whatever its status, in the store's run order.

    Reads runs/<sweep>/<run>/metrics.jsonl and keeps the records that carry both `tokens_key`
    and `loss_key`; `also`: further fields of those records, as columns of their own (NaN in
    records without them). N is the run's non-embedding count by default (as the sweep's flops_6nd
    uses; param_convention="total" counts embeddings too), from its summary or, for a run that
    never wrote one, from its config.yaml. A run without metrics, N or any evaluation is listed
    in `missing`. A run without a summary has status "incomplete".
    """
    column = RUN_COLUMNS.get(param_convention)
    if column is None:
        raise UsageError(f"param_convention must be 'non_embedding' or 'total', got {param_convention!r}")
    if not Path(sweep_dir).is_dir():
        raise UsageError(f"no run store at {sweep_dir}")
    rows, missing = [], []
    for run_dir in store.run_dirs(sweep_dir):
        summary = store.read_summary(run_dir) or {}
        run_id, status = summary.get("run_id", run_dir.name), summary.get("status", "incomplete")
        path = run_dir / store.METRICS
        n = summary.get(column)
        if n is None:
            n = _config_value(run_dir, column)
        if not path.exists():
            missing.append((run_id, status, f"no {store.METRICS}"))
            continue
        if n is None:
            missing.append((run_id, status, f"no parameter count in {store.SUMMARY} or {store.CONFIG}"))
            continue
        found = [{"run_id": run_id, "n": float(n), "tokens": float(rec[tokens_key]), "loss": float(rec[loss_key]),
                  "status": status, **{key: rec.get(key) for key in also}}
                 for rec in store.read_jsonl(path) if rec.get(tokens_key) is not None and rec.get(loss_key) is not None]
        if not found:
            missing.append((run_id, status, f"{store.METRICS} has no {loss_key}"))
        rows += found
    frame = pd.DataFrame(rows, columns=[*CURVE_COLUMNS, "status", *also])
    return StoreCurves(frame.astype({key: float for key in also}), tuple(missing))


def _config_value(run_dir: Path, key: str) -> float | None:
    """A positive number at the top level of a run's config.yaml; None when the file or the key is
    missing or unreadable, or the value is not a positive, finite number (a hand edit: 'abc', a list)."""
    try:
        config = store.read_config(run_dir)
    except (OSError, UsageError):
        return None
    value = config.get(key) if isinstance(config, dict) else None
    if value is None or not finite_number(value) or value <= 0:
        return None
    return float(value)


def curves_from_store(sweep_dir: str | Path, *, param_convention: str = "non_embedding",
                      tokens_key: str = "tokens", loss_key: str = "val_loss") -> pd.DataFrame:
    """Training curves of a sweep's finished runs, for `envelope`: run_id, n, tokens, loss
    (see `read_curves`)."""
    curves = read_curves(sweep_dir, param_convention=param_convention, tokens_key=tokens_key,
                         loss_key=loss_key).curves
    finished = curves[curves.status == "finished"]
    return finished.loc[:, list(CURVE_COLUMNS)].reset_index(drop=True)
