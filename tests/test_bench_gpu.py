"""The pieces of bench/gpu/driver.py, the script a lent GPU runs in one call: its card table, its
micro configs, its stage clock, its figures and their tables. Seconds; the whole script's CPU dry
run is `SCALING_DRY_RUN=1 bash bench/gpu/run.sh` (a few minutes)."""

import sys
import time
from pathlib import Path

import pytest

from scaling.runs import store
from scaling.sweep.plan import plan
from tests.conftest import MICRO_RUNS

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench" / "gpu"))
import driver  # noqa: E402
from bench_train import Layout, Timing  # noqa: E402
from gpu_tables import write_report  # noqa: E402
from throughput import ShapeJob, bf16_peak, measure  # noqa: E402


@pytest.mark.parametrize("name, part, peak", [
    ("NVIDIA H100 80GB HBM3", "H100 SXM", 989e12), ("NVIDIA H100 PCIe", "H100 PCIe", 756e12),
    ("NVIDIA H100 NVL", "H100 NVL", 835e12), ("NVIDIA H200", "H200 SXM", 989e12),
    ("NVIDIA H200 NVL", "H200 NVL", 835e12), ("NVIDIA A100-SXM4-80GB", "A100", 312e12)])
def test_bf16_peak_by_card_name(name, part, peak):
    assert bf16_peak(name) == (part, peak)


def test_an_unknown_card_has_no_peak():
    assert bf16_peak("Tesla T4") is None


@pytest.mark.parametrize("name", ["demo", "study"])
def test_micro_configs_plan_every_shape_at_every_budget(name, tmp_path):
    call = driver.Call(tmp_path, tmp_path, dry_run=True, total=60)
    runs = plan(call.config(name))
    assert len(runs) == 6 and {r.spec.budget for r in runs} == {1e9, 2e9}
    assert all(r.spec.train.device == "cpu" and r.spec.steps >= 10 for r in runs)


def test_a_command_past_its_limit_is_stopped(tmp_path):
    call = driver.Call(tmp_path, tmp_path, dry_run=True, total=60)
    begin = time.monotonic()
    got = call.command([sys.executable, "-c", "import time; time.sleep(60)"], limit=1)
    assert got["timed_out"] and got["rc"] != 0 and time.monotonic() - begin < 10
    assert call.command([sys.executable, "-c", "pass"], limit=30) == {"rc": 0, "wall_s": pytest.approx(0, abs=10),
                                                                      "timed_out": False}


def test_sweep_figures_and_their_tables(micro_sweep, tmp_path):
    cfg, result = micro_sweep
    figures = driver.sweep_figures(result.sweep_dir, wall_s=10.0, peak_flop_s=1e11)
    table = store.read_runs(result.sweep_dir)
    assert figures["finished_runs"] == MICRO_RUNS == len(table)
    assert figures["flops_done"] == pytest.approx(table.flops_exact.sum())
    assert figures["tokens_per_s"] == pytest.approx(table.tokens.sum() / 10.0)
    assert figures["share_of_peak"] == pytest.approx(figures["flops_done"] / 10.0 / 1e11)
    assert set(figures["tokens_per_s_per_run_by_shape"]) == {"d16/L1", "d32/L2"}
    report = write_report({"dry_run": True, "stages": {"demo": {**figures, "status": "ok", "wall_s": 10.0,
                                                                "limit_s": 60, "planned_runs": MICRO_RUNS}}})
    assert f"runs finished {MICRO_RUNS} of {MICRO_RUNS}" in report and "d32/L2" in report


def test_throughput_rows_and_a_deadline_that_has_passed():
    cfg = driver.micro(driver.load_config(driver.CONFIGS["study"]))
    shape = cfg.grid.models[0]
    job = ShapeJob(driver.GPTConfig.from_config(cfg.model, shape, cfg.tokenizer.vocab_size), shape.lr)
    assert measure([job], cfg.train, Layout(1, 1), Timing(1, 1, 2), deadline=time.monotonic()) == []
    rows = measure([job], cfg.train, Layout(1, 1), Timing(1, 1, 2), deadline=time.monotonic() + 60)
    assert len(rows) == 1 and rows[0]["shape"] == "d16/L2" and rows[0]["tokens_per_s"] > 0
    assert rows[0]["flop_s"] == pytest.approx(rows[0]["tokens_per_s"] * rows[0]["flops_per_token"])
