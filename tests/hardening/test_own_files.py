"""Issue 53: the tool deletes nothing it did not write, and changes no source it reads. A hand-made
journal in a fit's folder (naming a user's file, fit.json, or another writer's temporary) is refused
in one line and everything there left as it was; a side file that is a link is refused; `report
--out` refuses another fit's folder and a run store before any work; `fit --out` finds a folder
where its file goes, or a journal it cannot finish, before the fit; an MLflow sqlite file that is
empty, foreign, truncated or corrupt is refused in one line, its bytes unchanged."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
from pathlib import Path

import pytest

from scaling.cli import main
from tests.hardening.helpers import POINTS, contents, dead_pid, fit_table, refused


@pytest.fixture(scope="module")
def fitted(tmp_path_factory) -> Path:
    """A fit of a small table with 10 resamples (fit.json, fit.bootstrap.csv, fit.points.csv)."""
    return fit_table(tmp_path_factory.mktemp("fitted"), "fit", bootstrap=10).parent


def fit_copy(fitted: Path, tmp_path: Path) -> Path:
    folder = tmp_path / "fit"
    shutil.copytree(fitted, folder)
    (folder / "notes.txt").write_text("mine")
    return folder


def v2_journal(temp: str, data: bytes) -> str:
    """A journal in this package's format, replacing fit.json by `temp` (holding `data`)."""
    entry = {"temp": temp, "sha256": hashlib.sha256(data).hexdigest()}
    return json.dumps({"version": 2, "replace": {"fit.json": entry}, "remove": []})


# The journals, and others a folder received from someone may hold: each names a file the
# writer does not write, or a temporary not of its own writer, or is not a journal at all.
JOURNALS = {
    "removes a user's file": ('{"replace": {}, "remove": ["notes.txt"]}', None),
    "removes fit.json": ('{"replace": {}, "remove": ["fit.json"]}', None),
    "renames a foreign temporary over fit.json": ('{"replace": {"fit.json": ".fit.json.1.abcdefgh.scaling-tmp"}, '
                                                  '"remove": []}', ".fit.json.1.abcdefgh.scaling-tmp"),
    "v2, a temporary of another pid": (v2_journal(".fit.json.1.abcdefgh.scaling-tmp", b"{}"),
                                       ".fit.json.1.abcdefgh.scaling-tmp"),
    "v2, a temporary whose bytes it did not record": (v2_journal(".fit.json.999999.abcdefgh.scaling-tmp", b"other"),
                                                      ".fit.json.999999.abcdefgh.scaling-tmp"),
    "v2, removes a user's file": (json.dumps({"version": 2, "replace": {}, "remove": ["notes.txt"]}), None),
    "not JSON": ("{half a journal", None),
}


def crafted(folder: Path, case: str) -> dict:
    """`folder` with the journal `case` (and the temporary it names), and its contents."""
    text, temp = JOURNALS[case]
    if temp is not None:
        (folder / temp).write_text("{}")
    (folder / ".fit.bootstrap.csv.scaling-journal-999999").write_text(text)
    return contents(folder)


@pytest.mark.parametrize("case", JOURNALS)
def test_a_read_never_obeys_a_journal_that_is_not_scalings(fitted, tmp_path, capsys, case):
    folder = fit_copy(fitted, tmp_path)
    before = crafted(folder, case)
    refused(["plan", "--fit", folder, "--compute", "1e18"], capsys, "journal")   # was: notes.txt, fit.json deleted
    assert contents(folder) == before


@pytest.mark.parametrize("case", ["removes a user's file", "not JSON", "v2, a temporary whose bytes it did not record"])
def test_a_fit_refuses_a_journal_it_cannot_finish_before_fitting(fitted, tmp_path, capsys, case):
    folder = fit_copy(fitted, tmp_path)
    before = crafted(folder, case)
    (tmp_path / "two.csv").write_text("N,D,loss\n1e6,1e8,3\n1e7,1e9,2.5\n")    # too few points: a fit would refuse them
    refused(["fit", "--csv", tmp_path / "two.csv", "--bootstrap", "0", "--out", folder], capsys, "journal")
    assert contents(folder) == before


def test_a_fit_finds_a_folder_where_its_points_go_before_fitting(tmp_path, capsys):
    (tmp_path / "out" / "fit.points.csv").mkdir(parents=True)
    (tmp_path / "two.csv").write_text("N,D,loss\n1e6,1e8,3\n1e7,1e9,2.5\n")
    refused(["fit", "--csv", tmp_path / "two.csv", "--bootstrap", "0", "--out", tmp_path / "out"], capsys,
            "fit.points.csv is a folder")      # was: after the whole fit (27 minutes at 100,000 points)


