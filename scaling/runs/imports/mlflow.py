"""An MLflow store, read with MLflow's own client (the `mlflow` extra: mlflow-skinny, and the
SQLAlchemy, Alembic and sqlparse its SQL store needs): a file store (`mlruns/`), or a tracking
database in a sqlite file (`mlflow.db`, what `--backend-store-uri sqlite:///mlflow.db` writes).

An import is a read, and the source stays as it was to the byte. MLflow's SQL store opens its
database read-write and sets it up (creates its tables, a default experiment) where they are
missing, and even a read-only sqlite connection leaves -wal and -shm files beside a database in
WAL mode, so a sqlite file is only read, as bytes, into a copy in a temporary folder; the copy is
checked whole and to hold MLflow's tables, and MLflow's client opens it. A sqlite file that is
not whole (corrupt, truncated, a header only) or not MLflow's is refused in one line.

Every run of every experiment, named "<experiment>/<run name>"; its params are the hyperparameters
(MLflow keeps them as text), its metrics' full histories the scalars. MLflow 3 refuses a file
store unless MLFLOW_ALLOW_FILE_STORE is set: it is set for the read only, which writes nothing.
A run still RUNNING is an error (its curve is not done; import once it ends); a FAILED or
KILLED one is kept, not fitted.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import sqlite3
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from scaling.errors import UsageError
from scaling.runs.imports.source import SourceRun, needs

if TYPE_CHECKING:
    from mlflow.entities import Run
    from mlflow.tracking import MlflowClient

ALLOW = "MLFLOW_ALLOW_FILE_STORE"
SQLITE_HEADER = b"SQLite format 3\x00"
TRASH = ".trash"
# The tables every MLflow tracking database has (its schema's oldest): without them a sqlite file
# is another program's, which MLflow's client would set up as a new, empty store.
MLFLOW_TABLES = {"alembic_version", "experiments", "runs", "metrics", "params"}


@contextmanager
def _file_store_allowed(src: Path) -> Iterator[None]:
    """MLflow's client on the file store `src`, allowed, leaving it as it was: the client's
    FileStore creates `src/.trash` on opening, which an import (a read) must not leave behind."""
    before, trash = os.environ.get(ALLOW), src / TRASH
    had_trash = trash.exists() or trash.is_symlink()
    os.environ[ALLOW] = "true"
    try:
        yield
    finally:
        if before is None:
            del os.environ[ALLOW]
        else:
            os.environ[ALLOW] = before
        if not had_trash and trash.is_dir() and not trash.is_symlink() and not any(trash.iterdir()):
            trash.rmdir()


def _all_runs(client: MlflowClient, experiment_id: str) -> Iterator[Run]:
    """Every active run of an experiment, page by page (a search returns 1,000 at most)."""
    token = None
    while True:
        page = client.search_runs([experiment_id], max_results=1000, page_token=token)
        yield from page
        token = page.token
        if not token:
            return


def _copy_database(src: Path, folder: Path) -> Path:
    """The sqlite file `src` (and its write-ahead log, where there is one) copied byte for byte into
    `folder`, then checked whole and MLflow's there; UsageError naming what it is not. The copy,
    not the source, is what sqlite opens: even a read-only connection leaves -wal and -shm files
    beside a database in WAL mode, and MLflow's client writes to what it opens."""
    copy = folder / "mlflow.db"
    shutil.copyfile(src, copy)
    if Path(f"{src}-wal").is_file():
        shutil.copyfile(f"{src}-wal", f"{copy}-wal")     # the transactions not yet in the file itself
    try:
        with contextlib.closing(sqlite3.connect(copy)) as db:
            tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            damage = [row[0] for row in db.execute("PRAGMA quick_check") if row[0] != "ok"]
    except sqlite3.Error as exc:
        raise UsageError(f"{src}: not a readable sqlite database ({exc})") from None
    if damage:
        raise UsageError(f"{src}: a damaged sqlite database ({damage[0]}); not imported")
    if not MLFLOW_TABLES <= tables:
        raise UsageError(f"{src}: a sqlite database, but not an MLflow tracking store (no "
                         f"{', '.join(sorted(MLFLOW_TABLES - tables))} table)")
    return copy


@contextmanager
def _tracking_uri(src: Path) -> Iterator[str]:
    """The URI MLflow's client opens `src` by: a read-only sqlite file's copy, or a file store's folder."""
    if not src.is_file():
        if not (src / "0").is_dir() and not list(src.glob("*/meta.yaml")):
            raise UsageError(f"{src}: not an MLflow file store (no <experiment-id>/meta.yaml)")
        yield src.resolve().as_uri()
        return
    with src.open("rb") as f:
        if f.read(16) != SQLITE_HEADER:
            raise UsageError(f"{src}: not an MLflow store (a file store is a folder; this file is not a "
                             f"sqlite database)")
    needs("sqlalchemy", "mlflow")     # the SQL store's own dependencies, in the extra
    needs("alembic", "mlflow")
    with tempfile.TemporaryDirectory(prefix="scaling-mlflow-") as folder:
        yield f"sqlite:///{_copy_database(src, Path(folder))}"


def _failures(src: Path) -> tuple[type[Exception], ...]:
    """What MLflow's client raises on a damaged store: its own error, and for a database SQLAlchemy's
    (a table of MLflow's name with other columns) and Alembic's (a schema version it does not know)."""
    failures = (needs("mlflow.exceptions", "mlflow").MlflowException,)
    if not src.is_file():
        return failures
    return (*failures, needs("sqlalchemy.exc", "mlflow").SQLAlchemyError, needs("alembic.util", "mlflow").CommandError)


@contextmanager
def _quiet() -> Iterator[None]:
    """MLflow's INFO lines (a database's tables being set up, in the copy) kept off the output."""
    logger = logging.getLogger("mlflow")
    level = logger.level
    logger.setLevel(logging.WARNING)
    try:
        yield
    finally:
        logger.setLevel(level)


def read(src: Path) -> list[SourceRun]:
    """The runs of the store `src`: a file store's folder or a sqlite database file."""
    tracking = needs("mlflow.tracking", "mlflow")
    failures = _failures(src)
    with _tracking_uri(src) as uri, _file_store_allowed(src), _quiet():
        try:
            return _read_runs(tracking.MlflowClient(tracking_uri=uri, registry_uri=uri))
        except failures as exc:       # a damaged store (garbage meta.yaml, a metric line not "time value step")
            raise UsageError(f"{src}: not a readable MLflow store ({' '.join(str(exc).split())[:200]})") from None


def _read_runs(client: MlflowClient) -> list[SourceRun]:
    """Every run of every experiment the client sees."""
    runs = []
    for experiment in client.search_experiments():
        for run in _all_runs(client, experiment.experiment_id):
            info = run.info
            if info.status in ("RUNNING", "SCHEDULED"):
                raise UsageError(f"MLflow run {info.run_name!r} ({info.run_id}) of experiment "
                                 f"{experiment.name!r} is still {info.status}; import once it has ended")
            scalars = {key: [(m.step, m.value) for m in client.get_metric_history(info.run_id, key)]
                       for key in run.data.metrics}
            runs.append(SourceRun(
                name=f"{experiment.name}/{info.run_name or info.run_id}", params=dict(run.data.params),
                scalars=scalars, problem=None if info.status == "FINISHED" else f"MLflow status {info.status}",
                origin={"experiment": experiment.name, "run_id": info.run_id},
                wall_s=(info.end_time - info.start_time) / 1e3 if info.end_time and info.start_time else None))
    return runs
