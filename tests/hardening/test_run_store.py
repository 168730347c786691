"""Issue 43: a run store's files and validate.json read through the bounded reader. A run's
config.yaml that is a FIFO or /dev/zero is refused or passed over, never waited on or read until
memory runs out; a folder where a file belongs is named (not "Is a directory: 3"); numbers past a
float's range and a hand-edited parameter count are one line; a validate.json that is a link loop
is refused, not skipped."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from scaling.cli import main
from scaling.runs import store
from tests.hardening.helpers import deadline, fit_table, run_cli


def one_line_or_done(argv, capsys) -> tuple[int, str]:
    """Run `argv`: exit 0, or exit 2 with one line and no traceback."""
    code = main([str(a) for a in argv])
    err = capsys.readouterr().err
    assert code in (0, 2) and "Traceback" not in err, err
    assert code == 0 or len(err.strip().splitlines()) == 1, err
    return code, err


@pytest.fixture
def runs(micro_sweep, tmp_path) -> Path:
    """A copy of the session's micro sweep to damage."""
    _, result = micro_sweep
    copy = tmp_path / "runs" / "micro"
    shutil.copytree(result.sweep_dir, copy, ignore=shutil.ignore_patterns(store.LOCK, store.TABLE_LOCK))
    return copy


def first_run(runs: Path) -> Path:
    return store.run_dirs(runs)[0]


@pytest.mark.parametrize("kind", ["fifo", "/dev/zero"])
def test_a_runs_config_yaml_that_is_a_fifo_or_a_device_never_hangs_fit_or_report(runs, tmp_path, capsys, kind):
    config = first_run(runs) / store.CONFIG
    config.unlink()
    os.mkfifo(config) if kind == "fifo" else config.symlink_to("/dev/zero")
    with deadline(60):                                   # was: killed after 60-300 s, or a MemoryError
        for argv in (["fit", runs, "--bootstrap", "0", "--out", tmp_path / "fit"],
                     ["fit", runs, "--bootstrap", "0", "--curves", "--out", tmp_path / "curves"],
                     ["report", runs, "--bootstrap", "0", "--out", tmp_path / "report"]):
            code, err = one_line_or_done(argv, capsys)
            assert code == 0 or str(config) in err, err


@pytest.mark.parametrize("name", [store.SUMMARY, store.METRICS])
def test_a_folder_where_a_runs_file_belongs_is_named(runs, tmp_path, capsys, name):
    path = first_run(runs) / name
    path.unlink()
    path.mkdir()
    code, err = one_line_or_done(["fit", runs, "--bootstrap", "0", "--curves", "--out", tmp_path / "fit"], capsys)
    assert code == 2 and f"{path}: it is a folder" in err and ": 3" not in err, err


@pytest.mark.parametrize("value", ["abc", "[1, 2]", "-5"])
def test_a_hand_edited_parameter_count_in_a_runs_config_is_one_line(runs, tmp_path, capsys, value):
    run = first_run(runs)
    summary = json.loads((run / store.SUMMARY).read_text())
    summary["n_params_total"] = None                   # the curves then take N from config.yaml
    (run / store.SUMMARY).write_text(json.dumps(summary))
    config = run / store.CONFIG
    config.write_text("\n".join(f"n_params_total: {value}" if line.startswith("n_params_total:") else line
                                for line in config.read_text().splitlines()) + "\n")
    one_line_or_done(["fit", runs, "--bootstrap", "0", "--curves", "--out", tmp_path / "fit"], capsys)


def test_a_count_past_a_floats_range_in_summary_json_is_refused(runs, tmp_path, capsys):
    path = first_run(runs) / store.SUMMARY
    path.write_text(path.read_text().replace('"n_params_total": ', '"n_params_total": 1' + "0" * 400 + ", \"x\": "))
    code, err = one_line_or_done(["fit", runs, "--bootstrap", "0", "--out", tmp_path / "fit"], capsys)
    assert code == 2 and "'n_params_total' must be a number" in err and str(path) in err


def test_a_step_past_a_floats_range_in_metrics_is_skipped_with_a_warning(runs, tmp_path, capsys):
    path = first_run(runs) / store.METRICS
    lines = path.read_text().splitlines()
    record = json.loads(lines[-1])
    record["step"], record["tokens"] = 10**400, 10**400
    path.write_text("\n".join([*lines[:-1], json.dumps(record)]) + "\n")
    code = main(["fit", str(runs), "--bootstrap", "0", "--curves", "--out", str(tmp_path / "fit")])
    warned = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert code == 0 and warned, warned         # each a line of its own (was: Python's, with file, line and source)
    assert all(line.startswith(f"warning: {path}:") and "skipping a record that is not a metrics record" in line
               for line in warned), warned


def test_a_warning_is_one_line_in_every_commands_format(runs, tmp_path):
    # Through a real process, as a user sees it: the same record, read by `report` this time.
    path = first_run(runs) / store.METRICS
    path.write_text(path.read_text() + '{"step": 1' + "0" * 400 + ', "tokens": 1}\n')
    done = run_cli(["report", runs, "--bootstrap", "0", "--out", tmp_path / "report"], timeout=300)
    warned = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 0 and warned and all(line.startswith("warning: ") for line in warned), done.stderr
    assert not any("warnings.warn" in line or ".py:" in line for line in warned), done.stderr


@pytest.fixture(scope="module")
def table_fit(tmp_path_factory) -> Path:
    """A fit of a table, made once: each test damages a copy of its folder."""
    return fit_table(tmp_path_factory.mktemp("table-fit"))


@pytest.mark.parametrize("kind", ["loop", "folder", "dangling"])
def test_a_validate_json_that_is_a_link_loop_a_folder_or_a_dangling_link_is_refused(table_fit, tmp_path, capsys,
                                                                                      kind):
    fit = shutil.copytree(table_fit.parent, tmp_path / "fit") / table_fit.name
    path = fit.with_name("validate.json")
    if kind == "loop":
        path.symlink_to(path.name)
    elif kind == "folder":
        path.mkdir()
    else:
        path.symlink_to(tmp_path / "nothing")
    code, err = one_line_or_done(["report", fit.parent, "--out", tmp_path / "report"], capsys)
    assert code == 2 and str(path) in err and ": 3" not in err, err          # was: exit 0, or "Is a directory: 3"
