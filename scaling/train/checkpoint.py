"""A run's checkpoints: saving them, and the state a run starts from (step 0, its own last
checkpoint, or for a WSD branch the stable run's checkpoint at its branch point).

A checkpoint holds the weights, the optimizer's moments and the loop's counters (step, time, the
partial train-loss sum), so a resumed run ends with bitwise the weights of an uninterrupted one
on the same machine. Writes are atomic; a checkpoint that cannot be read (a file damaged on
disk) is moved aside and the run starts again from step 0. The metrics logged after the
checkpoint are dropped: the resumed run logs those steps again.
"""

from __future__ import annotations

import io
import json
import os
import time
import warnings
from pathlib import Path
from typing import Any

import torch

from scaling.errors import UsageError
from scaling.reading import excerpt, open_regular
from scaling.runs.store import CHECKPOINT, METRICS, read_jsonl, sync_file, write_atomic
from scaling.train.model import GPT
from scaling.train.spec import RunSpec


def save_checkpoint(path: Path, model: GPT, optimizer: torch.optim.Optimizer, state: dict) -> None:
    """Weights, optimizer moments and the loop's counters, replaced atomically (a kill leaves the old one)."""
    buffer = io.BytesIO()
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), **state}, buffer)
    write_atomic(path, buffer.getvalue())


def save_at(path: Path, model: GPT, optimizer: torch.optim.Optimizer, state: dict, step: int, start: float,
            loss_sum: torch.Tensor, loss_count: int) -> dict:
    """Save the loop's state at `step` to `path` (the run's checkpoint, or a stable run's kept
    checkpoint at a branch point) and return it. The metrics so far are synced first: they must
    outlast a power cut too, and a branch copies the records up to its branch point."""
    sync_file(path.parent / METRICS)
    state = {**state, "step": step, "elapsed_s": time.perf_counter() - start, "loss_sum": loss_sum.item(),
             "loss_count": loss_count}
    save_checkpoint(path, model, optimizer, state)
    return state


# The loop's counters in a checkpoint, and the types they must have.
COUNTERS: dict[str, type[int] | tuple[type[int], type[float]]] = {
    "step": int, "elapsed_s": (int, float), "loss_sum": (int, float), "loss_count": int}


def _problem(checkpoint: object, model: GPT, steps: int) -> str | None:
    """What makes a checkpoint that loaded unusable for this run, or None. Checked before anything
    is loaded or truncated: a partly loaded model, or metrics cut at a wrong step, is lost work."""
    if not isinstance(checkpoint, dict):
        return "not a checkpoint of scaling.train"
    missing = [k for k in ("identity", "model", "optimizer", *COUNTERS) if k not in checkpoint]
    if missing:
        return f"no {', '.join(missing)}"
    for key, kind in COUNTERS.items():
        value = checkpoint[key]
        if isinstance(value, bool) or not isinstance(value, kind) or not value >= 0:
            return f"{key} is {excerpt(value)}, not a number >= 0"
    if checkpoint["step"] > steps:
        return f"step {checkpoint['step']} is past the run's {steps} steps"
    expected = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    weights = checkpoint["model"]
    found = {k: tuple(v.shape) for k, v in weights.items()} if isinstance(weights, dict) and all(
        isinstance(v, torch.Tensor) for v in weights.values()) else None
    if found != expected:
        return "its weights do not match the model's shapes"
    if not isinstance(checkpoint["optimizer"], dict):
        return "no optimizer state"
    return None


def read_checkpoint(path: Path, device: torch.device, model: GPT, steps: int) -> dict | None:
    """The checkpoint's contents; None, with the file moved aside and a warning, when it is
    unusable: damaged, not a regular file (a FIFO would block the read forever), or loading but
    wrong (a key missing, a negative step, other shapes)."""
    try:
        with open_regular(path, "checkpoint") as f:      # a FIFO or a device: refused, not waited on
            checkpoint = torch.load(f, map_location=device, weights_only=True)
        problem = _problem(checkpoint, model, steps)
        if problem:
            raise ValueError(problem)
    except Exception as exc:  # a damaged file fails inside unpickling with errors of many types
        aside = path.with_name(path.name + ".unusable")
        os.replace(path, aside)
        warnings.warn(f"{path}: unusable checkpoint ({type(exc).__name__}: {str(exc)[:200]}); moved "
                      f"to {aside.name}, training this run from step 0", stacklevel=4)
        return None
    return checkpoint


def branch_start(checkpoint: dict, spec: RunSpec) -> bool:
    """Whether `checkpoint` is the one the stable run of this branch saved at its branch point (a
    branch's first start: the sweep copies it into the branch's folder)."""
    found = checkpoint["identity"]
    return (spec.branch_of is not None and isinstance(found, dict) and found.get("run_id") == spec.branch_of
            and found.get("lr") == spec.lr and found.get("seed") == spec.seed
            and checkpoint["step"] == spec.branch_step)


def load_checkpoint(checkpoint: dict, path: Path, model: GPT, optimizer: torch.optim.Optimizer, identity: dict,
                    spec: RunSpec | None = None) -> dict:
    """Load a checkpoint's weights and moments; the rest is the loop's state. A branch also takes
    its stable run's checkpoint at its branch point, and counts its own steps and time from there
    (its log's clock goes on from the stable run's)."""
    if spec is not None and branch_start(checkpoint, spec):
        model.load_state_dict(checkpoint.pop("model"))
        optimizer.load_state_dict(checkpoint.pop("optimizer"))
        return {**checkpoint, "identity": identity, "start_step": checkpoint["step"],
                "start_elapsed_s": checkpoint["elapsed_s"]}
    if checkpoint["identity"] != identity:
        raise UsageError(f"{path} belongs to a different run ({checkpoint['identity']}, this run is "
                         f"{identity}); delete it to train this run from scratch")
    model.load_state_dict(checkpoint.pop("model"))
    optimizer.load_state_dict(checkpoint.pop("optimizer"))
    return checkpoint


def truncate_metrics(path: Path, last_step: int) -> None:
    """Drop the records logged after the checkpoint: the resumed run logs those steps again."""
    if path.exists():
        kept = [r for r in read_jsonl(path) if r["step"] <= last_step]
        write_atomic(path, "".join(json.dumps(r, sort_keys=True) + "\n" for r in kept))


def restore(spec: RunSpec, run_dir: Path, model: GPT, optimizer: torch.optim.Optimizer, device: torch.device) -> dict:
    """The loop's state to start from (its counters; `model` and `optimizer` loaded in place): the
    run's checkpoint when it has a usable one, else step 0. Its metrics are cut back to match."""
    identity = {"run_id": spec.run_id, "steps": spec.steps, "lr": spec.lr, "seed": spec.seed}
    state: dict[str, Any] = {"identity": identity, "step": 0, "elapsed_s": 0.0, "initial_loss": None,
                             "loss_sum": 0.0, "loss_count": 0, "start_step": 0, "start_elapsed_s": 0.0}
    path = run_dir / CHECKPOINT
    checkpoint = read_checkpoint(path, device, model, spec.steps) if path.exists() else None
    if checkpoint is not None:
        state = load_checkpoint(checkpoint, path, model, optimizer, identity, spec)
        state = {"start_step": 0, "start_elapsed_s": 0.0, **state}  # one written before branches existed
    truncate_metrics(run_dir / METRICS, state["step"])
    return state
