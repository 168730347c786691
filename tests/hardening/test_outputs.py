"""Issue 43: every output is written as one unit inside its folder. A report never writes through
a link in its output folder; a kill or a full disk leaves the old report or the new one, never a
mix, and the next run removes what the killed one left; two reports into one folder leave one of
them whole; a fit refuses a folder where its files go before writing any."""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from scaling.cli import main
from scaling.laws.results import fit_file
from scaling.runs.journal import settle
from tests.conftest import MICRO
from tests.hardening.helpers import ROOT, contents, dead_pid, fit_table, refused, run_cli


@pytest.fixture(scope="module")
def fits(tmp_path_factory) -> dict:
    """Two fits of a table (the second with 20 resamples) and a clean report of each:
    {name: (fit.json, its report's folder, the report's contents)}."""
    tmp = tmp_path_factory.mktemp("fits")
    made = {"plain": fit_table(tmp, "plain"), "boot": fit_table(tmp, "boot", bootstrap=20)}
    for name, fit in made.items():
        assert main(["report", str(fit.parent), "--out", str(tmp / f"clean-{name}")]) == 0
    return {name: (fit, tmp / f"clean-{name}", contents(tmp / f"clean-{name}")) for name, fit in made.items()}


def test_a_figures_link_in_the_output_is_replaced_not_written_through(fits, tmp_path):
    elsewhere, out = tmp_path / "elsewhere", tmp_path / "report"
    elsewhere.mkdir()
    out.mkdir()
    (out / "figures").symlink_to(elsewhere)
    (out / "notes.txt").write_text("mine")
    fit, _, clean = fits["plain"]
    assert main(["report", str(fit.parent), "--out", str(out)]) == 0
    assert list(elsewhere.iterdir()) == []                          # was: 10 figures written there
    assert not (out / "figures").is_symlink()
    assert contents(out) == {**clean, "notes.txt": contents(out)["notes.txt"]}
    assert (out / "notes.txt").read_text() == "mine"                 # a user's file is kept


def test_a_killed_report_leaves_the_old_one_and_the_next_run_cleans_up(fits, tmp_path):
    out = tmp_path / "report"
    _, old, clean_plain = fits["plain"]
    boot, _, clean_boot = fits["boot"]
    shutil.copytree(old, out)
    (out / ".report.md.abcdefgh.scaling-tmp").write_text("a killed write's, from before pids were in names")
    killed = run_cli(["report", boot.parent, "--out", out], env={"SCALING_FAULT": "kill_at=write:final_loss.png:1"})
    assert killed.returncode == -9
    assert {k: v for k, v in contents(out).items() if "scaling-tmp" not in k} == clean_plain    # the old set
    left = [p.name for p in tmp_path.iterdir() if p.name != "report"]
    assert len(left) == 1 and left[0].startswith(".report.scaling-tmp-"), left
    assert main(["report", str(boot.parent), "--out", str(out)]) == 0
    assert contents(out) == clean_boot                               # no leftover, bytes as a clean run's
    assert [p.name for p in tmp_path.iterdir()] == ["report"]


def test_a_full_disk_during_a_report_leaves_the_old_one(fits, tmp_path, monkeypatch, capsys):
    out = tmp_path / "report"
    _, old, clean_plain = fits["plain"]
    boot, _, _ = fits["boot"]
    shutil.copytree(old, out)
    monkeypatch.setenv("SCALING_FAULT", "oserror_at=write:report.md:1,errno=ENOSPC")
    refused(["report", boot.parent, "--out", out], capsys, "No space left on device")
    assert contents(out) == clean_plain                              # was: 5 of 12 files replaced
    assert [p.name for p in tmp_path.iterdir()] == ["report"]


