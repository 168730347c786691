"""Train one run of the grid: a GPT of one shape on a budget of D tokens, with checkpoints to resume.

One run is `steps = ceil(D / batch_tokens)` AdamW updates, so it trains steps * batch_tokens
tokens: D rounded up to whole batches (by less than one batch). The summary's `tokens` is that
number, the data the model actually saw, and FLOPs are counted from it; `tokens_budget` keeps D.

The learning-rate schedule spans exactly this run's steps (warmup, then decay to min_lr_ratio*lr
at the last step): Hoffmann et al. 2022 showed that a schedule longer than the run overstates
the loss of short runs, which bends the fitted law.

WSD (train.schedule 'wsd', Hagele et al. 2024): warmup, a constant (stable) phase, then a
cooldown over the last cooldown_fraction of the run's steps that also ends at min_lr_ratio*lr
on the last step. Since the lr of the first (1-f) of a WSD run does not depend on its length
(given a shared warmup, `RunSpec.warmup`), one *stable run* per model size trains the constant
phase once and saves a checkpoint at each budget's branch point (`branch_points`, files
store.branch_checkpoint(step)); a *branch* (`branch_of`, `branch_step`) starts from such a
checkpoint and trains only the cooldown. Batches depend on (seed, step) alone, so a branch ends
with bitwise the weights of a WSD run trained from step 0 to its budget. A branch without that
checkpoint simply trains from step 0: the same run, at full cost.

Batches are random windows of the training tokens drawn by a generator seeded from (seed, step),
so a run resumed from its checkpoint sees exactly the batches it would have seen, and ends with
bitwise the same weights on the same machine. A checkpoint that cannot be read (a file damaged
on disk: the writes themselves are atomic) is moved aside and the run starts again from step 0.

A stop request (`request_stop`, called by the command line's SIGINT/SIGTERM handler) ends the
run after the current step, with a checkpoint there, by raising `Interrupted`. An error inside a
run that is neither bad input (`UsageError`) nor the file system's (`OSError`: a full disk, a
folder that cannot be written) does not stop the sweep: the run comes back with status 'failed',
the error as its reason and the traceback in `traceback`.
"""

from __future__ import annotations

import ctypes
import io
import json
import math
import os
import threading
import time
import traceback
import warnings
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from scaling.config import TrainConfig
from scaling.errors import UsageError
from scaling.runs import faults
from scaling.runs.store import (
    CHECKPOINT,
    METRICS,
    append_jsonl,
    branch_checkpoint,
    read_jsonl,
    sync_file,
    write_atomic,
)
from scaling.train.model import GPT, GPTConfig, flops_per_token, param_counts

# Set to stop the run in progress after its current step, with a checkpoint (see request_stop).
STOP = threading.Event()


class Interrupted(KeyboardInterrupt):
    """A stop request ended the run `run_id` at `step` of `steps` (None: between runs), after a checkpoint."""

    def __init__(self, run_id: str | None = None, step: int | None = None, steps: int | None = None):
        super().__init__(run_id, step, steps)  # args alone rebuild it: it pickles out of a worker
        self.run_id, self.step, self.steps = run_id, step, steps


def request_stop() -> None:
    """Ask the run in progress to stop after its current step, writing a checkpoint first."""
    STOP.set()


@dataclass(frozen=True)
class RunSpec:
    run_id: str
    model: GPTConfig
    train: TrainConfig
    lr: float      # this run's peak learning rate (the sweep's, scaled by the width rule)
    tokens: int    # the budget D
    seed: int
    retry_of: str | None = None  # the diverged run this one retries at a lower learning rate
    # Schedule 'wsd' only. warmup: warmup steps (None: warmup_fraction of this run's steps); a
    # sweep shares one warmup among the budgets of a shape, so that their stable phases coincide.
    warmup: int | None = None
    # A stable run: constant lr after warmup up to its last step (no cooldown), saving a
    # checkpoint at each of these steps for the branches. Its summary's status is 'stable'.
    branch_points: tuple[int, ...] = ()
    # A branch: starts from the checkpoint that stable run `branch_of` saved at `branch_step`.
    branch_of: str | None = None
    branch_step: int | None = None

    @property
    def steps(self) -> int:
        """AdamW updates of the run: its budget rounded up to whole batches."""
        return math.ceil(self.tokens / self.train.batch_tokens)

    @property
    def stable(self) -> bool:
        return bool(self.branch_points)

    def schedule(self) -> tuple[int, int]:
        """(warmup steps, step after which the decay starts) of this run's learning-rate schedule."""
        return schedule_bounds(self.steps, self.train, self.warmup, constant=self.stable)


