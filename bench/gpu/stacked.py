"""Runs of one shape trained together in one process (issue 42, item 2): the step, and its speed.

A GPU trains one tiny run mostly idle: a step of a 100K-parameter model is hundreds of small
kernels. Packing separate processes (executor.runs_per_gpu) interleaves their kernels; stacking
makes each kernel R times larger. `Stack` holds R runs of one shape, each with its own seed
(its initial weights and its batches), peak learning rate, schedule and length: their parameters
stacked along a leading axis (torch.func.stack_module_state, each model built under its own
seed as the loop builds it), one forward and backward for all of them (torch.func.vmap of
grad_and_value over functional_call), and AdamW and gradient clipping written over the stack
with torch's own formulas, so that each run's slice moves as the run trained alone
(tests/test_bench_gpu.py: fp32 on CPU, every step's loss equal to the loop's to 1e-6). A run that
has taken its last step leaves the stack.

This is a measurement, not yet a way to train a sweep: no evaluation, checkpoints or run store.
`time_stacked` gives tokens/s of R runs stacked, beside the packed processes of throughput.py;
docs/performance.md says what wiring it into the sweep would take.
"""

from __future__ import annotations

import re
import time
import warnings

import torch
from torch.func import functional_call, grad_and_value, stack_module_state, vmap

from scaling.train.batches import get_batch
from scaling.train.loop import mixed_precision
from scaling.train.model import GPT
from scaling.train.schedule import lr_at
from scaling.train.spec import RunSpec

EPS = 1e-8          # torch.optim.AdamW's default, as make_optimizer leaves it
CLIP_EPS = 1e-6     # torch.nn.utils.clip_grad_norm_'s
FALLBACK = re.compile(r"batching rule for (\S+?)\.")   # torch's warning when vmap loops over an op


class Stack:
    """R runs of one shape (RunSpecs differing in seed, lr, tokens) stepped together on `device`."""

    def __init__(self, specs: list[RunSpec], tokens, device: torch.device):
        shapes = {spec.model for spec in specs}
        if len(shapes) != 1 or any(spec.train != specs[0].train for spec in specs):
            raise ValueError("a stack holds runs of one shape and one training config")
        self.specs, self.tokens, self.device = list(specs), tokens, device
        models = []
        for spec in specs:
            torch.manual_seed(spec.seed)
            models.append(GPT(spec.model).to(device))
        params, _ = stack_module_state(models)  # tied weights: named once (the embedding)
        self.params = {name: p.detach() for name, p in params.items()}
        self.decay = {name: p.dim() >= 2 for name, p in models[0].named_parameters()}  # make_optimizer's groups
        self.first = {name: torch.zeros_like(p) for name, p in self.params.items()}
        self.second = {name: torch.zeros_like(p) for name, p in self.params.items()}
        self.base = models[0]
        self.autocast = mixed_precision(device)
        self.step_fn = vmap(grad_and_value(self._loss))
        self.t = 0

    def _loss(self, params: dict, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return functional_call(self.base, params, (x, y))[1]

    def step(self) -> torch.Tensor:
        """One AdamW update of every run in the stack; their losses (R,), still on the device."""
        self.t += 1
        train = self.specs[0].train
        n_seqs, T = train.batch_tokens // self.base.cfg.context_length, self.base.cfg.context_length
        batches = [get_batch(self.tokens, s.seed, self.t, n_seqs, T, self.device) for s in self.specs]
        x, y = torch.stack([b[0] for b in batches]), torch.stack([b[1] for b in batches])
        with self.autocast:
            grads, losses = self.step_fn(self.params, x, y)
        if train.grad_clip:
            clip(grads, train.grad_clip)
        lrs = torch.tensor([lr_at(self.t, s.steps, s.lr, train, warmup=s.warmup, constant=s.stable)
                            for s in self.specs], device=self.device, dtype=torch.float32)
        self._adamw(grads, lrs)
        self._drop_finished()
        return losses.detach()

    def _adamw(self, grads: dict, lrs: torch.Tensor) -> None:
        """torch.optim.AdamW's update (its single-tensor formula), each run at its own rate."""
        train = self.specs[0].train
        correction1, correction2 = 1 - train.beta1 ** self.t, (1 - train.beta2 ** self.t) ** 0.5
        for name, p in self.params.items():
            lr = lrs.view(-1, *([1] * (p.dim() - 1)))
            if self.decay[name]:
                p.mul_(1 - lr * train.weight_decay)
            self.first[name].lerp_(grads[name], 1 - train.beta1)
            self.second[name].mul_(train.beta2).addcmul_(grads[name], grads[name], value=1 - train.beta2)
            denominator = (self.second[name].sqrt() / correction2).add_(EPS)
            p.sub_(lr / correction1 * self.first[name] / denominator)

    def _drop_finished(self) -> None:
        keep = [i for i, s in enumerate(self.specs) if s.steps > self.t]
        if len(keep) == len(self.specs):
            return
        index = torch.tensor(keep, device=self.device, dtype=torch.long)
        for state in (self.params, self.first, self.second):
            for name in state:
                state[name] = state[name].index_select(0, index)
        self.specs = [self.specs[i] for i in keep]


def clip(grads: dict, max_norm: float) -> None:
    """clip_grad_norm_ for each run of the stack: its own norm over all its gradients."""
    norms = torch.stack([g.flatten(1).norm(dim=1) for g in grads.values()]).norm(dim=0)   # (R,)
    coefficient = (max_norm / (norms + CLIP_EPS)).clamp(max=1.0)
    for g in grads.values():
        g.mul_(coefficient.view(-1, *([1] * (g.dim() - 1))))


def time_stacked(spec: RunSpec, runs: int, tokens, device: torch.device, warmup: int, windows: int,
                 steps: int) -> dict:
    """tokens/s of `runs` copies of `spec` (seeds 0, 1, ...) stacked, the median of `windows`
    timed windows of `steps` steps after `warmup` steps, the peak GPU memory of the stack, and the
    operators vmap ran one run at a time (no batching rule: torch warns, and that op is R launches)."""
    length = (warmup + windows * steps + 1) * spec.train.batch_tokens
    specs = [RunSpec(f"stacked-{i}", spec.model, spec.train, spec.lr, length, seed=i) for i in range(runs)]
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    begin = time.perf_counter()
    stack = Stack(specs, tokens, device)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(warmup):
            stack.step()
    fallbacks = sorted({m.group(1) for w in caught if (m := FALLBACK.search(str(w.message)))})
    _sync(device)
    warmup_s = time.perf_counter() - begin
    rates = []
    for _ in range(windows):
        _sync(device)
        begin = time.perf_counter()
        for _ in range(steps):
            stack.step()
        _sync(device)
        rates.append(runs * steps * spec.train.batch_tokens / (time.perf_counter() - begin))
    return {"runs": runs, "tokens_per_s": sorted(rates)[len(rates) // 2], "warmup_s": warmup_s,
            "vmap_fallbacks": fallbacks,
            "memory_bytes": torch.cuda.max_memory_allocated() if device.type == "cuda" else None}


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()
