"""Train one run of the grid: a GPT of one shape on a budget of D tokens, with checkpoints to resume.

The loop: AdamW steps on the run's batches (scaling.train.batches) at the lr of its schedule
(scaling.train.schedule), a log record every log_interval steps, an evaluation every
eval_interval steps and at the last, a checkpoint every checkpoint_interval steps
(scaling.train.checkpoint). What the run is, is its `RunSpec` (scaling.train.spec). The
summary's `tokens` is what the model actually saw, the budget rounded up to whole batches, and
FLOPs are counted from it; `tokens_budget` keeps D. A WSD branch (see scaling.train.spec) ends
with bitwise the weights of a WSD run trained from step 0 to its budget; a branch without its
stable run's checkpoint simply trains from step 0: the same run, at full cost.

A stop request (`request_stop`, called by the command line's SIGINT/SIGTERM handler) ends the
run after the current step, with a checkpoint there, by raising `Interrupted`. An error inside a
run that is neither bad input (`UsageError`) nor the file system's (`OSError`: a full disk, a
folder that cannot be written) does not stop the sweep: the run comes back with status 'failed',
the error as its reason and the traceback in `traceback`.
"""

from __future__ import annotations

import ctypes
import math
import threading
import time
import traceback
import warnings
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from scaling.config import TrainConfig
from scaling.errors import UsageError
from scaling.runs import faults
from scaling.runs.store import CHECKPOINT, METRICS, append_jsonl, branch_checkpoint
from scaling.train.batches import TokenData, check_data, evaluate, get_batch, val_windows
from scaling.train.checkpoint import restore, save_at
from scaling.train.logs import run_logs
from scaling.train.metrics import TASK_FIELDS, evaluate_tasks, task_prompts
from scaling.train.model import GPT
from scaling.train.schedule import lr_at
from scaling.train.shape import flops_by_measure, param_counts
from scaling.train.spec import RunSpec

# Set to stop the run in progress after its current step, with a checkpoint (see request_stop).
STOP = threading.Event()

# progress(tokens done, tokens in all, tokens per second): called at every logged step.
ProgressFn = Callable[[int, int, float], None]


class Interrupted(KeyboardInterrupt):
    """A stop request ended the run `run_id` at `step` of `steps` (None: between runs), after a checkpoint."""

    def __init__(self, run_id: str | None = None, step: int | None = None, steps: int | None = None) -> None:
        super().__init__(run_id, step, steps)  # args alone rebuild it: it pickles out of a worker
        self.run_id, self.step, self.steps = run_id, step, steps


def request_stop() -> None:
    """Ask the run in progress to stop after its current step, writing a checkpoint first."""
    STOP.set()


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


def mixed_precision(device: torch.device) -> AbstractContextManager[Any]:
    """The context the forward passes run in: bf16 autocast on CUDA, plain fp32 elsewhere (bf16
    on CPU is far slower than fp32 on most CPUs)."""
    return torch.autocast("cuda", dtype=torch.bfloat16) if device.type == "cuda" else nullcontext()


def compiled(model: GPT, train: TrainConfig) -> torch.nn.Module:
    """The module the training steps call: `model`, or with train.compile torch.compile(model),
    which shares its parameters (so checkpoints and evaluation use `model` itself)."""
    # For a Module torch.compile returns an OptimizedModule (a Module); its annotation says Callable.
    return torch.compile(model) if train.compile else model  # type: ignore[return-value]


def make_optimizer(model: GPT, train: TrainConfig, lr: float) -> torch.optim.AdamW:
    # nanoGPT's grouping: decay every matrix (the matmul weights and the embedding tables, which
    # are also the output layer when tied); never the LayerNorm gains and biases.
    params = list(model.parameters())
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": train.weight_decay},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=lr, betas=(train.beta1, train.beta2), fused=True)


def train_step(model: torch.nn.Module, optimizer: torch.optim.Optimizer, x: torch.Tensor, y: torch.Tensor, lr: float,
               autocast: AbstractContextManager[Any], grad_clip: float) -> torch.Tensor:
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