@dataclass(frozen=True)
class TokenData:
    train: np.ndarray            # flat token ids (uint16/uint32, memmap welcome)
    val: np.ndarray              # flat token ids
    val_token_bytes: np.ndarray  # UTF-8 length of each val token, for bits per byte


def pick_device(name: str) -> torch.device:
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "mps" if torch.backends.mps.is_available() else "cpu"
    available = {"cpu": True, "cuda": torch.cuda.is_available(), "mps": torch.backends.mps.is_available()}
    if not available[name]:
        raise UsageError(f"train.device is {name!r} but torch finds no {name} device here")
    return torch.device(name)


def keep_freed_memory() -> None:
    """Let the C library keep the blocks a training step frees, for the next step to reuse.

    glibc's malloc maps large blocks (activations, logits, gradients: megabytes each) afresh from
    the kernel, or trims them off its heap, when they are freed, so later steps page-fault them in
    again: 500-2,600 faults a step for the 25K-parameter tiny model, 10-30% of its step time on one
    thread. With the mmap and trim thresholds raised, freed blocks stay in the heap for the next
    step, as jemalloc or tcmalloc would keep them (`bench/bench_train.py --glibc-malloc` measures
    the difference). No effect where libc is not glibc.
    """
    mallopt = getattr(ctypes.CDLL(None), "mallopt", None)
    if mallopt is not None:
        M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
        mallopt(M_MMAP_THRESHOLD, 1 << 30)
        mallopt(M_TRIM_THRESHOLD, 1 << 30)


def mixed_precision(device: torch.device):
    """The context the forward passes run in: bf16 autocast on CUDA, plain fp32 elsewhere (bf16
    on CPU is far slower than fp32 on most CPUs)."""
    return torch.autocast("cuda", dtype=torch.bfloat16) if device.type == "cuda" else nullcontext()


def compiled(model: GPT, train: TrainConfig) -> torch.nn.Module:
    """The module the training steps call: `model`, or with train.compile torch.compile(model),
    which shares its parameters (so checkpoints and evaluation use `model` itself)."""
    return torch.compile(model) if train.compile else model


def warmup_steps(steps: int, train: TrainConfig) -> int:
    """round(warmup_fraction * steps), leaving at least the last step to the decay."""
    return min(round(train.warmup_fraction * steps), steps - 1)


def cooldown_steps(steps: int, train: TrainConfig) -> int:
    """WSD: round(cooldown_fraction * steps), at least 1 and at most the whole run."""
    return min(steps, max(1, round(train.cooldown_fraction * steps)))


def schedule_bounds(steps: int, train: TrainConfig, warmup: int | None = None,
                    constant: bool = False) -> tuple[int, int]:
    """(warmup, decay_start) in steps: the lr rises over steps 1..warmup, holds until decay_start
    and decays over decay_start+1..steps. cosine/linear decay right after warmup; wsd holds until
    its cooldown (the last cooldown_steps); `constant` (a WSD stable run) never decays."""
    if train.schedule != "wsd":
        warmup = warmup_steps(steps, train) if warmup is None else warmup
        return warmup, warmup
    decay_start = steps if constant else steps - cooldown_steps(steps, train)
    warmup = min(warmup_steps(steps, train) if warmup is None else warmup, decay_start)
    return warmup, decay_start


def decay_shape(progress: float, shape: str) -> float:
    """The fraction of (lr - min_lr) left at `progress` (0..1) of the decay; exactly 0 at 1."""
    if shape == "cosine":
        return 0.5 * (1 + math.cos(math.pi * progress))
    if shape == "1-sqrt":
        return 1 - math.sqrt(progress)
    return 1 - progress


