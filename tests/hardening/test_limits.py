"""Issue 43: limits stated and enforced, and outputs checked before training. A config planning a
million runs or a run of 10^400 tokens is refused at once with the count named; a fit of more
than 100,000 points is refused at once (1e6 rows ran past 300 s); a loss of 1e308 is refused; a
folder where runs.csv goes is refused before any run trains; a FIFO as a run's checkpoint is
moved aside, not waited on."""

from __future__ import annotations

import os
import time

import numpy as np
import pandas as pd
import pytest
import yaml

from scaling.config import MAX_RUNS
from scaling.errors import UsageError
from scaling.laws.fitting.selection import MAX_POINTS
from scaling.runs import store
from scaling.sweeps.driver import run_sweep
from scaling.sweeps.plan import plan
from tests.conftest import MICRO, micro_config
from tests.hardening.helpers import ROOT, deadline, refused


def write_config(path, **grid):
    path.write_text(yaml.safe_dump({**MICRO, "grid": {**MICRO["grid"], **grid}}))
    return path


def test_a_config_of_a_million_runs_is_refused_at_once_naming_the_count(tmp_path, capsys):
    models = [{"d_model": 16 * (1 + i % 8), "n_layers": 1 + i // 8, "n_heads": 2} for i in range(1000)]
    config = write_config(tmp_path / "big.yaml", models=models, tokens=[256 * (i + 1) for i in range(1000)])
    start = time.perf_counter()
    assert main_code(["sweep", config, "--dry-run"], capsys, f"plans 1,000,000 runs, more than {MAX_RUNS:,}") == 2
    assert time.perf_counter() - start < 10                  # was: still planning after 120 s


def test_a_run_of_10_to_the_400_tokens_is_refused(tmp_path, capsys):
    config = write_config(tmp_path / "huge.yaml", tokens=[8192])
    config.write_text(config.read_text().replace("- 8192", "- 1" + "0" * 400))
    assert main_code(["sweep", config, "--dry-run"], capsys, "grid.tokens[0]: must be at most") == 2


def main_code(argv, capsys, expected: str) -> int:
    """`scaling ARGV`'s exit code; its message (a config's may take two lines) holds `expected`."""
    from scaling.cli import main
    code = main([str(a) for a in argv])
    err = capsys.readouterr().err
    assert expected in err and "Traceback" not in err, err
    return code


def points(count: int, loss_scale: float = 1.0) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    n, d = 10 ** rng.uniform(6, 9, count), 10 ** rng.uniform(8, 11, count)
    return pd.DataFrame({"N": n, "D": d, "loss": (2 + 400 / n ** 0.34 + 400 / d ** 0.28) * loss_scale})


def fit_csv(table, tmp_path):
    return ["fit", "--csv", table, "--n-col", "N", "--d-col", "D", "--loss-col", "loss", "--bootstrap", "0",
            "--out", tmp_path / "fit"]


def test_a_fit_of_more_points_than_the_limit_is_refused_at_once(tmp_path, capsys):
    table = tmp_path / "many.csv"
    points(MAX_POINTS + 1).to_csv(table, index=False)
    start = time.perf_counter()
    refused(fit_csv(table, tmp_path), capsys, f"{MAX_POINTS + 1:,} points, more than the {MAX_POINTS:,} a fit takes")
    assert time.perf_counter() - start < 30 and not (tmp_path / "fit").exists()


def test_a_table_past_the_file_size_limit_is_refused_before_it_is_read(tmp_path, capsys):
    from scaling.reading import MAX_FILE_BYTES
    table = tmp_path / "huge.csv"
    with open(table, "wb") as f:               # sparse: no disk used, and read whole it is 256 MiB of zeros
        f.write(b"N,D,loss\n")
        f.truncate(MAX_FILE_BYTES + 1)
    with deadline(30, extra_bytes=2**30):      # was: pandas read it all before the points were counted
        refused(fit_csv(table, tmp_path), capsys, "larger than 256 MiB, more rows than a fit takes")


def test_a_loss_beyond_any_language_models_is_refused(tmp_path, capsys):
    table = tmp_path / "points.csv"
    frame = points(12)
    frame.loc[5, "loss"] = 1e308                                # was: math domain error in the Kaplan fit
    frame.to_csv(table, index=False)
    refused(fit_csv(table, tmp_path), capsys, "loss must be at most 10000")


def test_a_folder_where_runs_csv_goes_is_refused_before_any_run_trains(tmp_path, cache_dir, capsys):
    cfg = micro_config()
    (tmp_path / cfg.name / store.TABLE).mkdir(parents=True)
    with pytest.raises(UsageError, match="runs.csv is a folder"):
        run_sweep(cfg, tmp_path, cache_dir)
    assert [p.name for p in (tmp_path / cfg.name).iterdir()] == [store.TABLE]   # no run trained first


def test_a_fifo_as_a_runs_checkpoint_is_moved_aside_not_waited_on(tmp_path, cache_dir):
    cfg = micro_config(grid={"models": [MICRO["grid"]["models"][0]], "tokens": [8192]})
    run_dir = tmp_path / cfg.name / plan(cfg)[0].run_id
    run_dir.mkdir(parents=True)
    os.mkfifo(run_dir / store.CHECKPOINT)
    with deadline(120), pytest.warns(UserWarning, match="unusable checkpoint .* it is a FIFO"):
        result = run_sweep(cfg, tmp_path, cache_dir)            # was: a sweep hung 180 s on it
    assert (run_dir / f"{store.CHECKPOINT}.unusable").exists()
    assert store.read_summary(run_dir)["status"] == "finished" and len(result.table) == 1


def test_a_fit_on_a_terminal_shows_the_time_elapsed(tmp_path):
    # A long fit (1e5 points: minutes) shows that it is working. (A pipe gets nothing: every
    # refusal test above reads exactly one line of stderr.)
    import pty
    import subprocess
    import sys
    table = tmp_path / "points.csv"
    points(12).to_csv(table, index=False)
    argv = [sys.executable, "-m", "scaling", "fit", "--csv", str(table), "--bootstrap", "0",
            "--out", str(tmp_path / "fit")]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "COLUMNS": "120", "TERM": "xterm"}
    leader, follower = pty.openpty()
    child = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=follower, env=env, cwd=ROOT)
    os.close(follower)
    shown = b""
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:                     # the child closed the terminal
            break
        if not chunk:
            break
        shown += chunk
    assert child.wait(timeout=60) == 0
    os.close(leader)
    assert b"fitting: L-BFGS" in shown and b"0:00:0" in shown      # the spinner's text and time elapsed
