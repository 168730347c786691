"""Issue 43: `scaling import` of hostile sources. A FIFO or a device where a log file belongs, a
corrupt W&B protobuf, bad JSON, NaN or infinite steps, garbage MLflow metadata: one line naming
the file, exit 2, nothing left behind; a killed import's folder removed by the next; the MLflow
source store left as it was."""

from __future__ import annotations

import shutil
import zlib
from pathlib import Path

import pytest

from scaling.cli import main
from scaling.runs import store
from tests.hardening.helpers import dead_pid, deadline, fifo, refused, run_cli
from tests.runs.imports.test_imports import write_mlflow

CSV_ROWS = "run,step,params,tokens,loss\n" + "".join(
    f"r{i},{s},{n},{s * 1e6},{3 + 10 / s}\n" for i, n in enumerate((1e6, 1e7, 1e8)) for s in (1, 2, 3))


def imported(tmp_path: Path, kind: str, src: Path, capsys, expected: str, *flags) -> None:
    """`scaling import` refuses `src` in one line, and leaves nothing beside the store."""
    refused(["import", kind, src, "--runs-dir", tmp_path / "out" / "imp", *flags], capsys, expected)
    assert not (tmp_path / "out").exists() or list((tmp_path / "out").iterdir()) == []


@pytest.mark.parametrize("kind, name", [("tensorboard", "logs/run/events.out.tfevents.1"),
                                        ("wandb", "wandb/offline-run-1/run-abc.wandb"),
                                        ("wandb", "exports/run-a.csv"), ("csv", "runs.csv"),
                                        ("mlflow", "mlruns/0/meta.yaml")])
def test_a_fifo_in_a_source_is_refused_not_waited_on(tmp_path, capsys, kind, name):
    path = fifo(tmp_path / name)
    src = tmp_path / Path(name).parts[0] if kind != "csv" else path
    with deadline(10):
        imported(tmp_path, kind, src, capsys, f"cannot read {path}: not a regular file")


def test_dev_zero_as_a_wandb_log_is_refused(tmp_path, capsys):
    run = tmp_path / "wandb" / "offline-run-1"
    run.mkdir(parents=True)
    (run / "run-abc.wandb").symlink_to("/dev/zero")
    with deadline(10):
        imported(tmp_path, "wandb", tmp_path / "wandb", capsys, "not a regular file")


def transaction(*payloads: bytes) -> bytes:
    """A W&B transaction file holding `payloads` as full records (the LevelDB-log framing)."""
    from scaling.runs.imports.wandb import CHUNK, FULL, HEADER
    body = b"".join(CHUNK.pack(zlib.crc32(p, zlib.crc32(bytes([FULL]))), len(p), FULL) + p for p in payloads)
    return HEADER.pack(b":W&B", 0xBEE1, 0) + body


def wandb_run(tmp_path: Path, *payloads: bytes) -> Path:
    run = tmp_path / "wandb" / "offline-run-1"
    run.mkdir(parents=True)
    (run / "run-abc.wandb").write_bytes(transaction(*payloads))
    return tmp_path / "wandb"


def test_a_corrupt_wandb_protobuf_is_refused_naming_the_file(tmp_path, capsys):
    pytest.importorskip("wandb")
    src = wandb_run(tmp_path, b"\x0a\xff\xff\xff\xff\x0f")
    imported(tmp_path, "wandb", src, capsys, "run-abc.wandb: corrupt W&B record")


@pytest.mark.parametrize("record", ["config", "history"])
def test_bad_json_in_a_wandb_record_is_refused_naming_the_key(tmp_path, capsys, record):
    pytest.importorskip("wandb")
    from wandb.proto import wandb_internal_pb2 as pb
    if record == "config":
        message = pb.Record(config=pb.ConfigRecord(update=[pb.ConfigItem(key="n_params", value_json="{bad")]))
    else:
        message = pb.Record(history=pb.HistoryRecord(item=[pb.HistoryItem(key="loss", value_json="[1,")]))
    src = wandb_run(tmp_path, message.SerializeToString())
    key = "n_params" if record == "config" else "loss"
    imported(tmp_path, "wandb", src, capsys, f"the value of {key!r} is not valid JSON")


@pytest.mark.parametrize("step", ["nan", "inf", "1e400", "2.5"])
def test_a_wandb_export_with_a_step_not_a_whole_number_is_refused(tmp_path, capsys, step):
    src = tmp_path / "exports"
    src.mkdir()
    (src / "run-a.csv").write_text(f"_step,loss,tokens\n1,3.0,1e6\n{step},2.5,2e6\n")
    imported(tmp_path, "wandb", src, capsys, "'_step' must be whole numbers from 0 to 2^63 - 1; row 2")