def lr_at(step: int, steps: int, lr: float, train: TrainConfig, warmup: int | None = None,
          constant: bool = False) -> float:
    """Learning rate of update `step` (1..steps): linear warmup to lr, then cosine or linear decay
    that reaches min_lr_ratio*lr at exactly step == steps. For wsd: constant lr after warmup, then a
    cooldown (cooldown_shape) over the last cooldown_fraction of the steps that reaches
    min_lr_ratio*lr at exactly step == steps; `warmup` (steps) overrides warmup_fraction, and
    `constant` (a stable run) leaves out the cooldown."""
    warmup, decay_start = schedule_bounds(steps, train, warmup, constant)
    if step < warmup:
        return lr * step / warmup
    if train.schedule == "wsd" and step <= decay_start:
        return lr
    progress = (step - decay_start) / (steps - decay_start)
    shape = train.cooldown_shape if train.schedule == "wsd" else train.schedule
    min_lr = train.min_lr_ratio * lr
    return min_lr + (lr - min_lr) * decay_shape(progress, shape)


def get_batch(tokens: np.ndarray, seed: int, step: int, n_seqs: int, T: int, device: torch.device):
    """n_seqs random windows of T+1 tokens -> (inputs, next-token targets), each (n_seqs, T)."""
    starts = np.random.default_rng([seed, step]).integers(0, len(tokens) - T, size=n_seqs)
    windows = torch.from_numpy(tokens[starts[:, None] + np.arange(T + 1)].astype(np.int64))
    x, y = windows[:, :-1].contiguous(), windows[:, 1:].contiguous()
    if device.type == "cuda":  # pinned memory lets the copy run without waiting for the GPU
        return x.pin_memory().to(device, non_blocking=True), y.pin_memory().to(device, non_blocking=True)
    return x.to(device), y.to(device)


def val_windows(data: TokenData, eval_tokens: int, T: int, device: torch.device):
    """The first eval_tokens of the validation split as non-overlapping windows (the same for every
    run), and the UTF-8 bytes of the tokens they predict. check_data makes sure there is one."""
    n_windows = min(eval_tokens, len(data.val) - 1) // T
    n = n_windows * T
    x = torch.from_numpy(data.val[:n].astype(np.int64)).view(n_windows, T)
    y = torch.from_numpy(data.val[1:n + 1].astype(np.int64)).view(n_windows, T)
    return x.to(device), y.to(device), int(np.sum(data.val_token_bytes[1:n + 1], dtype=np.int64))


@torch.no_grad()
def evaluate(model: GPT, windows, n_seqs: int, autocast) -> tuple[float, float]:
    """Mean validation loss in nats per token, and bits per byte (the same nats over the text's bytes)."""
    x, y, n_bytes = windows
    model.eval()
    nats = torch.zeros((), dtype=torch.float64, device=x.device)
    for i in range(0, len(x), n_seqs):
        with autocast:
            logits, _ = model(x[i:i + n_seqs])
        nats += F.cross_entropy(logits.float().flatten(0, 1), y[i:i + n_seqs].flatten(), reduction="sum")
    model.train()
    nats = nats.item()
    return nats / y.numel(), nats / math.log(2) / n_bytes


def make_optimizer(model: GPT, train: TrainConfig, lr: float) -> torch.optim.AdamW:
    # nanoGPT's grouping: decay every matrix (the matmul weights and the embedding tables, which
    # are also the output layer when tied); never the LayerNorm gains and biases.
    params = list(model.parameters())
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": train.weight_decay},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=lr, betas=(train.beta1, train.beta2), fused=True)


def save_checkpoint(path: Path, model: GPT, optimizer, state: dict) -> None:
    """Weights, optimizer moments and the loop's counters, replaced atomically (a kill leaves the old one)."""
    buffer = io.BytesIO()
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), **state}, buffer)
    write_atomic(path, buffer.getvalue())


