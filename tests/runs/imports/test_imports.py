"""`scaling import` on real logs: a simulated sweep with a known law, written by each library's own
writer (SummaryWriter, MLflow's file store, W&B offline, a CSV), imported, fitted: the law is
recovered within its bootstrap interval, and every logged evaluation is in the store."""

from __future__ import annotations

import os
import sys
from unittest import mock

import numpy as np
import pandas as pd
import pytest
import yaml

from scaling.cli import main
from scaling.laws import analysis
from scaling.laws.curves.store import curves_from_store
from scaling.laws.design.simulate import cross_grid, simulate
from scaling.laws.fitting import readers
from scaling.laws.forms.law import Law
from scaling.runs import store
from tests.extras import needs_extra

LAW = Law(E=1.8, A=400.0, B=2000.0, alpha=0.34, beta=0.37)
RUNS = cross_grid(sizes=np.geomspace(1e6, 3e7, 4), tokens=np.geomspace(2e7, 6e8, 4))
EVALS = 5            # evaluations per run, the last at the end of training
STEPS = 1000         # training steps of every run: D / STEPS tokens a step
GRID = {"log_e": [0.5, 1.0], "log_a": [4.0, 7.0], "log_b": [5.0, 8.0], "alpha": [0.3, 0.5], "beta": [0.3, 0.5]}


