"""train.log_to: [tensorboard] on a real micro sweep: TensorBoard's own reader opens one run per
training run, with the curves metrics.jsonl holds; the store is the same as without."""

import pytest

from tests.extras import needs_extra

needs_extra("tensorboard", "tensorboard")

from tensorboard.backend.event_processing.event_multiplexer import EventMultiplexer  # noqa: E402

from scaling.runs import store  # noqa: E402
from scaling.sweeps.driver import run_sweep  # noqa: E402
from scaling.sweeps.plan import plan  # noqa: E402
from tests.conftest import MICRO, micro_config  # noqa: E402

# The two smallest runs of the micro grid: a few seconds.
TINY = {"models": MICRO["grid"]["models"][:1], "tokens": MICRO["grid"]["tokens"][:2]}


@pytest.fixture(scope="module")
def logged_sweep(tmp_path_factory, cache_dir):
    cfg = micro_config(grid=TINY, train={**MICRO["train"], "log_to": ["tensorboard"]})
    return run_sweep(cfg, tmp_path_factory.mktemp("runs"), cache_dir)


def test_tensorboard_reader_opens_one_run_per_training_run(logged_sweep):
    sweep_dir = logged_sweep.sweep_dir
    viewer = EventMultiplexer(size_guidance={"scalars": 0}).AddRunsFromDirectory(str(sweep_dir))
    viewer.Reload()
    run_ids = [d.name for d in store.run_dirs(sweep_dir)]
    assert sorted(viewer.Runs()) == sorted(run_ids) and len(run_ids) == len(TINY["tokens"])
    for run_id in run_ids:
        records = store.read_jsonl(sweep_dir / run_id / store.METRICS)
        for field, tag in (("val_loss", "val/loss"), ("lr", "lr"), ("tokens_per_s", "throughput/tokens_per_s"),
                           ("train_loss", "train/loss")):
            logged = [(e.step, e.value) for e in viewer.Scalars(run_id, tag)]
            kept = [(r["step"], r[field]) for r in records if r.get(field) is not None]
            assert [s for s, _ in logged] == [s for s, _ in kept] and len(kept) >= 2
            assert [v for _, v in logged] == pytest.approx([v for _, v in kept], rel=1e-6)


def test_viewers_change_no_run_id(logged_sweep):
    without = plan(micro_config(grid=TINY))
    assert sorted(logged_sweep.table.run_id) == sorted(run.run_id for run in without)
    assert (logged_sweep.table.status == "finished").all()


def test_log_to_is_checked_in_the_config():
    from scaling.config import parse_config
    from scaling.errors import UsageError

    for train, executor, problem in ((["wandb"], {}, "log_to"), (["tensorboard", "tensorboard"], {}, "twice"),
                                     (["tensorboard"], {"kind": "ray"}, "not supported with executor.kind 'ray'")):
        with pytest.raises(UsageError, match=problem):
            parse_config({**MICRO, "train": {**MICRO["train"], "log_to": train}, "executor": executor}, "micro")


def test_scaling_import_reads_the_logs_back_without_flags(logged_sweep, tmp_path):
    from scaling.runs.imports import import_runs

    result = import_runs("tensorboard", logged_sweep.sweep_dir, tmp_path / "back")
    assert not result.listed
    ours = logged_sweep.table.set_index("run_id")
    back = store.read_runs(tmp_path / "back").set_index("run_id")
    assert sorted(back.index) == sorted(ours.index)
    for column in ("n_params_total", "tokens"):
        assert list(back.loc[ours.index, column]) == list(ours[column])
    assert list(back.loc[ours.index, "final_val_loss"]) == pytest.approx(list(ours.final_val_loss), rel=1e-6)
