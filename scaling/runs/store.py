"""The run store: one folder per run under runs/<sweep>/, and the table of all runs.

    runs/<sweep>/
        runs.csv                 one row per run (written by the sweep, read by the fitter)
        <run-id>/
            config.yaml          the resolved settings of this run
            metrics.jsonl        one JSON record per logged step (append-only)
            summary.json         written once at the end: status, N, D, C, final losses
            checkpoint.pt        latest training state (weights_only-loadable)
            checkpoint-step<S>.pt  a WSD stable run's state at step S, a branch point (kept)
            .lock                held by the sweep training this run (scaling.runs.locks)
            events.out.tfevents.*  with train.log_to: [tensorboard], the same records for TensorBoard

A store of runs trained elsewhere (`scaling import`, scaling.runs.imports) has the same files, with
the source run's hyperparameters and provenance in config.yaml.

Writes of whole files are atomic (temporary file, fsync, rename, fsync of the folder), so a kill
or a power cut leaves either the old file or the new one, never half of one. metrics.jsonl is
appended line by line; a torn last line (a kill mid-write) or a record edited out of shape is
skipped on read with a warning naming the file and line. A failed write raises OSError naming
the file it was writing, not its temporary name.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import tempfile
import warnings
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pandas as pd

from scaling.errors import UsageError
from scaling.reading import excerpt, finite_number, open_regular, parse_json, parse_yaml, read_json, read_text
from scaling.runs import faults, locks

SUMMARY = "summary.json"
METRICS = "metrics.jsonl"
CONFIG = "config.yaml"
CHECKPOINT = "checkpoint.pt"
TABLE = "runs.csv"
LOCK = ".lock"                  # in a run folder: held while the run trains (scaling.runs.locks)
TABLE_LOCK = ".runs.csv.lock"   # in a sweep folder: held while runs.csv is read and rewritten
# 'stable': a WSD stable run that reached its last branch point; not a fit point (its branches are).
STATUSES = ("finished", "diverged", "failed", "stable")
ENDED = ("finished", "diverged", "stable")  # a run with one of these statuses is never trained again
# The role of a run that checks a fit's prediction (scaling.validate): never a fit point.
VALIDATION_ROLE = "validation"

# The exact-match lengths k with a column of runs.csv (scaling.train.metrics scores every k to 16),
# and the number of validation prompts each run's final evaluation scores them on.
TASK_KS = (1, 4, 16)
TASK_PROMPTS = 256
# Columns of runs.csv, in order. Shape columns first, then sizes, then outcomes.
TABLE_COLUMNS = (
    "run_id", "status", "d_model", "n_layers", "n_heads", "lr",
    "n_params_total", "n_params_non_embedding", "tokens", "flops_6nd", "flops_exact", "flops_6n_total",
    "final_val_loss", "final_val_bpb", "epochs", "unique_tokens", "wall_s", "seed", "reason", "retry_of",
    # WSD branches: the stable run they start from, and the tokens they trained themselves (the
    # cooldown); tokens and FLOPs above are those of the whole schedule, the point the law sees.
    "branch_of", "branch_tokens",
    # IsoFLOP designs: the compute budget the run was planned for (Approach 2 groups by it), and
    # the measure it counts (scaling.train.counts.COMPUTE_MEASURES; empty: 6n_non_embedding, the
    # only measure before it was recorded).
    "budget", "budget_measure",
    # A run that is not a fit point: "validation" (it checks a fit's prediction; never fitted).
    "role",
    # Beyond the loss (scaling.train.metrics), at the final evaluation: per-token top-1 accuracy and
    # exact match of 1-, 4- and 16-token greedy continuations of fixed validation prompts, and the mean
    # log-probability (nats) of a 16-token continuation. Empty in stores from before they were recorded.
    "final_token_accuracy", *(f"final_exact_match_{k}" for k in TASK_KS), "final_continuation_logprob",
    # How much better the final model predicts in the second half of its context than from a few
    # tokens (nats; scaling.train.batches.context_use). Empty in stores from before it was recorded.
    "final_context_use",
)
# Types of metrics.jsonl fields; a record with another type is skipped on read.
METRIC_TYPES = {"step": int, "tokens": int, "lr": float, "train_loss": float, "val_loss": float,
                "val_bpb": float, "val_context_use": float, "elapsed_s": float, "tokens_per_s": float}


def naming(exc: OSError, path: Path) -> OSError:
    """The same error, naming the file being written rather than its temporary twin (or nothing)."""
    return OSError(exc.errno, exc.strerror, str(path)) if exc.errno else exc


def sync_dir(folder: Path) -> None:
    """fsync a folder, so that a rename in it survives a power cut, not only a kill."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _umask() -> int:
    mask = os.umask(0)   # the only way to read it is to set it; put it back at once
    os.umask(mask)
    return mask


