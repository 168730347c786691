"""Compute counted as it is spent: the three measures of a run's training FLOPs, checked against torch.

    python bench/bench_compute_count.py                    # every shape of configs/*.yaml, the demo's design
    python bench/bench_compute_count.py --runs runs/tiny   # also the demo store's fit in each count

1. Every shape of configs/*.yaml: FLOPs per token by the exact count (scaling.train.counts: every
   matmul of forward and backward, attention over the full window and the output layer), 6 N_total
   and 6 N_non-embedding, and torch.utils.flop_counter.FlopCounterMode on a real training step
   (forward, loss and backward of scaling.train.model.GPT on one batch), per token.
2. The demo's IsoFLOP design (configs/tiny.yaml) planned in each measure: the real (exact) FLOPs of
   the runs of each budget, max/min.
3. With --runs: the store fitted with N counted each way and C in each measure (a, tokens per
   parameter at the largest budget, with 95% intervals).
"""

from __future__ import annotations

import argparse
import collections
from pathlib import Path

import torch
import yaml
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from scaling.config import SweepConfig, load_config
from scaling.sweeps.plan import plan
from scaling.train.counts import COMPUTE_MEASURES
from scaling.train.model import GPT
from scaling.train.shape import flops_by_measure

ROOT = Path(__file__).resolve().parents[1]


def torch_flops_per_token(model_cfg, batch: int = 2) -> float:
    """FLOPs torch counts for one training step (forward, loss, backward), per token. Attention runs
    on SDPA's math backend, whose matmuls FlopCounterMode sees (it has no formula for the fused CPU
    kernel, and would count attention as 0)."""
    torch.manual_seed(0)
    model = GPT(model_cfg)
    idx = torch.randint(0, model_cfg.vocab_size, (batch, model_cfg.context_length))
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        _, loss = model(idx, idx)
        loss.backward()
    return counter.get_total_flops() / idx.numel()


def shapes_table() -> None:
    print("1. FLOPs per token of every shape of configs/*.yaml")
    print(f"{'config':<14} {'shape':<12} {'N total':>9} {'N non-emb':>9} {'exact':>10} {'torch':>10} "
          f"{'torch/exact':>11} {'exact/6Ntot':>11} {'exact/6Nne':>10}")
    seen = set()
    for path in sorted((ROOT / "configs").glob("*.yaml")):
        for run in plan(load_config(path)):
            m = run.spec.model
            key = (path.stem, m.d_model, m.n_layers, m.context_length, m.vocab_size)
            if key in seen:
                continue
            seen.add(key)
            counts = flops_by_measure(m)
            measured = torch_flops_per_token(m)
            print(f"{path.stem:<14} {f'd{m.d_model} L{m.n_layers}':<12} {run.n_params_total:>9,} "
                  f"{run.n_params_non_embedding:>9,} {counts['exact']:>10,} {measured:>10,.0f} "
                  f"{measured / counts['exact']:>11.4f} {counts['exact'] / counts['6n_total']:>11.3f} "
                  f"{counts['exact'] / counts['6n_non_embedding']:>10.3f}")


def design_table() -> None:
    print("\n2. The demo's IsoFLOP design (configs/tiny.yaml) planned in each measure: real FLOPs per budget")
    raw = yaml.safe_load((ROOT / "configs" / "tiny.yaml").read_text())
    for measure in COMPUTE_MEASURES:
        raw["grid"]["isoflop"]["measure"] = measure
        by_budget = collections.defaultdict(list)
        for run in plan(SweepConfig.model_validate(raw)):
            by_budget[run.spec.budget].append(run.flops_exact)
        cells = ", ".join(f"{b:.3g}: {min(f):.3g}-{max(f):.3g} (x{max(f) / min(f):.3f})"
                          for b, f in sorted(by_budget.items()))
        print(f"  {measure:<17} {cells}")


def store_fits(runs_dir: Path) -> None:
    from scaling.laws import analysis
    from scaling.laws.fitting import readers
    print(f"\n3. {runs_dir} fitted in each count (200 resamples)")
    for convention in ("total", "non_embedding"):
        for measure in COMPUTE_MEASURES:
            data = readers.from_runs(runs_dir, convention, compute_measure=measure)
            fit = analysis.fit_data(data, bootstrap=200, form="chinchilla")
            a, tpp = fit.interval("a"), fit.interval("tokens_per_param")
            iso = fit.approaches["approach_2"]
            minima = ", ".join(f"{b['compute']:.3g}: N {b['n_opt']:.3g} D/N {b['d_opt'] / b['n_opt']:.3g}"
                               for b in iso["budgets"] if b["status"] == "ok")
            print(f"  N {convention:<13} C {measure:<17} a {fit.a:.3f} [{a[0]:.3f}, {a[1]:.3f}]  D/N at "
                  f"{fit.reference_compute:.3g}: {fit.tokens_per_param:.3g} [{tpp[0]:.3g}, {tpp[1]:.3g}]  "
                  f"{fit.diagnostics.verdict}; IsoFLOP minima {minima or 'none'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=Path, help="a run store to fit in each count (e.g. runs/tiny)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    shapes_table()
    design_table()
    if args.runs is not None:
        store_fits(args.runs)


if __name__ == "__main__":
    main()
