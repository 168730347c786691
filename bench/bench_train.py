"""Training throughput and model FLOPs utilisation for every shape of configs/tiny.yaml and small.yaml.

    python bench/bench_train.py                 # both configs, torch's default threads
    python bench/bench_train.py --threads 1     # one thread (the setting of a packed sweep)
    python bench/bench_train.py --compile       # also time torch.compile'd models

For each shape: tokens/s of the real training step (AdamW, grad clip, batches drawn as the loop
draws them), achieved model FLOP/s from the exact per-token count (scaling.model.flops_per_token:
every matmul of forward and backward, attention and output layer included), and that divided
by the same machine's dense fp32 matmul throughput (CPU) or bf16 (CUDA), measured in this run:
the model FLOPs utilisation (MFU). Medians over timed windows, after warm-up steps.
"""

from __future__ import annotations

import argparse
import statistics
import time
from contextlib import nullcontext
from pathlib import Path

import numpy as np
import torch

from scaling.config import load_config
from scaling.model import GPT, GPTConfig, flops_per_token, param_counts
from scaling.train import get_batch, make_optimizer, pick_device, train_step

CONFIGS = [Path(__file__).parent.parent / "configs" / name for name in ("tiny.yaml", "small.yaml")]


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


def tokens_per_s(model_cfg: GPTConfig, train, lr: float, device, compile_model: bool,
                 warmup: int, windows: int, steps_per_window: int) -> float:
    torch.manual_seed(0)
    model = GPT(model_cfg).to(device)
    optimizer = make_optimizer(model, train, lr)
    step_fn = torch.compile(model) if compile_model else model
    tokens = np.random.default_rng(0).integers(0, model_cfg.vocab_size, size=1_000_000, dtype=np.uint16)
    n_seqs = train.batch_tokens // model_cfg.context_length
    autocast = torch.autocast("cuda", dtype=torch.bfloat16) if device.type == "cuda" else nullcontext()

    def run(first_step: int, count: int) -> None:
        for step in range(first_step, first_step + count):
            x, y = get_batch(tokens, 0, step, n_seqs, model_cfg.context_length, device)
            train_step(step_fn, optimizer, x, y, lr, autocast, train.grad_clip)

    run(0, warmup)
    rates = []
    for w in range(windows):
        sync(device)
        start = time.perf_counter()
        run(warmup + w * steps_per_window, steps_per_window)
        sync(device)
        rates.append(steps_per_window * train.batch_tokens / (time.perf_counter() - start))
    return statistics.median(rates)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, help="torch CPU threads (default: torch's choice)")
    p.add_argument("--device", default="auto")
    p.add_argument("--compile", action="store_true", help="also time torch.compile'd models")
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--windows", type=int, default=5)
    p.add_argument("--steps", type=int, default=20, help="steps per timed window")
    args = p.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    device = pick_device(args.device)
    peak = matmul_flops(device)
    print(f"device {device}, {torch.get_num_threads()} threads; dense matmul "
          f"{'bf16' if device.type == 'cuda' else 'fp32'}: {peak / 1e9:.1f} GFLOP/s")
    modes = [False, True] if args.compile else [False]
    print(f"{'config':<6} {'d':>4} {'L':>2} {'H':>2} {'N non-emb':>10} {'FLOP/token':>11} "
          + "".join(f"{'compiled ' if c else ''}{'tok/s':>9} {'GFLOP/s':>8} {'MFU':>6}  " for c in modes))
    for path in CONFIGS:
        cfg = load_config(path)
        for shape in cfg.grid.models:
            model_cfg = GPTConfig.from_config(cfg.model, shape, cfg.tokenizer.vocab_size)
            per_token = flops_per_token(model_cfg)["exact"]
            line = (f"{cfg.name:<6} {shape.d_model:>4} {shape.n_layers:>2} {shape.n_heads:>2} "
                    f"{param_counts(model_cfg)[1]:>10,} {per_token:>11.3g} ")
            for compiled in modes:
                rate = tokens_per_s(model_cfg, cfg.train, shape.lr or cfg.train.lr, device, compiled,
                                    args.warmup, args.windows, args.steps)
                achieved = rate * per_token
                line += f"{'':>{9 if compiled else 0}}{rate:>9,.0f} {achieved / 1e9:>8.1f} {achieved / peak:>6.1%}  "
            print(line, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