# Temporary files end in this, so that cleaning them up never takes a user's own `.*.tmp` file.
TEMP_SUFFIX = ".scaling-tmp"
# mkstemp creates 0600 files; written files get what open() would give them (0666 less the umask).
FILE_MODE = 0o666 & ~_umask()


def dir_mode() -> int:
    """What mkdir would give a folder (0777 less the umask): mkdtemp's folders are 0700."""
    return 0o777 & ~_umask()


def write_temp(path: Path, data: bytes | str) -> Path:
    """`data` in a new temporary file beside `path`, complete and synced; its path. The pid in its
    name (.NAME.<pid>.XXXXXXXX.scaling-tmp): the next writer removes it when this process died
    (outputs.remove_leftovers). Nothing is left behind when the write fails."""
    path = Path(path)
    payload = data.encode() if isinstance(data, str) else data
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.{os.getpid()}.", suffix=TEMP_SUFFIX)
        os.fchmod(fd, FILE_MODE)
        with os.fdopen(fd, "wb") as f:
            faults.write(f"write:{path.name}", f, payload, path)
            f.flush()
            os.fsync(f.fileno())
    except OSError as exc:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        raise naming(exc, path) from exc
    return Path(tmp)


def write_atomic(path: Path, data: bytes | str) -> None:
    """Replace `path` with `data` so that readers see the old or the new file, never a mix."""
    path = Path(path)
    tmp = write_temp(path, data)
    try:
        faults.point(f"rename:{path.name}", path)
        os.replace(tmp, path)
        faults.point(f"renamed:{path.name}", path)
        sync_dir(path.parent)
    except OSError as exc:
        raise naming(exc, path) from exc
    finally:
        tmp.unlink(missing_ok=True)             # renamed already, unless the write failed


def check_output(folder: Path | str, names: Iterable[str] = ()) -> None:
    """Refuse, before any work, a folder a command could not write its files `names` into: a file
    or a link to nothing where the folder (or one above it) belongs, a folder not writable, or a
    folder where one of the files goes (a file cannot replace it). Found after the training, each
    is hours lost; checked here, nothing is created."""
    folder = Path(folder)
    existing = folder
    while not existing.exists():
        if existing.is_symlink():
            raise UsageError(f"{folder} is a link to nothing, not a folder" if existing == folder else
                             f"{folder} cannot be made: {existing} is a link to nothing")
        existing = existing.parent
    if not existing.is_dir():
        raise UsageError(f"{folder} is not a folder" if existing == folder else
                         f"{folder} cannot be made: {existing} is not a folder")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise UsageError(f"{existing} is not writable: {folder} cannot be written")
    for name in names:
        if (folder / name).is_dir() and not (folder / name).is_symlink():
            raise UsageError(f"{folder / name} is a folder: the file {name} cannot replace it")


def remove_temps(folder: Path) -> None:
    """Delete temporary files that a killed write_atomic left in `folder`; call it only while
    holding the lock that guards the folder's files, or a live writer's file goes too."""
    for tmp in Path(folder).glob(f".*{TEMP_SUFFIX}"):
        tmp.unlink(missing_ok=True)


BRANCH_CHECKPOINTS = "checkpoint-step*.pt"  # glob of the files branch_checkpoint names


