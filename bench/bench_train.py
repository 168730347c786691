"""Training throughput and model FLOPs utilisation for every shape of configs/tiny.yaml and small.yaml.

    python bench/bench_train.py                   # both configs, both layouts
    python bench/bench_train.py --config tiny     # one config
    python bench/bench_train.py --compile         # also time torch.compile'd training steps
    python bench/bench_train.py --glibc-malloc    # also time without scaling.train.loop.keep_freed_memory
    python bench/bench_train.py --profile         # where a step's time goes, by operator group

Each shape is timed in two layouts of the machine, the two a sweep can use:
- one run on every core (`cores` torch threads: executor.threads_per_run = cores);
- packed: one single-threaded run per core at once, the local executor's default on CPU (on
  CUDA, `--packed` runs share the GPU); its tokens/s is the sum over the runs.
Every measurement starts fresh processes, so that no setting (threads, allocator) leaks into the
next one. It times the real training step (scaling.train.batches' get_batch, scaling.train.loop's
train_step and AdamW; one batch of train.batch_tokens a step), medians over timed windows after warm-up steps, and turns
tokens/s into model FLOP/s with the exact per-token count (scaling.train.shape.flops_by_measure: every
matmul of forward and backward, attention and output layer included). MFU divides that by the
dense matmul throughput of the whole machine (fp32 on CPU over all cores, bf16 on CUDA),
measured in this run.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import queue
import statistics
import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import torch

from scaling.config import ExecutorConfig, TrainConfig, load_config
from scaling.sweeps.packing import usable_cores
from scaling.train.batches import get_batch
from scaling.train.loop import compiled, keep_freed_memory, make_optimizer, mixed_precision, pick_device, train_step
from scaling.train.model import GPT
from scaling.train.shape import GPTConfig, flops_by_measure, param_counts

CONFIGS = {name: Path(__file__).parent.parent / "configs" / f"{name}.yaml" for name in ("tiny", "small")}


@dataclass(frozen=True)
class Layout:
    runs: int               # runs training at once
    threads: int | None     # torch threads of each run (None on CUDA)
    compile: bool = False
    glibc_malloc: bool = False  # leave glibc's default thresholds (no keep_freed_memory)

    @property
    def label(self) -> str:
        text = f"{self.runs} run{'s' if self.runs > 1 else ''}" + (f" x {self.threads} thr" if self.threads else "")
        return text + (" compiled" if self.compile else "") + (" glibc" if self.glibc_malloc else "")


@dataclass(frozen=True)
class Timing:
    warmup: int   # steps before timing (and before the runs wait for each other)
    windows: int  # timed windows; the median counts
    steps: int    # steps per window


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def matmul_flops(device: torch.device, size: int = 2048, repeats: int = 20) -> float:
    """Dense matmul FLOP/s: fp32 on CPU, bf16 on CUDA; the best of several timed products."""
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    a = torch.randn(size, size, device=device, dtype=dtype)
    b = torch.randn(size, size, device=device, dtype=dtype)
    for _ in range(3):
        a @ b
    best = float("inf")
    for _ in range(repeats):
        sync(device)
        start = time.perf_counter()
        a @ b
        sync(device)
        best = min(best, time.perf_counter() - start)
    return 2 * size**3 / best


def training_steps(model_cfg: GPTConfig, train: TrainConfig, lr: float, layout: Layout):
    """(run(first_step, count), device): the training loop's steps for this shape, set up in this
    process as a run of the sweep sets them up (threads, allocator, model, AdamW, compile)."""
    if layout.threads:
        torch.set_num_threads(layout.threads)
    device = pick_device(train.device)
    if not layout.glibc_malloc:
        keep_freed_memory()
    torch.manual_seed(0)
    model = GPT(model_cfg).to(device)
    optimizer = make_optimizer(model, train, lr)
    step_model = compiled(model, train.model_copy(update={"compile": layout.compile}))
    tokens = np.random.default_rng(0).integers(0, model_cfg.vocab_size, size=1_000_000, dtype=np.uint16)
    n_seqs = train.batch_tokens // model_cfg.context_length
    autocast = mixed_precision(device)

    def run(first_step: int, count: int) -> None:
        for step in range(first_step, first_step + count):
            x, y = get_batch(tokens, 0, step, n_seqs, model_cfg.context_length, device)
            train_step(step_model, optimizer, x, y, lr, autocast, train.grad_clip)

    return run, device


def time_run(model_cfg: GPTConfig, train: TrainConfig, lr: float, layout: Layout, timing: Timing,
             start, rates) -> None:
    """One run's tokens/s (put on `rates`), in a worker process; waits at `start` for the others."""
    run, device = training_steps(model_cfg, train, lr, layout)
    run(0, timing.warmup)
    start.wait()
    rates.put(median_rate(run, device, timing, train.batch_tokens))


def median_rate(run, device: torch.device, timing: Timing, batch_tokens: int) -> float:
    """The median tokens/s of `timing.windows` windows of `timing.steps` steps each, after the warmup."""
    window_rates = []
    for w in range(timing.windows):
        sync(device)
        begin = time.perf_counter()
        run(timing.warmup + w * timing.steps, timing.steps)
        sync(device)
        window_rates.append(timing.steps * batch_tokens / (time.perf_counter() - begin))
    return statistics.median(window_rates)


# Operator groups of a step's profile: the first group whose pattern is in an op's name takes its time.
OP_GROUPS = {"matmul": ("aten::mm", "aten::addmm", "aten::bmm"), "attention": ("flash", "attention"),
             "softmax+loss": ("softmax", "nll_loss"), "gelu": ("gelu",), "layernorm": ("layer_norm",),
             "zero fills": ("fill_", "zero_"), "adamw": ("adamw", "AdamW")}