def read_checkpoint(path: Path, device) -> dict | None:
    """The checkpoint's contents; None, with the file moved aside and a warning, when it is unusable."""
    try:
        checkpoint = torch.load(path, map_location=device, weights_only=True)
        if not isinstance(checkpoint, dict) or not {"identity", "model", "optimizer", "step"} <= set(checkpoint):
            raise ValueError("not a checkpoint of scaling.train")
    except Exception as exc:  # a damaged file fails inside unpickling with errors of many types
        aside = path.with_name(path.name + ".unusable")
        os.replace(path, aside)
        warnings.warn(f"{path}: unusable checkpoint ({type(exc).__name__}: {exc}); moved to {aside.name}, "
                      "training this run from step 0", stacklevel=3)
        return None
    return checkpoint


def branch_start(checkpoint: dict, spec: RunSpec) -> bool:
    """Whether `checkpoint` is the one the stable run of this branch saved at its branch point (a
    branch's first start: the sweep copies it into the branch's folder)."""
    found = checkpoint["identity"]
    return (spec.branch_of is not None and isinstance(found, dict) and found.get("run_id") == spec.branch_of
            and found.get("lr") == spec.lr and found.get("seed") == spec.seed
            and checkpoint["step"] == spec.branch_step)


def load_checkpoint(checkpoint: dict, path: Path, model: GPT, optimizer, identity: dict,
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


def train_step(model: GPT, optimizer, x, y, lr: float, autocast, grad_clip: float) -> torch.Tensor:
    """One AdamW update at learning rate lr; returns the batch's loss, still on the device."""
    for group in optimizer.param_groups:
        group["lr"] = lr
    with autocast:
        _, loss = model(x, y)
    loss.backward()
    if grad_clip:
        torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip, foreach=True)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return loss.detach()


def divergence(train_loss: float, initial_loss: float, step: int, warmup: int, factor: float) -> str | None:
    """Why the run has diverged, or None. Warmup may overshoot briefly, so the factor waits for its end."""
    if not math.isfinite(train_loss):
        return f"train loss is {train_loss} at step {step}"
    if step > warmup and train_loss > factor * initial_loss:
        return (f"train loss {train_loss:.4g} at step {step} exceeds {factor:g}x "
                f"the initial {initial_loss:.4g} (train.divergence_factor)")
    return None


def truncate_metrics(path: Path, last_step: int) -> None:
    """Drop the records logged after the checkpoint: the resumed run logs those steps again."""
    if path.exists():
        kept = [r for r in read_jsonl(path) if r["step"] <= last_step]
        write_atomic(path, "".join(json.dumps(r, sort_keys=True) + "\n" for r in kept))


def check_data(T: int, eval_tokens: int, data: TokenData) -> None:
    """Refuse splits too small for one window of T + 1 tokens (a sweep checks before writing anything)."""
    if len(data.train) <= T:
        raise UsageError(f"the training split has {len(data.train)} tokens, fewer than one window of "
                         f"model.context_length + 1 = {T + 1}: use a larger corpus or a shorter context")
    if min(eval_tokens, len(data.val) - 1) < T:
        raise UsageError(f"the validation split has {len(data.val)} tokens; evaluation needs at least "
                         f"model.context_length + 1 = {T + 1} (and train.eval_tokens >= {T}): use a larger "
                         "corpus or corpus.val_fraction, or a shorter context")


def check_inputs(spec: RunSpec, data: TokenData) -> None:
    """Refuse what cannot train, warn about what trains on repeated data."""
    T, batch_tokens = spec.model.context_length, spec.train.batch_tokens
    if batch_tokens % T:
        raise UsageError(f"train.batch_tokens {batch_tokens} is not a multiple of context_length {T}")
    check_data(T, spec.train.eval_tokens, data)
    tokens = math.ceil(spec.tokens / batch_tokens) * batch_tokens
    if tokens > len(data.train):
        warnings.warn(f"run {spec.run_id}: {tokens:,} tokens are {tokens / len(data.train):.2f} epochs of "
                      f"the {len(data.train):,} training tokens; later epochs repeat data", stacklevel=3)


