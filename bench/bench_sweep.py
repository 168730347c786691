"""A sweep's achieved FLOP/s against the packed benchmark of its own shapes, and where the time goes.

    python bench/bench_sweep.py                        # the demo, configs/tiny.yaml, into a fresh store
    python bench/bench_sweep.py CONFIG --runs-dir DIR  # another sweep (a store already trained is not timed)

1. The sweep is trained into an empty run store by the sweep driver, as `scaling sweep` trains it,
   with a reporter that clocks each run's start and end in the driver.
2. Each of its shapes is timed in the packed layout (one single-threaded run per core at once,
   bench/bench_train.py's `time_run`): the rate a run of that shape reaches when every core trains.
3. The ideal wall time is the sweep's work at those rates spread over the cores:
   sum over runs of (exact FLOPs / packed FLOP/s per run) / cores. Achieved over ideal is the
   sweep's efficiency; the cores' time (cores x wall) is split into
   - training: the loop's steps (from each run's logged tokens/s),
   - evaluation, logging and checkpoints: the rest of each run's own wall time,
   - start-up and wrap-up: a run's span in the driver beyond its own wall time (data, model,
     summary, store),
   - idle: cores without a run (the schedule's tail, the driver between runs),
   and training's own loss against the packed rate (the same steps, slower in the sweep).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))    # bench_train, beside this file

from bench_train import Layout, Timing, in_workers, time_run  # noqa: E402

from scaling.config import load_config  # noqa: E402
from scaling.sweeps.driver import run_sweep  # noqa: E402
from scaling.sweeps.packing import usable_cores  # noqa: E402
from scaling.sweeps.plan import plan  # noqa: E402
from scaling.train.shape import GPTConfig, flops_by_measure  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


class Clock:
    """A sweep reporter that records when each run starts and ends, in the driver's clock."""

    def __init__(self):
        self.start, self.end = {}, {}

    def begin(self, jobs): pass

    def started(self, job):
        self.start[job.spec.run_id] = time.perf_counter()

    def progress(self, job, tokens_done, tokens_total, tokens_per_s): pass

    def finished(self, job, summary):
        self.end[job.spec.run_id] = time.perf_counter()


def training_seconds(metrics: Path, batch_tokens: int) -> float:
    """The loop's step time: each logged interval's tokens over its tokens/s (evaluation excluded)."""
    records = [json.loads(line) for line in metrics.read_text().splitlines()]
    steps = [r["step"] for r in records]
    return sum((b - a) * batch_tokens / r["tokens_per_s"] for a, b, r in zip(steps, steps[1:], records[1:]))


def packed_rates(cfg, cores: int, timing: Timing) -> dict:
    """Per shape the sweep trains, one run's FLOP/s when `cores` single-threaded runs of it train at once."""
    rates = {}
    for shape in {(r.shape.d_model, r.shape.n_layers): r.shape for r in plan(cfg)}.values():
        model = GPTConfig.from_config(cfg.model, shape, cfg.tokenizer.vocab_size)
        tokens_per_s = in_workers(time_run, model, cfg.train, shape.lr or cfg.train.lr, Layout(cores, 1), timing)
        rates[(shape.d_model, shape.n_layers)] = sum(tokens_per_s) / cores * flops_by_measure(model)["exact"]
    return rates


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("config", nargs="?", type=Path, default=ROOT / "configs" / "tiny.yaml")
    ap.add_argument("--runs-dir", type=Path, help="an empty run store root (default: a temporary folder)")
    args = ap.parse_args()
    cfg = load_config(args.config)
    runs_dir = args.runs_dir or Path(tempfile.mkdtemp(prefix="bench-sweep-"))
    clock = Clock()
    begin = time.perf_counter()
    result = run_sweep(cfg, runs_dir, reporter=clock)
    wall = time.perf_counter() - begin
    if result.skipped:
        raise SystemExit(f"{runs_dir / cfg.name} already held {len(result.skipped)} runs: give an empty --runs-dir")
    cores = cfg.executor.workers or usable_cores()
    rates = packed_rates(cfg, cores, Timing(warmup=10, windows=5, steps=20))
    split = {"training": 0.0, "evaluation, logging, checkpoints": 0.0, "start-up and wrap-up": 0.0}
    ideal = flops = lost = 0.0
    for run in (r for r in plan(cfg) if r.kind != "stable"):
        folder = result.sweep_dir / run.run_id
        summary = json.loads((folder / "summary.json").read_text())
        train_s = training_seconds(folder / "metrics.jsonl", cfg.train.batch_tokens)
        at_packed = run.trained_flops_exact / rates[(run.shape.d_model, run.shape.n_layers)]
        split["training"] += train_s
        split["evaluation, logging, checkpoints"] += summary["wall_s"] - train_s
        split["start-up and wrap-up"] += clock.end[run.run_id] - clock.start[run.run_id] - summary["wall_s"]
        ideal, flops, lost = ideal + at_packed / cores, flops + run.trained_flops_exact, lost + train_s - at_packed
    split["idle"] = cores * wall - sum(split.values())
    print(f"{cfg.name}: {len(result.trained)} runs, {flops:.3g} exact FLOPs in {wall:.0f} s on {cores} cores: "
          f"{flops / wall:.3g} FLOP/s; packed benchmark of its shapes: {flops / ideal:.3g} FLOP/s "
          f"(ideal wall {ideal:.0f} s); achieved / packed {ideal / wall:.0%}")
    print(f"the cores' {cores * wall:.0f} s:")
    for name, seconds in split.items():
        print(f"  {name:34s} {seconds:8.1f} s  {seconds / (cores * wall):6.1%}")
    print(f"  of training, slower than packed     {lost:8.1f} s  {lost / (cores * wall):6.1%}")


if __name__ == "__main__":
    main()