def train_run(spec: RunSpec, data: TokenData, run_dir: Path, progress: ProgressFn | None = None) -> dict:
    """Train (or resume) one run in run_dir and return its summary; the caller writes summary.json.

    progress(tokens_done, tokens_total, tokens_per_s) is called at every logged step. An error
    that is not bad input, the file system's or a stop comes back as a summary with status 'failed'.
    """
    check_inputs(spec, data)
    start = time.perf_counter()
    try:
        with run_logs(spec, Path(run_dir)) as log:   # train.log_to's viewers
            return _train(spec, data, Path(run_dir), progress, log)
    except (UsageError, OSError):
        raise
    except Exception as exc:  # a bug, or out of memory: this run failed, the sweep goes on
        summary = summarize(spec, data, "failed", f"{type(exc).__name__}: {exc}", 0,
                            time.perf_counter() - start, {}, pick_device(spec.train.device))
        return {**summary, "traceback": traceback.format_exc()}


def _train(spec: RunSpec, data: TokenData, run_dir: Path, progress: ProgressFn | None,
           log: Callable[[dict], None]) -> dict:
    cfg, train = spec.model, spec.train
    run_dir.mkdir(parents=True, exist_ok=True)
    device, autocast = _device(train)
    steps = spec.steps
    warmup, _ = spec.schedule()
    n_seqs = train.batch_tokens // cfg.context_length
    model, optimizer, step_model = _model(spec, device)
    evaluation = _Evaluation(model, val_windows(data, train.eval_tokens, cfg.context_length, device),
                             task_prompts(data.val, cfg.context_length, device), n_seqs, autocast)
    state = restore(spec, run_dir, model, optimizer, device)
    branch_points, metrics_path = set(spec.branch_points), run_dir / METRICS

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
            save_at(run_dir / branch_checkpoint(step), model, optimizer, state, step, start, loss_sum, loss_count)
        do_eval = step % train.eval_interval == 0 or step == steps
        if on_cadence or do_eval:
            train_loss = faults.loss(spec.run_id, step, loss_sum.item() / loss_count)  # the interval's one sync
            record = _record(step, lr, train_loss, train.batch_tokens, start, last_time, last_step)
            reason = _log_step(record, train_loss, spec, state, warmup, evaluation if do_eval else None,
                               metrics_path=metrics_path, log=log, progress=progress)
            if reason:
                status = "diverged"
                break
            loss_sum.zero_()
            loss_count = 0
            last_time, last_step = time.perf_counter(), step  # evaluation is not training throughput

        if step in branch_points and on_cadence:
            save_at(run_dir / branch_checkpoint(step), model, optimizer, state, step, start, loss_sum, loss_count)
        if step < steps and (step % train.checkpoint_interval == 0 or STOP.is_set()):
            state = save_at(run_dir / CHECKPOINT, model, optimizer, state, step, start, loss_sum, loss_count)
            if STOP.is_set():
                raise Interrupted(spec.run_id, step, steps)

    return _summary(spec, data, status, reason, step, record, state, start, device)


def _device(train: TrainConfig) -> tuple[torch.device, AbstractContextManager[Any]]:
    """(the device a run trains on, its mixed precision), the threads it may use set."""
    if train.threads:
        torch.set_num_threads(train.threads)
    device = pick_device(train.device)
    keep_freed_memory()
    return device, mixed_precision(device)


def _model(spec: RunSpec, device: torch.device) -> tuple[GPT, torch.optim.AdamW, torch.nn.Module]:
    """(the model, seeded from the run's seed, its optimizer, the step function's compiled model)."""
    torch.manual_seed(spec.seed)
    model = GPT(spec.model).to(device)
    optimizer = make_optimizer(model, spec.train, spec.lr)
    return model, optimizer, compiled(model, spec.train)


