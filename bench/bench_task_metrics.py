"""What the evaluation beyond the loss (scaling.train.metrics) costs: its time for every shape of a
sweep's runs, against the time those runs took.

    python bench/bench_task_metrics.py                      # the demo's store, runs/tiny
    python bench/bench_task_metrics.py runs/tiny --threads 1

For each shape of the store's finished runs it builds the model (the weights do not change the
time), and times evaluate_tasks on the N_PROMPTS prompts of the store's context (median of a few
repeats after one warm-up, on `--threads` torch threads: 1, as the local executor packs runs on CPU),
the same for the validation loss's evaluation at train.eval_tokens, and divides by each run's
wall_s: the share of a run's time the new evaluation adds, once a run.
"""

from __future__ import annotations

import argparse
import statistics
import time
from contextlib import nullcontext
from pathlib import Path

import numpy as np
import torch

from scaling.reading import parse_yaml
from scaling.runs import store
from scaling.train.batches import TokenData, evaluate, val_windows
from scaling.train.metrics import N_PROMPTS, evaluate_tasks, task_prompts
from scaling.train.model import GPT
from scaling.train.shape import GPTConfig


def median_time(fn, repeats: int) -> float:
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("store", nargs="?", type=Path, default=Path("runs/tiny"))
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    table = store.read_runs(args.store)
    table = table[table.status == "finished"]
    first = parse_yaml((store.run_dirs(args.store)[0] / store.CONFIG).read_text(), "config.yaml")
    model_cfg, train = first["model"], first["train"]
    vocab, T = first["tokenizer"]["vocab_size"], model_cfg["context_length"]
    n_seqs = train["batch_tokens"] // T
    rng = np.random.default_rng(0)                 # token ids only set the work's size, not its time
    val = rng.integers(0, vocab, 10 * train["eval_tokens"]).astype(np.uint16)
    data = TokenData(train=val, val=val, val_token_bytes=np.ones(len(val), dtype=np.int64))
    prompts = task_prompts(val, T, torch.device("cpu"))
    windows = val_windows(data, train["eval_tokens"], T, torch.device("cpu"))
    print(f"{args.store}: {len(table)} finished runs; {N_PROMPTS} prompts of {T + 1} tokens; "
          f"{args.threads} thread(s)")
    print(f"{'shape':<14}{'tasks (s)':>10}{'val loss (s)':>13}{'runs':>6}{'run wall (s)':>18}{'share':>16}")
    shares = []
    for (d_model, n_layers, n_heads), runs in table.groupby(["d_model", "n_layers", "n_heads"]):
        cfg = GPTConfig(vocab_size=vocab, context_length=T, d_model=int(d_model), n_layers=int(n_layers),
                        n_heads=int(n_heads), mlp_ratio=model_cfg.get("mlp_ratio", 4),
                        tied_embeddings=model_cfg.get("tied_embeddings", True))
        model = GPT(cfg)
        tasks_s = median_time(lambda m=model: evaluate_tasks(m, prompts, n_seqs, nullcontext()), args.repeats)
        loss_s = median_time(lambda m=model: evaluate(m, windows, n_seqs, nullcontext()), args.repeats)
        wall = runs.wall_s.to_numpy(float)
        share = tasks_s / wall
        shares += list(share)
        print(f"d{d_model}-l{n_layers}-h{n_heads:<5}{tasks_s:>10.3f}{loss_s:>13.3f}{len(runs):>6}"
              f"{wall.min():>9.0f}-{wall.max():<8.0f}{100 * share.min():>7.3f}-{100 * share.max():.3f}%")
    print(f"share of a run's wall time: median {100 * np.median(shares):.3f}%, largest {100 * max(shares):.3f}%")


if __name__ == "__main__":
    main()