def branch_checkpoint(step: int) -> str:
    """File name of a WSD stable run's checkpoint at branch point `step`."""
    return f"checkpoint-step{step}.pt"


def write_json(path: Path, obj: object) -> None:
    write_atomic(path, json.dumps(obj, indent=2, sort_keys=True) + "\n")


def append_jsonl(path: Path, record: dict) -> None:
    """Append one record as a single line; flushed so a kill loses at most this line."""
    try:
        with open(path, "a") as f:
            faults.write(f"append:{path.name}", f, json.dumps(record, sort_keys=True) + "\n", path)
            f.flush()
    except OSError as exc:
        raise naming(exc, path) from exc


def sync_file(path: Path) -> None:
    """fsync an appended file (metrics.jsonl before a checkpoint: the records it covers must last)."""
    if Path(path).exists():
        with open(path, "rb") as f:
            os.fsync(f.fileno())


def _well_formed(record: object) -> bool:
    """A JSON object whose known fields have their types (a number may be null: a NaN loss)."""
    if not isinstance(record, dict):
        return False
    for key, kind in METRIC_TYPES.items():
        value = record.get(key)
        if key == "step" and not (isinstance(value, int) and 0 <= value < 2**63):
            return False
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, kind))):
            return False
        if isinstance(value, int) and not finite_number(value):
            return False                # 10^400: beyond a float, an OverflowError downstream
    return True


def read_jsonl(path: Path) -> list[dict]:
    """Records of a metrics.jsonl (a regular file: `reading.open_regular`); a torn, corrupt or ill-typed
    line is skipped with a warning naming it."""
    records = []
    with io.TextIOWrapper(open_regular(path, "metrics"), encoding="utf-8", errors="replace") as f:
        for lineno, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                record = parse_json(line, f"{path}:{lineno}")
            except UsageError:
                warnings.warn(f"{path}:{lineno}: skipping a torn or corrupt line", stacklevel=2)
                continue
            if not _well_formed(record):
                warnings.warn(f"{path}:{lineno}: skipping a record that is not a metrics record "
                              f"(needs an integer 'step' and numbers in {', '.join(METRIC_TYPES)})",
                              stacklevel=2)
                continue
            records.append(record)
    return records


def read_summary(run_dir: Path) -> dict | None:
    """The run's summary.json, or None when the run has not ended (or never started)."""
    path = Path(run_dir) / SUMMARY
    if not path.exists():
        return None
    aside = "; move it aside to retrain that run"
    try:
        summary = read_json(path)
    except UsageError as exc:
        raise UsageError(f"{exc}{aside}") from None
    if not isinstance(summary, dict) or summary.get("status") not in STATUSES:
        raise UsageError(f"{path} is not a run summary (expected a JSON object whose 'status' is one of "
                         f"{', '.join(STATUSES)}){aside}")
    problem = _ill_typed(summary, Path(run_dir).name)
    if problem:
        raise UsageError(f"{path}: {problem}{aside}")
    return summary


# runs.csv's columns that hold text; every other column of TABLE_COLUMNS holds a number (or null).
TEXT_COLUMNS = ("run_id", "status", "reason", "retry_of", "branch_of", "budget_measure", "role")


def _ill_typed(summary: dict, folder: str) -> str | None:
    """What is wrong with a summary's table columns (a hand edit), or None: the run id is its
    folder's name, text columns hold text and the others numbers, each may be null but run_id."""
    if summary.get("run_id") != folder:
        return f"'run_id' must be the run folder's name {folder!r}, got {excerpt(summary.get('run_id'))}"
    for col in TABLE_COLUMNS:
        value = summary.get(col)
        if value is None:
            continue
        if col in TEXT_COLUMNS:
            ok = isinstance(value, str)
        else:    # NaN and infinities are a diverged run's; an int past a float's range is no number
            ok = isinstance(value, float) or finite_number(value)
        if not ok:
            return f"{col!r} must be {'text' if col in TEXT_COLUMNS else 'a number'} or null, got {excerpt(value)}"
    return None