def train_run(spec: RunSpec, data: TokenData, run_dir: Path, progress=None) -> dict:
    """Train (or resume) one run in run_dir and return its summary; the caller writes summary.json.

    progress(tokens_done, tokens_total, tokens_per_s) is called at every logged step. An error
    that is not bad input, the file system's or a stop comes back as a summary with status 'failed'.
    """
    check_inputs(spec, data)
    start = time.perf_counter()
    try:
        return _train(spec, data, Path(run_dir), progress)
    except (UsageError, OSError):
        raise
    except Exception as exc:  # a bug, or out of memory: this run failed, the sweep goes on
        summary = summarize(spec, data, "failed", f"{type(exc).__name__}: {exc}", 0,
                            time.perf_counter() - start, {}, pick_device(spec.train.device))
        return {**summary, "traceback": traceback.format_exc()}


def _train(spec: RunSpec, data: TokenData, run_dir: Path, progress) -> dict:
    cfg, train = spec.model, spec.train
    run_dir.mkdir(parents=True, exist_ok=True)
    if train.threads:
        torch.set_num_threads(train.threads)
    device = pick_device(train.device)
    keep_freed_memory()
    autocast = mixed_precision(device)
    steps = spec.steps
    warmup, _ = spec.schedule()
    n_seqs = train.batch_tokens // cfg.context_length

    torch.manual_seed(spec.seed)
    model = GPT(cfg).to(device)
    optimizer = make_optimizer(model, train, spec.lr)
    step_model = compiled(model, train)
    windows = val_windows(data, train.eval_tokens, cfg.context_length, device)

    identity = {"run_id": spec.run_id, "steps": steps, "lr": spec.lr, "seed": spec.seed}
    state = {"identity": identity, "step": 0, "elapsed_s": 0.0, "initial_loss": None,
             "loss_sum": 0.0, "loss_count": 0, "start_step": 0, "start_elapsed_s": 0.0}
    checkpoint_path, metrics_path = run_dir / CHECKPOINT, run_dir / METRICS
    checkpoint = read_checkpoint(checkpoint_path, device) if checkpoint_path.exists() else None
    if checkpoint is not None:
        state = load_checkpoint(checkpoint, checkpoint_path, model, optimizer, identity, spec)
        state = {"start_step": 0, "start_elapsed_s": 0.0, **state}  # one written before branches existed
    truncate_metrics(metrics_path, state["step"])
    branch_points = set(spec.branch_points)

    status, reason, step = "finished", None, state["step"]
    # The train loss is summed on the device and read back only at log steps: a per-step .item()
    # would make the host wait for every step, which costs most of a tiny model's step time.
    loss_sum = torch.tensor(state["loss_sum"], device=device)
    loss_count = state["loss_count"]
    start = time.perf_counter() - state["elapsed_s"]
    last_time, last_step = time.perf_counter(), step
    for step in range(state["step"] + 1, steps + 1):
        x, y = get_batch(data.train, spec.seed, step, n_seqs, cfg.context_length, device)
        lr = lr_at(step, steps, spec.lr, train, warmup=spec.warmup, constant=spec.stable)
        loss_sum += train_step(step_model, optimizer, x, y, lr, autocast, train.grad_clip)
        loss_count += 1
        faults.point("step")

        on_cadence = step == 1 or step % train.log_interval == 0 or step % train.eval_interval == 0
        if step in branch_points and not on_cadence:
            # The stable run's last step is logged only because it is its last: a WSD run that goes
            # on does not log it, so the branch point keeps the loop's state from before that log.
            _save_branch_point(run_dir, model, optimizer, state, step, start, loss_sum, loss_count, metrics_path)
        do_eval = step % train.eval_interval == 0 or step == steps
        if on_cadence or do_eval:
            train_loss = faults.loss(spec.run_id, step, loss_sum.item() / loss_count)  # the interval's one sync
            now = time.perf_counter()
            record = {"step": step, "tokens": step * train.batch_tokens, "lr": lr,
                      "train_loss": train_loss if math.isfinite(train_loss) else None,
                      "elapsed_s": now - start,
                      "tokens_per_s": (step - last_step) * train.batch_tokens / (now - last_time)}
            if state["initial_loss"] is None:
                state["initial_loss"] = train_loss
            reason = divergence(train_loss, state["initial_loss"], step, warmup,
                                train.divergence_factor)
            if reason:
                status = "diverged"
            elif do_eval:
                record["val_loss"], record["val_bpb"] = evaluate(model, windows, n_seqs, autocast)
            append_jsonl(metrics_path, record)
            if progress is not None:
                progress(step * train.batch_tokens, steps * train.batch_tokens, record["tokens_per_s"])
            if status == "diverged":
                break
            loss_sum.zero_()
            loss_count = 0
            last_time, last_step = time.perf_counter(), step  # evaluation is not training throughput

        if step in branch_points and on_cadence:
            _save_branch_point(run_dir, model, optimizer, state, step, start, loss_sum, loss_count, metrics_path)
        if step < steps and (step % train.checkpoint_interval == 0 or STOP.is_set()):
            sync_file(metrics_path)  # the records up to the checkpoint must outlast a power cut too
            state.update(step=step, elapsed_s=time.perf_counter() - start,
                         loss_sum=loss_sum.item(), loss_count=loss_count)
            save_checkpoint(checkpoint_path, model, optimizer, state)
            if STOP.is_set():
                raise Interrupted(spec.run_id, step, steps)

    final = record if status == "finished" else {}
    if status == "finished" and spec.stable:
        status, reason = "stable", (f"stable phase of WSD (warmup, then constant lr to step {steps}, no "
                                    f"cooldown); its cooldown branches, not this run, are the fit points")
    wall_s = time.perf_counter() - start - state["start_elapsed_s"]  # a branch's own time
    return summarize(spec, data, status, reason, step, wall_s, final, device, start_step=state["start_step"])