def profile_run(model_cfg: GPTConfig, train: TrainConfig, lr: float, layout: Layout, timing: Timing,
                start, rates) -> None:
    """Where one run's step time goes: {group: share of the profiled CPU time, "ms/step": ...}."""
    run, _ = training_steps(model_cfg, train, lr, layout)
    run(0, timing.warmup)
    start.wait()
    steps = timing.windows * timing.steps
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        run(timing.warmup, steps)
    shares = dict.fromkeys([*OP_GROUPS, "other"], 0.0)
    events = prof.key_averages()
    total = sum(e.self_cpu_time_total for e in events)
    for e in events:
        group = next((g for g, patterns in OP_GROUPS.items() if any(p in e.key for p in patterns)), "other")
        shares[group] += e.self_cpu_time_total / total
    rates.put({"ms/step": total / steps / 1e3, **shares})


def in_workers(target, model_cfg: GPTConfig, train: TrainConfig, lr: float, layout: Layout, timing: Timing) -> list:
    """What `target` measured in each of `layout.runs` fresh processes running this shape at once."""
    context = mp.get_context("spawn")
    start, rates = context.Barrier(layout.runs), context.Queue()
    workers = [context.Process(target=target, args=(model_cfg, train, lr, layout, timing, start, rates))
               for _ in range(layout.runs)]
    for worker in workers:
        worker.start()
    measured = []
    while len(measured) < len(workers):
        try:
            measured.append(rates.get(timeout=1))
        except queue.Empty:
            if any(worker.exitcode for worker in workers):  # one failed: the rest would wait for it
                for worker in workers:
                    worker.kill()
                raise SystemExit("a timing process failed; its traceback is above") from None
    for worker in workers:
        worker.join()
    return measured


def layouts(device: torch.device, cores: int, packed: int | None, compile_too: bool, glibc_too: bool) -> list[Layout]:
    threads = None if device.type == "cuda" else cores
    packed = packed or (ExecutorConfig().runs_per_gpu if device.type == "cuda" else cores)
    base = [Layout(1, threads), Layout(packed, None if device.type == "cuda" else max(1, cores // packed))]
    variants = list(base)
    if compile_too:
        variants += [replace(b, compile=True) for b in base]
    if glibc_too:
        variants += [replace(b, glibc_malloc=True) for b in base]
    return variants


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", choices=sorted(CONFIGS), action="append", help="config(s) to time (default: all)")
    p.add_argument("--device", default="auto")
    p.add_argument("--packed", type=int,
                   help="runs at once in the packed layout (default: cores; executor.runs_per_gpu on CUDA)")
    p.add_argument("--compile", action="store_true", help="also time torch.compile'd training steps")
    p.add_argument("--glibc-malloc", action="store_true", help="also time with glibc's default allocator settings")
    p.add_argument("--profile", action="store_true",
                   help="instead of timing, profile one single-threaded run's steps by operator group (CPU)")
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--windows", type=int, default=5)
    p.add_argument("--steps", type=int, default=20, help="steps per timed window")
    args = p.parse_args(argv)
    device = pick_device(args.device)
    if args.profile and device.type != "cpu":
        p.error("--profile reads the CPU time of operators: use --device cpu")
    cores = usable_cores()
    torch.set_num_threads(cores)
    timing = Timing(args.warmup, args.windows, args.steps)
    shape_columns = f"{'config':<6} {'d':>4} {'L':>2} {'H':>2} {'N non-emb':>10} {'FLOP/token':>11}  "
    if args.profile:
        print(f"share of a step's CPU time by operator group, one run on one thread; torch {torch.__version__}")
        print(shape_columns + f"{'ms/step':>8}  " + "  ".join(f"{g:>12}" for g in [*OP_GROUPS, "other"]))
    else:
        peak = matmul_flops(device)
        modes = layouts(device, cores, args.packed, args.compile, args.glibc_malloc)
        print(f"device {device}, {cores} cores; dense {'bf16' if device.type == 'cuda' else 'fp32'} matmul "
              f"on the whole machine: {peak / 1e9:.1f} GFLOP/s; torch {torch.__version__}")
        print(shape_columns + "  ".join(f"{m.label:>24}" for m in modes))
        print(" " * len(shape_columns) + "  ".join(f"{'tok/s':>9} {'GFLOP/s':>7} {'MFU':>6}" for _ in modes))
    for name in args.config or sorted(CONFIGS, reverse=True):
        cfg = load_config(CONFIGS[name])
        train = cfg.train.model_copy(update={"device": device.type})
        for shape in cfg.grid.models:
            model_cfg = GPTConfig.from_config(cfg.model, shape, cfg.tokenizer.vocab_size)
            per_token = flops_by_measure(model_cfg)["exact"]
            lr = shape.lr or cfg.train.lr
            if args.profile:
                shares = in_workers(profile_run, model_cfg, train, lr, Layout(1, 1), timing)[0]
                cells = [f"{shares.pop('ms/step'):>8.1f}"] + [f"{share:>12.1%}" for share in shares.values()]
            else:
                cells = []
                for mode in modes:
                    rate = sum(in_workers(time_run, model_cfg, train, lr, mode, timing))
                    cells.append(f"{rate:>9,.0f} {rate * per_token / 1e9:>7.1f} {rate * per_token / peak:>6.1%}")
            print(f"{cfg.name:<6} {shape.d_model:>4} {shape.n_layers:>2} {shape.n_heads:>2} "
                  f"{param_counts(model_cfg)[1]:>10,} {per_token:>11.3g}  " + "  ".join(cells), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