def read_config(run_dir: Path) -> Any:
    """A run's config.yaml as Python values: a regular file, size-capped, bounded YAML
    (`scaling.reading`); UsageError naming it otherwise (a FIFO or /dev/zero is refused, not read)."""
    path = Path(run_dir) / CONFIG
    return parse_yaml(read_text(path, "run config"), str(path))


def run_dirs(sweep_dir: str | Path) -> list[Path]:
    """Run folders of a sweep (those with a config.yaml), sorted by name."""
    return sorted(p.parent for p in Path(sweep_dir).glob(f"*/{CONFIG}"))


def read_runs(sweep_dir: Path) -> pd.DataFrame:
    """One row per run folder, from summary.json; runs without one have status 'incomplete'."""
    sweep_dir = Path(sweep_dir)
    if not sweep_dir.is_dir():
        raise UsageError(f"no run store at {sweep_dir} (expected a folder runs/<sweep> made by `scaling sweep` or "
                         "`scaling import`)")
    rows = []
    for run_dir in run_dirs(sweep_dir):
        summary = read_summary(run_dir) or {"run_id": run_dir.name, "status": "incomplete",
                                            "reason": "no summary.json: interrupted or running"}
        rows.append({col: summary.get(col) for col in TABLE_COLUMNS})
    return pd.DataFrame(rows, columns=list(TABLE_COLUMNS))


def read_store(sweep_dir: Path) -> pd.DataFrame:
    """`read_runs` of a folder the user named as a run store: one with no run in it (empty, some
    other folder, or the root runs/ that holds the stores) is a mistake, refused naming it."""
    table = read_runs(sweep_dir)
    if table.empty:
        raise UsageError(not_a_store(Path(sweep_dir)))
    return table


def not_a_store(folder: Path) -> str:
    """Why `folder` is no run store: it holds no <run-id>/config.yaml; the stores below it, if it
    is a root such as runs/ (the folder `--runs-dir` names), so that the message says which to give."""
    stores = sorted({path.parent.parent for path in folder.glob(f"*/*/{CONFIG}")})
    if stores:
        listed = ", ".join(str(path) for path in stores[:5]) + (", ..." if len(stores) > 5 else "")
        return f"{folder} holds run stores, not runs: give one of them ({listed})"
    return (f"{folder} has no runs (no <run-id>/{CONFIG}): not a run store runs/<sweep> made by "
            "`scaling sweep` or `scaling import`")


def table_digest(table: pd.DataFrame) -> str:
    """sha256 of a run table as runs.csv holds it: what a fit records of the store it read, so a
    later command can tell the store has changed since (runs added, retrained or removed)."""
    return hashlib.sha256(table.to_csv(index=False).encode()).hexdigest()


def recorded_store(record: object, where: str) -> Path | None:
    """The run store a fit recorded ({"path": absolute, "digest": `table_digest`}), or None when
    that folder is gone; UsageError when the record is malformed or the store's runs have changed
    since the fit (its numbers would describe other runs)."""
    if not (isinstance(record, dict) and isinstance(record.get("path"), str) and isinstance(record.get("digest"), str)):
        raise UsageError(f"{where}: 'data.store' must be {{\"path\": str, \"digest\": str}}, got {excerpt(record)}")
    path = Path(record["path"])
    if not path.is_dir():
        return None
    if table_digest(read_runs(path)) != record["digest"]:
        raise UsageError(f"{where}: the run store {path} has changed since the fit (runs added, retrained or "
                         f"removed; its run table's digest differs): refit with `scaling fit {path}`")
    return path


def write_table(sweep_dir: Path) -> pd.DataFrame:
    """Rewrite runs/<sweep>/runs.csv from the summaries on disk and return it.

    Under the table lock: two sweeps finishing runs at once each read every summary written
    before their rewrite, so the last runs.csv written misses none of them.
    """
    sweep_dir = Path(sweep_dir)
    with locks.locked(sweep_dir / TABLE_LOCK):
        remove_temps(sweep_dir)
        table = read_runs(sweep_dir)
        write_atomic(sweep_dir / TABLE, table.to_csv(index=False))
    return table