def test_two_reports_into_one_folder_at_once_leave_one_of_them_whole(fits, tmp_path):
    out = tmp_path / "report"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    both = [subprocess.Popen([sys.executable, "-m", "scaling", "report", str(fits[name][0].parent), "--out", str(out)],
                             cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            for name in ("plain", "boot")]
    assert [p.wait(timeout=120) for p in both] == [0, 0]
    assert contents(out) in (fits["plain"][2], fits["boot"][2])      # was: the two fits' figures mixed


def test_a_fit_refuses_a_folder_where_fit_json_goes_before_writing_a_side_file(tmp_path, capsys):
    (tmp_path / "fit" / "fit.json").mkdir(parents=True)
    (tmp_path / "points.csv").write_text("N,D,loss\n" + "".join(
        f"{n},{d},{2 + 1e3 / n ** 0.3 + 1e3 / d ** 0.3}\n" for n in (1e6, 1e7, 1e8) for d in (1e8, 1e9)))
    refused(["fit", "--csv", tmp_path / "points.csv", "--n-col", "N", "--d-col", "D", "--loss-col", "loss",
             "--bootstrap", "10", "--out", tmp_path / "fit"], capsys, "fit.json is a folder")
    assert [p.name for p in (tmp_path / "fit").iterdir()] == ["fit.json"]   # was: fit.bootstrap.csv beside it


def test_a_refit_removes_the_temporary_files_of_a_killed_fit_and_keeps_a_live_writers(tmp_path):
    fit = fit_table(tmp_path, "fit", bootstrap=10)
    folder = fit.parent
    dead = [folder / f".fit.bootstrap.csv.{dead_pid()}.k2lq9x_a.scaling-tmp",
            folder / ".fit.json.abcdefgh.scaling-tmp"]                  # a pid of a run that ended; none
    live = folder / f".fit.json.{os.getppid()}.abcdefgh.scaling-tmp"      # a live process's write
    for path in (*dead, live):
        path.write_text("half a file")
    fit_table(tmp_path, "fit", bootstrap=10)
    assert not any(p.exists() for p in dead) and live.exists()


@pytest.fixture(scope="module")
def two_fits(tmp_path_factory) -> dict:
    """The files of two fits of one table (10 and 20 resamples): {name: (fit.json, {file: sha256})}."""
    tmp = tmp_path_factory.mktemp("two-fits")
    made = {"old": fit_table(tmp, "old", bootstrap=10), "new": fit_table(tmp, "new", bootstrap=20)}
    return {name: (fit, contents(fit.parent)) for name, fit in made.items()}


# Where a kill falls in `scaling fit`'s write, in order: a side file half written, fit.json half
# written (every side file complete), then after the journal's commit each rename of the set.
BEFORE_COMMIT = ("write:fit.bootstrap.csv", "write:fit.json")
AFTER_COMMIT = ("rename:fit.bootstrap.csv", "renamed:fit.bootstrap.csv", "renamed:fit.points.csv", "renamed:fit.json")


@pytest.mark.parametrize("site", BEFORE_COMMIT + AFTER_COMMIT)
def test_a_fit_killed_at_any_step_leaves_the_old_fit_or_the_new_one(two_fits, tmp_path, site):
    folder = tmp_path / "fit"
    shutil.copytree(two_fits["old"][0].parent, folder)
    table = two_fits["new"][0].parents[1] / "new.csv"            # the table the new fit was made of
    killed = run_cli(["fit", "--csv", table, "--n-col", "N", "--d-col", "D", "--loss-col", "loss",
                      "--bootstrap", "20", "--out", folder], env={"SCALING_FAULT": f"kill_at={site}:1"})
    assert killed.returncode == -9, killed.stderr
    left = contents(folder)
    loaded = fit_file.load_fit(folder)              # was, killed between two renames: "belongs to another fit"
    assert loaded.options.bootstrap == (10 if site in BEFORE_COMMIT else 20)     # the old set, or the committed new one
    assert contents(folder) == left                 # read through the journal: the reader renamed nothing
    fit_file.write_fit(folder, fit_file.load_fit(two_fits["new"][0]))    # the next fit finishes and cleans up
    assert contents(folder) == two_fits["new"][1]


def test_a_journal_that_names_a_users_file_is_refused_and_the_file_kept(two_fits, tmp_path, capsys):
    folder = tmp_path / "fit"
    shutil.copytree(two_fits["old"][0].parent, folder)
    (folder / "notes.txt").write_text("mine")
    journal = folder / f".fit.json.scaling-journal-{dead_pid()}"
    journal.write_text('{"replace": {"fit.json": "notes.txt"}, "remove": []}')   # not a temporary of fit.json
    refused(["plan", "--fit", folder, "--compute", "1e21"], capsys, "is not a journal of scaling's writes")
    assert (folder / "notes.txt").read_text() == "mine"
    assert contents(folder)["fit.json"] == two_fits["old"][1]["fit.json"]


# --------------------------------------------------------------------------------------------
# tune.json, the tuned config and the figure: one unit, as a fit's files

TUNED_PAIR = ("micro-tuned.yaml", "tune.json")
TUNE_FIGURE = ("tune.png", "tune.svg")


def tune_argv(config: Path, lrs: str, runs: Path, cache: Path, out: Path) -> list:
    return ["tune", config, "--lrs", lrs, "--tokens", "256", "--runs-dir", runs, "--cache-dir", cache, "--out", out]


def pair_of(folder: Path, written_in: Path | None = None) -> dict:
    """The text of tune's two files in `folder`; with `written_in`, as they would read had they
    been written there (both name their own folder)."""
    texts = {name: (folder / name).read_text() for name in TUNED_PAIR}
    return texts if written_in is None else {k: v.replace(str(folder), str(written_in)) for k, v in texts.items()}


def set_of(folder: Path, written_in: Path | None = None) -> dict:
    """`pair_of` and the figure's bytes' digests: tune's whole set of files."""
    figure = {name: hashlib.sha256((folder / name).read_bytes()).hexdigest() for name in TUNE_FIGURE}
    return {**pair_of(folder, written_in), **figure}


@pytest.fixture(scope="module")
def two_tunings(tmp_path_factory, cache_dir) -> dict:
    """A micro config tuned at two sets of rates (3 tiny runs each) into one run store:
    {"config", "runs", "old", "new": each one's output folder}."""
    tmp = tmp_path_factory.mktemp("two-tunings")
    config = tmp / "micro.yaml"
    config.write_text(yaml.safe_dump({**MICRO, "grid": {**MICRO["grid"], "models": MICRO["grid"]["models"][:1]}}))
    made = {"config": config, "runs": tmp / "runs"}
    for name, lrs in (("old", "3e-3,1e-2,3e-2"), ("new", "2e-3,6e-3,2e-2")):
        assert main([str(a) for a in tune_argv(config, lrs, tmp / "runs", cache_dir, tmp / name)]) == 0
        made[name] = tmp / name
    return made


# Where a kill falls in `scaling tune`'s write, in order: tune.json or the figure half written (the files
# before it complete), then after the journal's commit: before any rename, and between them (the figure
# was written outside the unit: a kill after tune.json's rename left the old figure beside the new pair).
# (The SVG is written and renamed just as the PNG is; one of the two figures is killed at.)
TUNE_BEFORE_COMMIT = ("write:tune.json", "write:tune.png")
TUNE_AFTER_COMMIT = ("rename:micro-tuned.yaml", "renamed:micro-tuned.yaml", "renamed:tune.json")


@pytest.mark.parametrize("site", TUNE_BEFORE_COMMIT + TUNE_AFTER_COMMIT)
def test_a_tune_killed_at_any_step_leaves_the_old_pair_or_the_new_one(two_tunings, cache_dir, tmp_path, site):
    out = tmp_path / "tune"
    shutil.copytree(two_tunings["old"], out)
    argv = tune_argv(two_tunings["config"], "2e-3,6e-3,2e-2", two_tunings["runs"], cache_dir, out)
    killed = run_cli(argv, env={"SCALING_FAULT": f"kill_at={site}:1"})    # its runs trained: it only writes
    assert killed.returncode == -9, killed.stderr
    settle(out, {*TUNED_PAIR, *TUNE_FIGURE})    # what the next writer does first: finish a committed set
    new = set_of(two_tunings["new"], written_in=out)
    expected = set_of(two_tunings["old"]) if site in TUNE_BEFORE_COMMIT else new      # the old set: copied
    assert set_of(out) == expected                      # was, killed after the config's rename: new config, old json
    assert main([str(a) for a in argv]) == 0                                 # the next tune cleans up
    assert set_of(out) == new
    assert not [p.name for p in out.iterdir() if p.name.startswith(".")]


def test_a_stopped_tune_says_how_to_resume_and_writes_nothing(two_tunings, cache_dir, tmp_path):
    out = tmp_path / "tune"
    argv = tune_argv(two_tunings["config"], "1e-3,4e-3,1.6e-2", two_tunings["runs"], cache_dir, out)
    stopped = run_cli(argv, env={"SCALING_FAULT": "kill_at=step:1,signal=SIGTERM"})    # a stop request, as Ctrl-C
    assert stopped.returncode == 128 + signal.SIGTERM, stopped.stderr
    assert "stopped; finished runs are kept: the same `scaling tune` command resumes" in stopped.stdout
    assert not out.exists()
