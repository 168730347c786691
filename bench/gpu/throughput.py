"""A sweep's shapes on one device, k runs at once: tokens/s, share of the card's bf16 peak, memory per run.

A GPU trains one tiny model with most of its time idle: a step of a 100K-parameter model is a few
hundred small kernels, each launched from Python. `executor.runs_per_gpu` packs k runs, each in its
own process with its own CUDA context, onto one GPU so that their kernels fill each other's gaps.
`measure` times that: k fresh processes train the same shape at once (scaling.train.loop's real
step: the loop's batches, bf16 autocast, AdamW, clipping; bench/bench_train.py's `training_steps`),
each over the same windows after a warm-up, for each shape in turn; the figure is the sum of the
k runs' tokens/s, and each run's peak GPU memory (torch.cuda.max_memory_allocated).

The peak a share is taken of: the card's dense bf16 tensor rate from its datasheet (`bf16_peak`),
beside the bf16 matmul rate measured on the card in the same call (bench_train.matmul_flops).
"""

from __future__ import annotations

import gc
import multiprocessing as mp
import queue
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # bench/: bench_train
from bench_train import Layout, Timing, median_rate, sync, training_steps  # noqa: E402

from scaling.config import TrainConfig  # noqa: E402
from scaling.train.shape import GPTConfig, flops_by_measure  # noqa: E402

# Dense bf16 tensor-core peaks, FLOP/s, from NVIDIA's datasheets (which print the rate with 2:4
# sparsity; dense is half). Matched against torch.cuda.get_device_name in this order: the PCIe and
# NVL parts before the SXM names they contain ('NVIDIA H100 80GB HBM3' is the SXM part, 'NVIDIA
# H200' the H200 SXM). The measured matmul rate is reported beside it (KINDS.md saw 769-798 TFLOP/s
# on an H100 SXM and an H200 for an 8192^3 product).
BF16_DENSE_PEAKS = (
    ("H100 PCIe", "H100 PCIe", 756e12),
    ("H100 NVL", "H100 NVL", 835e12),
    ("H200 NVL", "H200 NVL", 835e12),
    ("H100", "H100 SXM", 989e12),
    ("H200", "H200 SXM", 989e12),
    ("A100", "A100", 312e12),
)


def bf16_peak(device_name: str) -> tuple[str, float] | None:
    """(the part, its dense bf16 peak in FLOP/s) for a CUDA device name, or None if not in the table."""
    for pattern, part, peak in BF16_DENSE_PEAKS:
        if pattern in device_name:
            return part, peak
    return None


@dataclass(frozen=True)
class ShapeJob:
    model: GPTConfig
    lr: float


def time_shapes(jobs: list[ShapeJob], train: TrainConfig, layout: Layout, timing: Timing, start, results) -> None:
    """In a worker process: each shape's tokens/s and peak GPU memory (put on `results`), waiting
    at `start` for the other k-1 workers before each shape's timed windows."""
    for index, job in enumerate(jobs):
        if torch.cuda.is_available():
            torch.cuda.reset_peak_memory_stats()
        run, device = training_steps(job.model, train, job.lr, layout)
        begin = time.perf_counter()
        run(0, timing.warmup)
        sync(device)
        warmup_s = time.perf_counter() - begin   # with train.compile: the compile time
        start.wait()
        rate = median_rate(run, device, timing, train.batch_tokens)
        memory = torch.cuda.max_memory_allocated() if device.type == "cuda" else None
        results.put((index, rate, memory, warmup_s))
        del run
        gc.collect()
        if device.type == "cuda":
            torch.cuda.empty_cache()


def measure(jobs: list[ShapeJob], train: TrainConfig, layout: Layout, timing: Timing, deadline: float) -> list[dict]:
    """Each shape's figures with `layout.runs` runs at once, as far as the time to `deadline`
    (time.monotonic) allows: a shape is reported only once all its runs have reported it."""
    if time.monotonic() >= deadline:
        return []
    context = mp.get_context("spawn")
    start, results = context.Barrier(layout.runs), context.Queue()
    workers = [context.Process(target=time_shapes, args=(jobs, train, layout, timing, start, results))
               for _ in range(layout.runs)]
    for worker in workers:
        worker.start()
    by_shape: dict[int, list] = {}
    try:
        while sum(map(len, by_shape.values())) < len(jobs) * layout.runs and time.monotonic() < deadline:
            try:
                index, rate, memory, warmup_s = results.get(timeout=1)
                by_shape.setdefault(index, []).append((rate, memory, warmup_s))
            except queue.Empty:
                if any(worker.exitcode for worker in workers):  # one failed: the rest would wait for it
                    break
    finally:
        for worker in workers:
            if worker.is_alive():
                worker.kill()
            worker.join()
    return [shape_figures(jobs[i], got, layout) for i, got in sorted(by_shape.items()) if len(got) == layout.runs]


def shape_figures(job: ShapeJob, got: list, layout: Layout) -> dict:
    rates, memories, warmups = zip(*got)
    model = job.model
    return {"shape": f"d{model.d_model}/L{model.n_layers}", "runs": layout.runs, "compile": layout.compile,
            "tokens_per_s": sum(rates), "tokens_per_s_per_run": statistics.median(rates),
            "flops_per_token": flops_by_measure(model)["exact"],
            "flop_s": sum(rates) * flops_by_measure(model)["exact"],
            "memory_bytes_per_run": max(memories) if memories[0] is not None else None,
            "warmup_s": statistics.median(warmups)}
