"""How many runs a machine trains at once, and on how many threads each: the local executor's rule.

A tiny model cannot use a whole machine: on 2 CPU cores two single-threaded runs side by side
train more tokens per second than one run on two threads, and on a GPU several tiny runs fit at
once. The local executor therefore keeps `workers` runs in flight, each in its own worker process
with `threads_per_run` torch threads. The rule for the defaults (`default_workers`):

- threads_per_run: `executor.threads_per_run`, else `train.threads`, else 1;
- workers on CPU: the cores this process may use // threads_per_run;
- workers on CUDA: GPUs x `executor.runs_per_gpu`, at most the cores // threads_per_run (each
  run needs a core to feed its GPU); on MPS: runs_per_gpu, likewise capped;
- never more workers than runs; with one worker the runs train in this process, one after another,
  and so does a sweep too small to pay for starting workers (under POOL_MIN_SECONDS of estimated
  single-core time: the test suite's micro sweeps).

Determinism. torch's CPU kernels split reductions by thread count, so a run's losses differ in
the last bits between 1 and 2 threads. The thread count is therefore fixed for all the runs of a
sweep (default 1), every run sets it before training, and summary.json records it as `threads`.
How many runs share the machine changes no run's result: each run is alone in its process with
the same thread count, the same seed and the same batches.
"""

from __future__ import annotations

import os

# Starting a worker costs seconds (it imports torch), so with `workers` left to the rule a sweep
# estimated (at ASSUMED_FLOPS, one core) to take less than POOL_MIN_SECONDS trains in this process.
ASSUMED_FLOPS = 15e9
POOL_MIN_SECONDS = 20.0


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows
        return os.cpu_count() or 1


def visible_gpus() -> list[str]:
    """CUDA devices this process may use, as CUDA_VISIBLE_DEVICES entries."""
    import torch

    if not torch.cuda.is_available():
        return []
    listed = os.environ.get("CUDA_VISIBLE_DEVICES")
    if listed:
        return [d.strip() for d in listed.split(",") if d.strip()][:torch.cuda.device_count()]
    return [str(i) for i in range(torch.cuda.device_count())]


def run_device(device: str) -> str:
    """The device kind `train.device` resolves to in this process (auto: cuda, else mps, else cpu)."""
    import torch

    if device != "auto":
        return device
    if torch.cuda.is_available():
        return "cuda"
    return "mps" if torch.backends.mps.is_available() else "cpu"


def default_workers(device: str, threads_per_run: int, runs_per_gpu: int, cores: int | None = None,
                    gpus: int | None = None) -> int:
    """How many runs to keep in flight: the rule in the module docstring."""
    cpu_slots = max(1, (cores or usable_cores()) // threads_per_run)
    if device == "cuda":
        return max(1, min((len(visible_gpus()) if gpus is None else gpus) * runs_per_gpu, cpu_slots))
    if device == "mps":
        return max(1, min(runs_per_gpu, cpu_slots))
    return cpu_slots


def too_small_for_workers(runs: list) -> bool:
    """Whether these runs (anything with a `.spec`) would take under POOL_MIN_SECONDS on one core
    at ASSUMED_FLOPS: less than starting the workers would cost."""
    return sum(run.spec.trained_flops() for run in runs) / ASSUMED_FLOPS < POOL_MIN_SECONDS