# Issue 53: impossible numbers were imported (exit 0); a step of 1e19 passed the whole-number check and
# astype(int) wrapped it, so metrics.jsonl held step -9223372036854775808 and tokens -4.66e24.
@pytest.mark.parametrize("column, value, expected", [
    ("_step", "1e19", "'_step' must be whole numbers from 0 to 2^63 - 1; row 2 holds 1e+19"),
    ("_step", "1e300", "'_step' must be whole numbers from 0 to 2^63 - 1; row 2"),
    ("_step", "-1", "'_step' must be whole numbers from 0 to 2^63 - 1; row 2"),
    ("val_loss", "-1", "run 'run-a': 'val_loss' is -1.0 at step 2; a loss is from 0 to 10000 nats per token"),
    ("val_loss", "-inf", "run 'run-a': 'val_loss' is -inf at step 2"),
    ("tokens", "1e40", "run 'run-a': its tokens reach 1e+40, past 1e+30"),
    ("n_params", "1e40", "run 'run-a': 'n_params' is 1e+40, past 1e+30 parameters"),
])
def test_a_wandb_export_with_an_impossible_value_is_refused_naming_it(tmp_path, capsys, column, value, expected):
    src = tmp_path / "exports"
    src.mkdir()
    row = {"_step": "2", "val_loss": "2.5", "tokens": "2e6", "n_params": "1e6"} | {column: value}
    other = "1e40" if column == "n_params" else "1e6"           # N is the run's constant column
    first = f"1,3.0,1e6,{other}"
    (src / "run-a.csv").write_text(f"_step,val_loss,tokens,n_params\n{first}\n{','.join(row.values())}\n")
    imported(tmp_path, "wandb", src, capsys, expected)


def test_an_event_file_of_no_records_writes_nothing(tmp_path, capsys):
    """A TensorBoard file truncated to zero records imported as exit 0 with nothing in it."""
    (tmp_path / "logs" / "run").mkdir(parents=True)
    (tmp_path / "logs" / "run" / "events.out.tfevents.1").write_bytes(b"")
    imported(tmp_path, "tensorboard", tmp_path / "logs", capsys, "holds no logged values (its tensorboard runs have "
             "no records): nothing to import")


@pytest.mark.parametrize("text", ["[1, 2, 3]", "[[1, 2]]", "{\"_step\": [1, 2], \"loss\": {\"a\": [1]}}"])
def test_a_wandb_export_that_is_not_a_table_of_rows_is_refused(tmp_path, capsys, text):
    src = tmp_path / "exports"
    src.mkdir()
    (src / "run-a.json").write_text(text)
    imported(tmp_path, "wandb", src, capsys, "run-a.json")


@pytest.mark.parametrize("step", ["nan", "inf", "1e400"])
def test_a_csv_import_with_a_step_not_a_whole_number_is_refused(tmp_path, capsys, step):
    src = tmp_path / "runs.csv"
    src.write_text(CSV_ROWS.replace("r1,2,", f"r1,{step},"))
    imported(tmp_path, "csv", src, capsys, "run 'r1' has a step that is not a whole number",
             "--n-key", "params", "--loss-tag", "loss")


@pytest.fixture(scope="module")
def mlruns(tmp_path_factory) -> Path:
    """An MLflow file store of three finished runs, written by MLflow's own client."""
    root = tmp_path_factory.mktemp("mlflow") / "mlruns"
    root.mkdir()
    runs = [{"name": f"r{i}", "n": n, "d": 1e8, "curve": [(s, s * 1e7, 3 + 10 / s) for s in (1, 2, 3)]}
            for i, n in enumerate((1e6, 1e7, 1e8))]
    write_mlflow(root, runs)
    return root


def mlflow_copy(mlruns: Path, tmp_path: Path) -> Path:
    src = tmp_path / "mlruns"
    shutil.copytree(mlruns, src)
    shutil.rmtree(src / ".trash", ignore_errors=True)
    return src


def test_import_mlflow_leaves_the_source_store_as_it_was(mlruns, tmp_path, capsys):
    src = mlflow_copy(mlruns, tmp_path)
    before = sorted(p.relative_to(src) for p in src.rglob("*"))
    assert main(["import", "mlflow", str(src), "--runs-dir", str(tmp_path / "imp")]) == 0
    assert sorted(p.relative_to(src) for p in src.rglob("*")) == before     # no .trash made in it


def experiment_folder(src: Path) -> Path:
    return next(p.parent for p in src.glob("*/meta.yaml") if p.parent.name not in ("0", ".trash"))


@pytest.mark.parametrize("damage", ["meta.yaml", "metric"])
def test_a_damaged_mlflow_store_is_refused_in_one_line(mlruns, tmp_path, capsys, damage):
    src = mlflow_copy(mlruns, tmp_path)
    experiment = experiment_folder(src)
    if damage == "meta.yaml":
        (experiment / "meta.yaml").write_text("name: [unclosed\n  : : :\n\tartifact_location: {")
    else:
        metric = next(experiment.glob("*/metrics/val_loss"))
        metric.write_text("garbage line here\n")
    imported(tmp_path, "mlflow", src, capsys, f"{src}: not a readable")


def test_a_killed_import_leaves_a_folder_the_next_import_removes(tmp_path):
    src = tmp_path / "runs.csv"
    src.write_text(CSV_ROWS)
    out = tmp_path / "store" / "imp"
    flags = ["--n-key", "params", "--loss-tag", "loss"]
    killed = run_cli(["import", "csv", src, "--runs-dir", out, *flags],
                     env={"SCALING_FAULT": f"kill_at=write:{store.SUMMARY}:2"})
    assert killed.returncode == -9
    left = [p.name for p in (tmp_path / "store").iterdir()]
    assert len(left) == 1 and left[0].startswith(".imp.importing-"), left
    other = f".other.importing-{dead_pid()}"
    (tmp_path / "store" / other).mkdir()     # another store's killed import: not this import's to delete
    assert run_cli(["import", "csv", src, "--runs-dir", out, *flags]).returncode == 0
    assert sorted(p.name for p in (tmp_path / "store").iterdir()) == [other, "imp"]
    assert len(store.read_runs(out)) == 3