def _save_branch_point(run_dir: Path, model: GPT, optimizer, state: dict, step: int, start: float,
                       loss_sum: torch.Tensor, loss_count: int, metrics_path: Path) -> None:
    """A stable run's checkpoint at a branch point, kept (not replaced by the next checkpoint)."""
    sync_file(metrics_path)  # a branch copies the records up to its branch point
    save_checkpoint(run_dir / branch_checkpoint(step), model, optimizer,
                    {**state, "step": step, "elapsed_s": time.perf_counter() - start,
                     "loss_sum": loss_sum.item(), "loss_count": loss_count})


def summarize(spec: RunSpec, data: TokenData, status: str, reason: str | None, steps_done: int,
              wall_s: float, final: dict, device: torch.device, start_step: int = 0) -> dict:
    """The run's row of runs.csv (and a few more fields). Sizes count the tokens actually trained;
    a WSD branch's are those of its whole schedule (its budget), `branch_tokens` those it trained
    itself from its branch point."""
    cfg = spec.model
    n_total, n_non_embedding = param_counts(cfg)
    tokens = steps_done * spec.train.batch_tokens
    trained = max(0, steps_done - start_step) * spec.train.batch_tokens
    wsd = {}
    if spec.train.schedule == "wsd":
        warmup, decay_start = spec.schedule()
        wsd = {"warmup_steps": warmup, "decay_start_step": decay_start,
               "cooldown_fraction": spec.train.cooldown_fraction, "cooldown_shape": spec.train.cooldown_shape}
        if spec.stable:
            wsd["branch_points"] = list(spec.branch_points)
        if spec.branch_of is not None:
            wsd.update(branch_step=spec.branch_step, branch_start_step=start_step)
    return {
        "status": status, "reason": reason, "run_id": spec.run_id, "retry_of": spec.retry_of,
        "schedule": spec.train.schedule, "branch_of": spec.branch_of,
        "branch_tokens": trained if spec.branch_of is not None else None, **wsd,
        "seed": spec.seed, "device": str(device), "compiled": spec.train.compile,
        "d_model": cfg.d_model, "n_layers": cfg.n_layers, "n_heads": cfg.n_heads, "lr": spec.lr,
        "n_params_total": n_total, "n_params_non_embedding": n_non_embedding,
        "steps": steps_done, "tokens": tokens, "tokens_budget": spec.tokens, "epochs": tokens / len(data.train),
        "flops_6nd": 6.0 * n_non_embedding * tokens,
        "flops_exact": float(flops_per_token(cfg)["exact"]) * tokens,
        "final_val_loss": final.get("val_loss"), "final_val_bpb": final.get("val_bpb"),
        "wall_s": wall_s, "tokens_per_s": trained / wall_s if wall_s > 0 else 0.0,
    }
