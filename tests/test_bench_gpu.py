"""The pieces of bench/gpu/driver.py, the script a lent GPU runs in one call: its card table, its
micro configs, its stage clock, its figures and their tables, and the stacked runs it times
(bench/gpu/stacked.py) against the same runs alone. Seconds; the whole script's CPU dry
run is `SCALING_DRY_RUN=1 bash bench/gpu/run.sh` (a few minutes)."""

import sys
import time
import warnings
from contextlib import nullcontext
from pathlib import Path

import numpy as np
import pytest
import torch

from scaling.config import TrainConfig
from scaling.runs import store
from scaling.sweeps.plan import plan
from scaling.train.batches import get_batch
from scaling.train.loop import make_optimizer, train_step
from scaling.train.model import GPT
from scaling.train.schedule import lr_at
from scaling.train.shape import GPTConfig
from scaling.train.spec import RunSpec
from tests.conftest import MICRO_RUNS

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench" / "gpu"))
import driver  # noqa: E402
from bench_train import Layout, Timing  # noqa: E402
from gpu_tables import write_report  # noqa: E402
from stacked import Stack  # noqa: E402
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


def alone(spec: RunSpec, tokens) -> list[float]:
    """Each step's loss of `spec` trained alone by the training loop's own pieces (fp32, CPU)."""
    torch.manual_seed(spec.seed)
    model = GPT(spec.model)
    optimizer = make_optimizer(model, spec.train, spec.lr)
    n_seqs = spec.train.batch_tokens // spec.model.context_length
    losses = []
    for step in range(1, spec.steps + 1):
        x, y = get_batch(tokens, spec.seed, step, n_seqs, spec.model.context_length, torch.device("cpu"))
        lr = lr_at(step, spec.steps, spec.lr, spec.train, warmup=spec.warmup, constant=spec.stable)
        losses.append(train_step(model, optimizer, x, y, lr, nullcontext(), spec.train.grad_clip).item())
    return losses


def test_stacked_runs_equal_the_same_runs_alone():
    # Three runs of one shape with their own seeds, peak rates and lengths (so their schedules
    # differ at every step, and two leave the stack before the last): every step's loss equal to
    # the run alone to 1e-6 (measured: at most 2 ulp of fp32, from the batched matmuls' order).
    tokens = np.random.default_rng(0).integers(0, 256, size=50_000).astype(np.uint16)
    train = TrainConfig(batch_tokens=256, device="cpu", threads=1, warmup_fraction=0.1)
    shape = GPTConfig(vocab_size=256, context_length=32, d_model=32, n_layers=2, n_heads=2)
    specs = [RunSpec("a", shape, train, 1e-2, 256 * 12, seed=0), RunSpec("b", shape, train, 5e-3, 256 * 20, seed=1),
             RunSpec("c", shape, train, 2e-2, 256 * 16, seed=7)]
    stack, stacked = Stack(specs, tokens, torch.device("cpu")), {s.run_id: [] for s in specs}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # vmap's fallback for CPU attention: slower, not different
        while stack.specs:
            in_stack = [s.run_id for s in stack.specs]
            for run_id, loss in zip(in_stack, stack.step().tolist()):
                stacked[run_id].append(loss)
    for spec in specs:
        assert stacked[spec.run_id] == pytest.approx(alone(spec, tokens), rel=1e-6, abs=0), spec.run_id
    assert [len(stacked[s.run_id]) for s in specs] == [12, 20, 16]