@pytest.fixture(scope="module")
def sweep():
    """Each run's name, N, D, and curve [(step, tokens, loss)]: the law's loss times the run's own
    1% scatter, which its final loss (simulate's) carries."""
    final = simulate(LAW, RUNS, noise=0.01, seed=0)
    runs = []
    for i, (n, d, loss) in enumerate(zip(final.n, final.d, final.loss)):
        steps = [STEPS * k // EVALS for k in range(1, EVALS + 1)]
        tokens = [d * s / STEPS for s in steps]
        scatter = loss / LAW.loss(n, d)
        runs.append({"name": f"run-{i:02d}", "n": n, "d": d,
                     "curve": [(s, t, float(LAW.loss(n, t) * scatter)) for s, t in zip(steps, tokens)]})
    return runs


def write_tensorboard(root, runs):
    """One folder per run: val/loss at each step, N and D as hparams (both as PyTorch writes them)."""
    needs_extra("tensorboard", "tensorboard")
    from torch.utils.tensorboard import SummaryWriter
    from torch.utils.tensorboard.summary import hparams

    for run in runs:
        with SummaryWriter(str(root / run["name"])) as writer:
            for summary in hparams({"n_params": run["n"], "tokens": run["d"]}, {}):
                writer.file_writer.add_summary(summary)
            for step, _, loss in run["curve"]:
                writer.add_scalar("val/loss", loss, step)


def write_mlflow(root, runs, *, running=None, failed=None, uri=None):
    """An experiment of the file store (or of the tracking database at `uri`), N and D as params,
    the loss as a metric history."""
    needs_extra("mlflow", "mlflow")
    from mlflow.tracking import MlflowClient

    uri = uri or root.resolve().as_uri()
    with mock.patch.dict(os.environ, {"MLFLOW_ALLOW_FILE_STORE": "true"}):   # MLflow 3 asks for it
        client = MlflowClient(tracking_uri=uri, registry_uri=uri)
        experiment = client.create_experiment("sweep")
    for run in runs:
        info = client.create_run(experiment, run_name=run["name"]).info
        client.log_param(info.run_id, "n_params", run["n"])
        client.log_param(info.run_id, "tokens", run["d"])
        for step, _, loss in run["curve"]:
            client.log_metric(info.run_id, "val_loss", loss, step=step)
        if run["name"] != running:
            client.set_terminated(info.run_id, status="FAILED" if run["name"] == failed else "FINISHED")


def write_wandb(root, runs, *, failed=None):
    """Offline runs: N nested in the config, tokens seen and the loss logged at each step."""
    needs_extra("wandb", "wandb")
    import wandb

    settings = wandb.Settings(mode="offline", console="off", save_code=False, disable_git=True,
                              x_disable_stats=True, x_disable_meta=True, x_disable_machine_info=True, silent=True)
    for run in runs:
        logged = wandb.init(dir=str(root), project="sweep", name=run["name"], settings=settings,
                            config={"model": {"n_params": run["n"]}})
        for step, tokens, loss in run["curve"]:
            logged.log({"eval/loss": loss, "tokens_seen": tokens}, step=step)
        logged.finish(exit_code=1 if run["name"] == failed else 0)
    wandb.teardown()   # finish() returns before W&B's service has written the last records; this waits


def write_csv(path, runs):
    """One row per evaluation: run, step, N, tokens seen, loss."""
    rows = [{"run": run["name"], "step": s, "params": run["n"], "tokens": t, "loss": loss}
            for run in runs for s, t, loss in run["curve"]]
    pd.DataFrame(rows).to_csv(path, index=False)


WRITERS = {
    "tensorboard": (write_tensorboard, "logs", []),
    "mlflow": (write_mlflow, "mlruns", []),
    "wandb": (write_wandb, "wandb", ["--n", "model.n_params", "--d", "tokens_seen"]),
    "csv": (write_csv, "runs.csv", ["--n", "params", "--loss", "loss"]),
}


def scaling(*args) -> int:
    return main([str(a) for a in args])


@pytest.mark.parametrize("kind", list(WRITERS))
def test_import_recovers_the_law_and_keeps_the_curves(kind, sweep, tmp_path, capsys):
    write, name, flags = WRITERS[kind]
    src = tmp_path / name
    if kind != "csv":
        src.mkdir()
    write(src, sweep)
    runs_dir = tmp_path / "runs" / kind
    assert scaling("import", kind, src, "--runs-dir", runs_dir, *flags) == 0
    assert f"imported {len(sweep)} {kind} runs" in capsys.readouterr().out

    data = readers.from_runs(runs_dir)
    assert len(data) == len(sweep) and not data.dropped
    truth = {(run["n"], run["d"]): run["curve"][-1][2] for run in sweep}
    for n, d, loss in zip(data.n, data.d, data.loss):     # float32 in TensorBoard: 1e-7
        assert loss == pytest.approx(truth[min(truth, key=lambda k: abs(np.log(k[0] / n)) + abs(np.log(k[1] / d)))],
                                     rel=1e-6)
    fit = analysis.fit_data(data, bootstrap=100, grid=GRID, backtest=False)     # the constants' intervals
    for param in ("E", "alpha", "beta"):
        lo, hi = fit.interval(param)
        assert lo < getattr(LAW, param) < hi, (kind, param, lo, hi)

    curves = curves_from_store(runs_dir, param_convention="total")
    assert len(curves) == len(sweep) * EVALS
    written = sorted((run["n"], t, loss) for run in sweep for _, t, loss in run["curve"])
    stored = sorted(zip(curves.n, curves.tokens, curves.loss))
    np.testing.assert_allclose(np.array(stored), np.array(written), rtol=1e-6)


def test_provenance_and_runs_without_n_are_listed_not_guessed(sweep, tmp_path, capsys):
    runs = [dict(run) for run in sweep[:4]]
    write_csv(tmp_path / "runs.csv", runs)
    table = pd.read_csv(tmp_path / "runs.csv")
    table.loc[table.run == "run-02", "params"] = np.nan      # a run that did not log its size
    table.to_csv(tmp_path / "runs.csv", index=False)
    assert scaling("import", "csv", tmp_path / "runs.csv", "--runs-dir", tmp_path / "store",
                   "--n-key", "params", "--loss-tag", "loss") == 0
    out = capsys.readouterr().out
    assert "3 fit points" in out and "run-02: failed: not a fit point: 'params' is nan" in out
    data = readers.from_runs(tmp_path / "store")
    assert [d.id for d in data.dropped] == ["run-02"] and "'params' is nan" in data.dropped[0].reason
    config = store.read_runs(tmp_path / "store")
    assert list(config.status) == ["finished", "finished", "failed", "finished"]
    imported = yaml.safe_load((tmp_path / "store" / "run-00" / store.CONFIG).read_text())["imported"]
    assert imported["kind"] == "csv" and imported["run"] == "run-00" and imported["source"].endswith("runs.csv")
    assert imported["names"] == {"n_key": "params", "tokens_key": "tokens", "loss_tag": "loss"}


def bad(capsys, *args) -> str:
    """The one line a refused import prints (exit 2), after checking it wrote nothing."""
    runs_dir = args[args.index("--runs-dir") + 1]
    assert scaling("import", *args) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("scaling import: error: ")
    assert not runs_dir.exists() and not list(runs_dir.parent.glob(f".{runs_dir.name}.*"))
    return err


def test_bad_input_is_one_line_and_writes_nothing(sweep, tmp_path, capsys):
    out = tmp_path / "out" / "store"
    write_csv(tmp_path / "runs.csv", sweep[:3])
    err = bad(capsys, "csv", tmp_path / "runs.csv", "--runs-dir", out, "--n", "params")
    assert "the loss (a logged scalar): under none of val_loss" in err and err.endswith("give --loss TAG")
    assert "none of the 3 runs holds 'size'" in bad(capsys, "csv", tmp_path / "runs.csv", "--runs-dir", out,
                                                    "--loss", "loss", "--n", "size")
    # The old spellings still work.
    assert "give --n KEY" in bad(capsys, "csv", tmp_path / "runs.csv", "--runs-dir", out, "--loss-tag", "loss",
                                 "--n-key", "size")
    mixed = pd.read_csv(tmp_path / "runs.csv").rename(columns={"loss": "val_loss"})
    mixed["eval_loss"] = mixed.val_loss.where(mixed.run == "run-00")
    mixed["val_loss"] = mixed.val_loss.where(mixed.run != "run-00")
    mixed.to_csv(tmp_path / "mixed.csv", index=False)
    err = bad(capsys, "csv", tmp_path / "mixed.csv", "--runs-dir", out, "--n", "params")
    assert "mixed names for the loss" in err and "'val_loss' (2 runs" in err and "'eval_loss' (1 runs" in err
    assert "does not exist" in bad(capsys, "mlflow", tmp_path / "nowhere", "--runs-dir", out)
    # A table of N, D and loss without a run column: the message names the flag that names one.
    pd.read_csv(tmp_path / "runs.csv").rename(columns={"run": "model"}).to_csv(tmp_path / "unnamed.csv", index=False)
    err = bad(capsys, "csv", tmp_path / "unnamed.csv", "--runs-dir", out, "--n", "params")
    assert "no run column 'run or run_id or name'" in err and err.endswith("(--run)")
    assert scaling("import", "csv", tmp_path / "unnamed.csv", "--runs-dir", out, "--n", "params", "--loss", "loss",
                   "--run-key", "model") == 0


def test_truncated_event_file_is_refused(sweep, tmp_path, capsys):
    write_tensorboard(tmp_path / "logs", sweep[:2])
    event_file = next((tmp_path / "logs" / "run-01").glob("*tfevents*"))
    event_file.write_bytes(event_file.read_bytes()[:-5])    # a writer killed mid-record
    err = bad(capsys, "tensorboard", tmp_path / "logs", "--runs-dir", tmp_path / "store")
    assert "truncated or corrupt event file" in err and event_file.name in err


def test_running_mlflow_run_is_refused(sweep, tmp_path, capsys):
    write_mlflow(tmp_path / "mlruns", sweep[:2], running="run-01")
    err = bad(capsys, "mlflow", tmp_path / "mlruns", "--runs-dir", tmp_path / "store")
    assert "'run-01'" in err and "still RUNNING" in err


def test_existing_store_is_not_mixed_with_imported_runs(sweep, tmp_path, capsys):
    write_csv(tmp_path / "runs.csv", sweep[:2])
    (tmp_path / "store").mkdir()
    (tmp_path / "store" / "runs.csv").write_text("run_id\n")
    assert scaling("import", "csv", tmp_path / "runs.csv", "--runs-dir", tmp_path / "store",
                   "--n-key", "params", "--loss-tag", "loss") == 2
    assert "not an empty folder" in capsys.readouterr().err
    assert (tmp_path / "store" / "runs.csv").read_text() == "run_id\n"


@pytest.mark.parametrize("kind,modules", [("tensorboard", ["tensorboard"]),
                                          ("mlflow", ["mlflow", "mlflow.tracking"])])
def test_missing_extra_is_one_line(kind, modules, tmp_path, capsys, monkeypatch):
    for module in modules:
        monkeypatch.setitem(sys.modules, module, None)    # as Python sees a package that is not installed
    (tmp_path / "logs").mkdir()
    err = bad(capsys, kind, tmp_path / "logs", "--runs-dir", tmp_path / "store")
    assert err.endswith(f"reading {kind} logs needs the {kind} extra: pip install 'scaling[{kind}]'")


@pytest.mark.parametrize("kind,write", [("mlflow", write_mlflow), ("wandb", write_wandb)])
def test_a_run_the_source_says_failed_is_kept_not_fitted(kind, write, sweep, tmp_path, capsys):
    write(tmp_path / "logs", sweep[:3], failed="run-01")
    flags = ["--n", "model.n_params", "--d", "tokens_seen"] if kind == "wandb" else []
    assert scaling("import", kind, tmp_path / "logs", "--runs-dir", tmp_path / "store", *flags) == 0
    why = "MLflow status FAILED" if kind == "mlflow" else "W&B exit code 1"
    assert f"run-01: failed: {why}" in capsys.readouterr().out
    data = readers.from_runs(tmp_path / "store")
    assert len(data) == 2 and [d.reason for d in data.dropped] == [f"failed: {why}"]
    assert len(store.read_jsonl(next((tmp_path / "store").glob("*run-01")) / store.METRICS)) == EVALS


def test_wandb_exported_histories(sweep, tmp_path, capsys):
    """run.history() as each run's CSV: a row per step, no config, so N is a column."""
    (tmp_path / "export").mkdir()
    for run in sweep[:3]:
        pd.DataFrame([{"_step": s, "_runtime": 0.5 * s, "val_loss": loss, "tokens": t, "n_params": run["n"]}
                      for s, t, loss in run["curve"]]).to_csv(tmp_path / "export" / f"{run['name']}.csv", index=False)
    assert scaling("import", "wandb", tmp_path / "export", "--runs-dir", tmp_path / "store") == 0
    table = store.read_runs(tmp_path / "store")
    assert list(table.run_id) == ["run-00", "run-01", "run-02"] and (table.status == "finished").all()
    assert list(table.n_params_total) == [run["n"] for run in sweep[:3]]
    assert list(table.tokens) == pytest.approx([run["d"] for run in sweep[:3]], abs=0.5)


def test_csv_one_row_per_run_and_steps_times_batch(sweep, tmp_path, capsys):
    finals = pd.DataFrame([{"name": run["name"], "N": run["n"], "D": run["d"], "val_loss": run["curve"][-1][2]}
                           for run in sweep[:4]])
    finals.to_csv(tmp_path / "final.csv", index=False)
    # One row per run, no step column: N, D and the loss by their conventional names.
    assert scaling("import", "csv", tmp_path / "final.csv", "--runs-dir", tmp_path / "a") == 0
    table = store.read_runs(tmp_path / "a")
    assert list(table.tokens) == pytest.approx(list(finals.D), abs=0.5) and list(table.n_params_total) == list(finals.N)
    # The last step and the tokens per step instead of D: D = steps x batch.
    finals.assign(step=STEPS, batch_tokens=finals.D / STEPS).drop(columns="D").to_csv(tmp_path / "steps.csv",
                                                                                      index=False)
    assert scaling("import", "csv", tmp_path / "steps.csv", "--runs-dir", tmp_path / "b", "--run", "name") == 0
    assert "D = steps x 'batch_tokens'" in capsys.readouterr().out
    assert list(store.read_runs(tmp_path / "b").tokens) == pytest.approx(list(finals.D), abs=0.5)


def test_truncated_wandb_log_is_refused(sweep, tmp_path, capsys):
    write_wandb(tmp_path / "wandb", sweep[:1])
    log = next((tmp_path / "wandb").rglob("run-*.wandb"))
    log.write_bytes(log.read_bytes()[:-40])                  # a run killed mid-write, or a copy cut short
    err = bad(capsys, "wandb", tmp_path / "wandb", "--runs-dir", tmp_path / "store")
    assert "truncated or corrupt record at byte" in err and log.name in err


def test_custom_names_missing_are_all_named_in_one_message(sweep, tmp_path, capsys):
    """TensorBoard runs with names of their own: one refused try names every missing flag and
    lists the tags and hyperparameters the runs hold, so the second try is the last."""
    needs_extra("tensorboard", "tensorboard")
    from torch.utils.tensorboard import SummaryWriter
    from torch.utils.tensorboard.summary import hparams

    for run in sweep[:2]:
        with SummaryWriter(str(tmp_path / "logs" / run["name"])) as writer:
            for summary in hparams({"model_size": run["n"], "train_tokens_total": run["d"]}, {}):
                writer.file_writer.add_summary(summary)
            for step, _, loss in run["curve"]:
                writer.add_scalar("heldout/xent", loss, step)
    err = bad(capsys, "tensorboard", tmp_path / "logs", "--runs-dir", tmp_path / "store")
    assert "N (a hyperparameter)" in err and "D (tokens" in err and "the loss (a logged scalar)" in err
    assert "'model_size', 'train_tokens_total'" in err and "scalars 'heldout/xent'" in err
    assert err.endswith("give --n KEY, --d KEY (or --batch-tokens KEY), --loss TAG")
    assert scaling("import", "tensorboard", tmp_path / "logs", "--runs-dir", tmp_path / "store", "--n", "model_size",
                   "--d", "train_tokens_total", "--loss", "heldout/xent") == 0
    assert len(readers.from_runs(tmp_path / "store")) == 2
    capsys.readouterr()
    assert scaling("runs", tmp_path / "store") == 0    # C = 6 N D and the wall time, as TensorBoard timed it
    rows = [line.split() for line in capsys.readouterr().out.splitlines() if line.startswith("run-")]
    expected = [f"{6 * run['n'] * run['d']:.3g}" for run in sweep[:2]]
    assert [row[8] for row in rows] == expected and all(row[-1] == "s" and row[-2] != "-" for row in rows)


def test_mlflow_sqlite_store_imports(sweep, tmp_path, capsys):
    """A tracking database (what `--backend-store-uri sqlite:///mlflow.db` writes) reads as the
    file store does: every run, its N, D and whole loss curve."""
    needs_extra("sqlalchemy", "mlflow")
    database = tmp_path / "mlflow.db"
    write_mlflow(tmp_path, sweep[:4], uri=f"sqlite:///{database}")
    written = database.read_bytes()
    assert scaling("import", "mlflow", database, "--runs-dir", tmp_path / "store") == 0
    assert database.read_bytes() == written         # read through a read-only copy: the source unchanged
    assert "imported 4 mlflow runs" in capsys.readouterr().out
    table = store.read_runs(tmp_path / "store")
    assert sorted(table.n_params_total) == sorted(run["n"] for run in sweep[:4])
    assert sorted(table.final_val_loss) == pytest.approx(sorted(run["curve"][-1][2] for run in sweep[:4]), rel=1e-9)
    assert len(curves_from_store(tmp_path / "store", param_convention="total")) == 4 * EVALS
    (tmp_path / "not.db").write_text("runs\n")
    assert "not a sqlite database" in bad(capsys, "mlflow", tmp_path / "not.db", "--runs-dir", tmp_path / "s2")
