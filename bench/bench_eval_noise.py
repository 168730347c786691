"""Evaluation noise: how far a run's final loss on train.eval_tokens validation tokens sits from its
loss on the whole validation split, measured on a finished store's final checkpoints.

    python bench/bench_eval_noise.py                         # the demo: configs/tiny.yaml, runs/tiny
    python bench/bench_eval_noise.py CONFIG RUNS_DIR --tokens 32768,65536,131072

Every run is evaluated on the same first windows of the validation split (scaling.train.batches),
so part of the error is shared by all runs (a text slightly easier or harder than the rest) and
goes into the fit's E; what the fit's residuals see is the spread of that error across runs. Both
are printed, in percent of the loss, for each size of evaluation tried, against the whole split.
A run's checkpoint is its last at a multiple of train.checkpoint_interval, a few steps before its
end: the weights differ slightly from the final ones, the evaluation sets do not.

Measured on the demo (runs/tiny, 15 runs, 240,112 validation tokens; 4.3 min on 2 busy cores):
32,768 tokens (the demo's) err by -2.08% shared and 0.21% sd across runs; 65,536 by -2.20% and
0.21%; 131,072 by -0.77% and 0.08%. The first windows are one stretch of the split's text, so
doubling them buys nothing: the noise is the text's, not the token count's.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import torch

from scaling.config import load_config
from scaling.data.tokens import prepare_tokens
from scaling.sweeps.job import token_data
from scaling.sweeps.plan import plan
from scaling.train.batches import evaluate, val_windows
from scaling.train.model import GPT

ROOT = Path(__file__).resolve().parents[1]


def final_model(spec, run_dir: Path) -> GPT | None:
    path = run_dir / "checkpoint.pt"
    if not path.exists():
        return None
    model = GPT(spec.model)
    model.load_state_dict(torch.load(path, map_location="cpu", weights_only=True)["model"])
    return model


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("config", nargs="?", type=Path, default=ROOT / "configs" / "tiny.yaml")
    ap.add_argument("runs_dir", nargs="?", type=Path, default=ROOT / "runs")
    ap.add_argument("--tokens", default="32768,65536,131072")
    args = ap.parse_args()
    cfg = load_config(args.config)
    data = token_data(prepare_tokens(cfg))
    T, sizes = cfg.model.context_length, [int(t) for t in args.tokens.split(",")]
    whole = len(data.val) - 1
    rows = []
    torch.set_grad_enabled(False)
    nullcontext = torch.autocast("cpu", enabled=False)
    for run in (r for r in plan(cfg) if r.kind != "stable"):
        model = final_model(run.spec, args.runs_dir / cfg.name / run.run_id)
        if model is None:
            continue
        losses = [evaluate(model, val_windows(data, n, T, torch.device("cpu")), 64, nullcontext)[0]
                  for n in [*sizes, whole]]
        rows.append(losses)
        print(f"{run.run_id:32s} " + "  ".join(f"{v:.4f}" for v in losses), flush=True)
    errors = np.array([[v / r[-1] - 1 for v in r[:-1]] for r in rows])
    print(f"\n{len(rows)} runs; whole validation split {whole:,} tokens")
    for n, e in zip(sizes, errors.T):
        print(f"  {n:>8,} tokens: shared offset {100 * e.mean():+.3f}%, "
              f"spread across runs (sd) {100 * e.std(ddof=1):.3f}%")


if __name__ == "__main__":
    main()
