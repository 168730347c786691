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

import glob
import os
import sys

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


# Device files without which Linux has no GPU for torch: NVIDIA's, ROCm's, WSL's.
GPU_DEVICE_FILES = ("/dev/nvidia[0-9]*", "/dev/kfd", "/dev/dxg")


def run_device(device: str) -> str:
    """The device kind `train.device` resolves to in this process (auto: cuda, else mps, else cpu).

    Where torch is not loaded yet (a dry run's estimate) and Linux shows no GPU device file, auto
    is cpu without importing torch, which takes seconds; a process that trains has torch loaded
    and asks it."""
    if device != "auto":
        return device
    if "torch" not in sys.modules and sys.platform.startswith("linux") and \
            not any(glob.glob(pattern) for pattern in GPU_DEVICE_FILES):
        return "cpu"
    import torch

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


def workers_and_threads(runs: list, workers: int | None = None, threads_per_run: int | None = None,
                        runs_per_gpu: int = 4, bounded: bool = True) -> tuple[int, int]:
    """(workers, threads per run) for these runs (anything with a `.spec`), by the rule in the
    module docstring; `workers`, `threads_per_run`: the executor's settings (None: the rule's).
    Unless `bounded` is False (more runs may come), a sweep too small for workers gets one."""
    train = runs[0].spec.train
    threads = threads_per_run or train.threads or 1
    if workers is None:
        small = bounded and too_small_for_workers(runs)
        workers = 1 if small else default_workers(run_device(train.device), threads, runs_per_gpu)
    return max(1, min(workers, len(runs)) if bounded else workers), threads


def too_small_for_workers(runs: list) -> bool:
    """Whether these runs (anything with a `.spec`) would take under POOL_MIN_SECONDS on one core
    at ASSUMED_FLOPS: less than starting the workers would cost."""
    return sum(run.spec.trained_flops() for run in runs) / ASSUMED_FLOPS < POOL_MIN_SECONDS
