"""Write imported runs as a run store, the files a sweep writes, so `scaling fit`, `report` and
the curve fits read it as one of ours:

    <run-id>/config.yaml      the source run's hyperparameters, and where it came from (`imported`)
    <run-id>/metrics.jsonl    its curve: step, tokens, val_loss at every logged evaluation
    <run-id>/summary.json     status, N (in the column of its parameter convention), D, final loss
    runs.csv

Every source run becomes a run; one without N, D or a loss is 'failed' with the reason, so the
fit lists it rather than guessing. The store is built in a temporary folder beside its place and
renamed into it once complete: an import that fails leaves nothing, and never adds runs to a
store that has some.
"""

from __future__ import annotations

import re
import shutil
import stat
from dataclasses import dataclass
from importlib import import_module
from pathlib import Path

import yaml

from scaling.errors import UsageError
from scaling.runs import store
from scaling.runs.imports.resolve import Names, Resolved, choose_names, resolve
from scaling.runs.imports.source import KINDS, SourceRun, plain
from scaling.runs.outputs import remove_leftovers, temp_name

PARAM_COLUMNS = {"total": "n_params_total", "non_embedding": "n_params_non_embedding"}
# An imported run's compute: 6 N D of its own N (the count a table carries), in the column of
# that convention (runs.csv's flops_6n_total or flops_6nd).
FLOPS_COLUMNS = {"total": "flops_6n_total", "non_embedding": "flops_6nd"}


@dataclass(frozen=True)
class ImportResult:
    """The store written, the names N, D and the loss were read by, and each run by its new id."""

    sweep_dir: Path
    names: Names
    runs: tuple  # (run_id, Resolved)

    @property
    def listed(self) -> list[tuple[str, Resolved]]:
        """The runs that are not fit points, with their reasons."""
        return [(run_id, r) for run_id, r in self.runs if r.status != "finished"]


def read_source(kind: str, src: str | Path, run_key: str | None = None) -> list[SourceRun]:
    """The runs of a log of `kind` at `src`, read by its own reader (scaling.runs.imports.<kind>)."""
    if kind not in KINDS:
        raise UsageError(f"unknown kind of log {kind!r}; known: {', '.join(KINDS)}")
    if run_key is not None and kind != "csv":
        raise UsageError("a run key names a column of a CSV table; other logs name their own runs")
    src = Path(src)
    if not src.exists():
        raise UsageError(f"{src} does not exist")
    check_source_files(src)
    reader = import_module(f"scaling.runs.imports.{kind}")
    try:
        return reader.read(src, run_key) if kind == "csv" else reader.read(src)
    except (ValueError, TypeError, KeyError, OverflowError, yaml.YAMLError) as exc:
        # A malformed value a reader's library met (a JSON list for an object, a number past a
        # float, garbage YAML): the source is damaged, said in one line, not a traceback.
        raise UsageError(f"{src}: not a readable {kind} log ({type(exc).__name__}: "
                         f"{' '.join(str(exc).split())[:200]})") from None


def check_source_files(src: Path) -> None:
    """Refuse a source holding a FIFO, a device or a link to nothing where a file belongs: a
    reader would wait on it forever or read /dev/zero until memory runs out."""
    for path in [src, *(sorted(src.rglob("*")) if src.is_dir() else ())]:
        try:
            mode = path.stat().st_mode
        except OSError as exc:
            raise UsageError(f"cannot read {path}: {exc.strerror}") from None
        if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
            raise UsageError(f"cannot read {path}: not a regular file (a FIFO, a device or a socket)")


def run_ids(runs: list[SourceRun]) -> list[str]:
    """Folder names for the runs: their source names, made safe, numbered where two coincide."""
    ids, seen = [], set()
    for run in runs:
        base = re.sub(r"[^A-Za-z0-9._-]+", "-", run.name).strip("-.") or "run"
        run_id, k = base, 2
        while run_id in seen:
            run_id, k = f"{base}-{k}", k + 1
        seen.add(run_id)
        ids.append(run_id)
    return ids


def _whole(x: float | None) -> float | int | None:
    return int(x) if x is not None and float(x).is_integer() else x


def _write_run(run_dir: Path, run_id: str, r: Resolved, kind: str, src: Path, names: Names,
               param_convention: str) -> None:
    run_dir.mkdir()
    used = {k: v for k, v in vars(names).items() if v is not None}
    config = {"run_id": run_id,
              "imported": {"kind": kind, "source": str(src.resolve()), "run": r.run.name, **r.run.origin,
                           "names": used, "param_convention": param_convention},
              "hyperparameters": {k: plain(v) for k, v in r.run.params.items()}}
    store.write_atomic(run_dir / store.CONFIG, yaml.safe_dump(config, sort_keys=False))
    for record in r.curve:
        store.append_jsonl(run_dir / store.METRICS, record)
    store.sync_file(run_dir / store.METRICS)
    store.write_json(run_dir / store.SUMMARY, {
        "run_id": run_id, "status": r.status, "reason": r.reason,
        PARAM_COLUMNS[param_convention]: _whole(r.n), "tokens": _whole(r.tokens),
        FLOPS_COLUMNS[param_convention]: 6.0 * r.n * r.tokens if r.n and r.tokens else None,
        "wall_s": r.run.wall_s,
        "final_val_loss": r.curve[-1]["val_loss"] if r.status == "finished" else None,
        "imported_from": kind, "source_run": r.run.name})


def import_runs(kind: str, src: str | Path, sweep_dir: str | Path, names: Names = Names(), *,
                param_convention: str = "total", run_key: str | None = None) -> ImportResult:
    """Read the runs of a log and write them as the run store `sweep_dir` (a new or empty folder).

    param_convention: what the source's N counts ('total': embeddings included, the fit's
    default; or 'non_embedding'). Bad input (no loss, no N, names mixed between runs, a damaged
    or unfinished log) raises UsageError before anything is written.
    """
    if param_convention not in PARAM_COLUMNS:
        raise UsageError(f"the parameter convention must be one of {', '.join(PARAM_COLUMNS)}; "
                         f"got {param_convention!r}")
    sweep_dir = Path(sweep_dir)
    if sweep_dir.exists() and (not sweep_dir.is_dir() or any(sweep_dir.iterdir())):
        raise UsageError(f"{sweep_dir} already exists and is not an empty folder; import into a new one")
    src = Path(src)
    runs = sorted(read_source(kind, src, run_key), key=lambda r: r.name)
    if not runs:
        raise UsageError(f"{src} holds no {kind} runs: nothing to import")
    if not any(run.scalars for run in runs):        # a log truncated to nothing: no store of empty runs
        raise UsageError(f"{src} holds no logged values (its {kind} runs have no records): nothing to import")
    names = choose_names(runs, names)
    resolved = [resolve(run, names) for run in runs]
    ids = run_ids(runs)
    sweep_dir.parent.mkdir(parents=True, exist_ok=True)
    remove_leftovers(sweep_dir.parent, {sweep_dir.name})    # this store's killed imports' folders, no other's
    building = temp_name(sweep_dir, "importing")
    if building.exists():                   # left by a killed import of this process id
        shutil.rmtree(building)
    building.mkdir()
    try:
        for run_id, r in zip(ids, resolved):
            _write_run(building / run_id, run_id, r, kind, src, names, param_convention)
        store.write_table(building)
        building.replace(sweep_dir)
        store.sync_dir(sweep_dir.parent)
    finally:
        if building.exists():
            shutil.rmtree(building)
    return ImportResult(sweep_dir, names, tuple(zip(ids, resolved)))