@dataclass(frozen=True)
class _Evaluation:
    """What a run is evaluated on, made once a run: the validation windows and the task prompts."""

    model: GPT
    windows: tuple[torch.Tensor, torch.Tensor, int]
    prompts: torch.Tensor
    n_seqs: int
    autocast: AbstractContextManager[Any]

    def into(self, record: dict, last: bool) -> None:
        """The validation loss, bits per byte and context use into `record`; at the `last` step (once
        a run), accuracy and exact match beyond the loss too (train.metrics)."""
        record["val_loss"], record["val_bpb"], record["val_context_use"] = evaluate(
            self.model, self.windows, self.n_seqs, self.autocast)
        if last:
            record.update(evaluate_tasks(self.model, self.prompts, self.n_seqs, self.autocast))


def _log_step(record: dict, train_loss: float, spec: RunSpec, state: dict, warmup: int,
              evaluation: _Evaluation | None, *, metrics_path: Path, log: Callable[[dict], None],
              progress: ProgressFn | None) -> str | None:
    """A logged step's record, finished and written: why the run diverged (None if it has not: its
    loss against the run's first logged one), else the evaluation when one is due; then the record
    into metrics.jsonl, the viewers (`log`: train.log_to's) and the progress."""
    if state["initial_loss"] is None:
        state["initial_loss"] = train_loss
    step = record["step"]
    reason = divergence(train_loss, state["initial_loss"], step, warmup, spec.train.divergence_factor)
    if reason is None and evaluation is not None:
        evaluation.into(record, last=step == spec.steps)
    append_jsonl(metrics_path, record)
    log(record)
    if progress is not None:
        progress(step * spec.train.batch_tokens, spec.steps * spec.train.batch_tokens, record["tokens_per_s"])
    return reason


def _summary(spec: RunSpec, data: TokenData, status: str, reason: str | None, step: int, record: dict,
             state: dict, start: float, device: torch.device) -> dict:
    """The run's summary: the last record's numbers when it finished; a WSD stable phase that
    finished is 'stable' (its cooldown branches are the fit points); the wall time its own."""
    final = record if status == "finished" else {}
    if status == "finished" and spec.stable:
        status, reason = "stable", (f"stable phase of WSD (warmup, then constant lr to step {spec.steps}, no "
                                    f"cooldown); its cooldown branches, not this run, are the fit points")
    wall_s = time.perf_counter() - start - state["start_elapsed_s"]  # a branch's own time
    return summarize(spec, data, status, reason, step, wall_s, final, device, start_step=state["start_step"])


def _record(step: int, lr: float, train_loss: float, batch_tokens: int, start: float, last_time: float,
            last_step: int) -> dict:
    """A metrics record: the train loss over the steps since `last_step`, and their throughput."""
    now = time.perf_counter()
    return {"step": step, "tokens": step * batch_tokens, "lr": lr,
            "train_loss": train_loss if math.isfinite(train_loss) else None,
            "elapsed_s": now - start,
            "tokens_per_s": (step - last_step) * batch_tokens / (now - last_time)}


def summarize(spec: RunSpec, data: TokenData, status: str, reason: str | None, steps_done: int,
              wall_s: float, final: dict, device: torch.device, start_step: int = 0) -> dict:
    """The run's row of runs.csv (and a few more fields). Sizes count the tokens actually trained;
    a WSD branch's are those of its whole schedule (its budget), `branch_tokens` those it trained
    itself from its branch point."""
    cfg = spec.model
    n_total, n_non_embedding = param_counts(cfg)
    tokens = steps_done * spec.train.batch_tokens
    trained = max(0, steps_done - start_step) * spec.train.batch_tokens
    wsd: dict[str, Any] = {}
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
        "unique_tokens": len(data.train),
        "flops_6nd": 6.0 * n_non_embedding * tokens,
        "flops_exact": float(flops_by_measure(cfg)["exact"]) * tokens,
        "flops_6n_total": 6.0 * n_total * tokens,
        "final_val_loss": final.get("val_loss"), "final_val_bpb": final.get("val_bpb"),
        "final_context_use": final.get("val_context_use"),
        **{key: final.get(key) for key in TASK_FIELDS},
        "wall_s": wall_s, "tokens_per_s": trained / wall_s if wall_s > 0 else 0.0,
        "budget": spec.budget, "budget_measure": spec.budget_measure, "role": spec.role,
    }