@pytest.mark.parametrize("side", ["fit.points.csv", "fit.bootstrap.csv"])
def test_a_side_file_that_is_a_link_is_refused(fitted, tmp_path, capsys, side):
    folder = fit_copy(fitted, tmp_path)
    (tmp_path / side).write_bytes((folder / side).read_bytes())            # the same bytes, through a link
    (folder / side).unlink()
    (folder / side).symlink_to(tmp_path / side)
    before = contents(folder)
    refused(["plan", "--fit", folder, "--compute", "1e18"], capsys, f"{side} is a link")
    assert contents(folder) == before


def test_a_link_to_fit_json_reads_the_side_files_beside_its_target(fitted, tmp_path, capsys):
    (tmp_path / "best.json").symlink_to(fitted / "fit.json")
    assert main(["plan", "--fit", str(tmp_path / "best.json"), "--compute", "1e18"]) == 0


def fake_store(folder: Path) -> None:
    (folder / "run-1").mkdir(parents=True)
    (folder / "run-1" / "config.yaml").write_text("run_id: run-1\n")
    (folder / "runs.csv").write_text("run_id\nrun-1\n")


@pytest.mark.parametrize("target", ["another fit's folder", "a link to it", "a run store", "a folder of stores"])
def test_report_out_refuses_a_folder_that_is_not_a_reports(fitted, tmp_path, capsys, target):
    other = fit_copy(fitted, tmp_path)                      # cp -r F G
    out = {"another fit's folder": other, "a link to it": tmp_path / "link", "a run store": tmp_path / "store",
           "a folder of stores": tmp_path / "runs"}[target]
    if target == "a link to it":
        out.symlink_to(other)
    elif target != "another fit's folder":
        fake_store(out / "sweep" if target == "a folder of stores" else out)
    before = contents(out)
    refused(["report", fitted, "--out", out], capsys, "holds a run store" if "store" in target else "holds fit.json")
    assert contents(out) == before and contents(other) == contents(fitted) | {"notes.txt": contents(other)["notes.txt"]}


def test_fit_out_refuses_a_run_store(tmp_path, capsys):
    fake_store(tmp_path / "store")
    (tmp_path / "points.csv").write_text(POINTS)
    before = contents(tmp_path / "store")
    refused(["fit", "--csv", tmp_path / "points.csv", "--bootstrap", "0", "--out", tmp_path / "store"], capsys,
            "holds a run store")
    assert contents(tmp_path / "store") == before


def test_a_refit_keeps_a_journal_of_another_set_and_its_temporaries(fitted, tmp_path):
    folder = fit_copy(fitted, tmp_path)
    pid = dead_pid()
    foreign = [folder / f".notes.txt.scaling-journal-{pid}", folder / f".notes.txt.{pid}.abcdefgh.scaling-tmp"]
    for path in foreign:
        path.write_text("another writer's")
    fit_table(tmp_path, "fit", bootstrap=10)
    assert all(path.exists() for path in foreign) and (folder / "notes.txt").read_text() == "mine"


# --------------------------------------------------------------------------------------------
# An MLflow tracking database is read, never written


def tracking_tables(database: Path) -> Path:
    """A sqlite file with MLflow's table names and a few thousand rows (pages to damage): what the
    read-only check reads before MLflow's client opens anything."""
    with sqlite3.connect(database) as db:
        for table in ("alembic_version", "experiments", "runs", "metrics", "params"):
            db.execute(f"CREATE TABLE {table} (value)")
        db.executemany("INSERT INTO metrics VALUES (?)", [(f"row {i}",) for i in range(4000)])
    db.close()
    return database


def damaged(database: Path, how: str) -> bytes:
    data = database.read_bytes()
    return {"empty": b"", "header only": data[:16], "first page only": data[:4096], "truncated": data[:len(data) // 2],
            "pages overwritten": data[:8192] + b"\xa5" * (len(data) - 8192)}[how]


@pytest.mark.parametrize("how, expected", [("empty", "not a sqlite database"),
                                           ("header only", "not a readable sqlite database"),
                                           ("first page only", "sqlite database"),
                                           ("truncated", "sqlite database"),
                                           ("pages overwritten", "sqlite database"),
                                           ("foreign", "not an MLflow tracking store"),
                                           ("foreign, in WAL mode", "not an MLflow tracking store")])
def test_an_mlflow_database_that_is_not_whole_or_not_mlflows_is_refused_unchanged(tmp_path, capsys, how, expected):
    src = tmp_path / "mlflow.db"
    if how.startswith("foreign"):
        with sqlite3.connect(src) as db:
            db.execute("PRAGMA journal_mode = WAL" if "WAL" in how else "PRAGMA journal_mode = DELETE")
            db.execute("CREATE TABLE notes (text)")
        db.close()
    else:
        src.write_bytes(damaged(tracking_tables(tmp_path / "whole.db"), how))
        (tmp_path / "whole.db").unlink()
    before = contents(tmp_path)
    refused(["import", "mlflow", src, "--runs-dir", tmp_path / "imp"], capsys, expected)
    # was: set up as a new store; read-only, a WAL database still gained -wal and -shm files beside it
    assert contents(tmp_path) == before and os.listdir(tmp_path) == ["mlflow.db"]
