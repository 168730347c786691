"""Print the numbers README.md and docs/ quote, from a run store and its fit, so each can be checked
against a fresh `make demo` (or any sweep) instead of copied by hand.

    python bench/readme_numbers.py runs/tiny fits/tiny      # after `make demo`
    python bench/readme_numbers.py runs/tiny fits/tiny --readme   # README.md's excerpt of `make demo`
    python bench/readme_numbers.py --chinchilla              # the Chinchilla refit of docs/fitting.md

The demo's: its runs, budgets and exact FLOPs, the runs' own wall time (summed, and the longest),
the fit's verdict, a and tokens per parameter with their intervals (hi/lo), residual RMS, lack of
fit, the approaches' a, each metric beyond the loss and how it rises with compute (docs/report.md),
and validate.json's headline where the validation ran. What the store does not keep (the sweep's
wall time on the clock, `make demo`'s) is bench/bench_sweep.py's and `time make demo`'s.

--readme prints README.md's excerpt of `make demo` as a Markdown code block: what `scaling fit` and
`scaling validate` printed, remade from fit.json and validate.json by the functions the commands
print with (less the lines that change from run to run: the fit's seconds, the paths written).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import scaling
from scaling.formats import sci
from scaling.laws import tasks
from scaling.runs import store
from scaling.validation.result import format_validation, headline, load_validation

VALIDATION = "validate.json"


def interval(fit, name: str, fmt: str) -> str:
    iv = fit.interval(name)
    return "[no interval]" if iv is None else f"[{iv[0]:{fmt}}, {iv[1]:{fmt}}]"


def runs_numbers(runs_dir: Path) -> None:
    table = store.read_runs(runs_dir)
    done = table[table.status == "finished"]
    budgets = sorted(set(done.budget.dropna())) if "budget" in done else []
    print(f"runs: {len(done)} finished of {len(table)}; budgets {', '.join(f'{b:.3g}' for b in budgets) or '-'}; "
          f"{done.flops_exact.sum():.3g} exact FLOPs in all")
    print(f"runs' own wall time: {done.wall_s.sum():.0f} s summed, longest {done.wall_s.max():.0f} s "
          "(the sweep's clock time packs them: bench/bench_sweep.py)")
    for metric in tasks.METRICS.values():
        if metric.column not in done or done[metric.column].isna().any() or done.flops_exact.nunique() < 3:
            continue
        r = tasks.rise(done.flops_exact, done[metric.column], metric.trials)
        share = "-" if r.late_share is None else f"{100 * r.late_share:.0f}% of its rise in the upper half of log C"
        print(f"  {metric.label}: {done[metric.column].min():.3g}-{done[metric.column].max():.3g}, {r.kind} ({share})")


def fit_numbers(fit_dir: Path) -> None:
    fit = scaling.load(fit_dir)
    tpp = fit.interval("tokens_per_param")
    ratio = f" (hi/lo {tpp[1] / tpp[0]:.3g})" if tpp and tpp[0] > 0 else ""
    print(f"fit: {fit.data.n_points} points; verdict {fit.verdict}")
    print(f"  a = {fit.a:.2f} {interval(fit, 'a', '.2f')}; tokens per parameter at "
          f"{fit.reference_compute:.3g} = {fit.tokens_per_param:.3g} {interval(fit, 'tokens_per_param', '.3g')}{ratio}")
    print(f"  residual RMS {100 * fit.residual_rms:.2f}%")
    tests = [t for t in (fit.lack_of_fit or {}).get("tests") or [] if t.get("p_value") is not None]
    if tests:
        print("  lack of fit: " + ", ".join(f"by {t['by']} p = {t['p_value']:.2g}" for t in tests))
    a_of = {k: e.get("a") for k, e in (fit.approaches or {}).items() if isinstance(e, dict) and e.get("a") is not None}
    if a_of:
        print("  a by approach: " + ", ".join(f"{k} {v:.2f}" for k, v in sorted(a_of.items())))
    for reason in fit.reasons:
        print(f"  {reason}")
    if (fit_dir / VALIDATION).exists():
        print(f"validation: {headline(load_validation(fit_dir / VALIDATION))}")


def demo_excerpt(runs_dir: Path, fit_dir: Path) -> list[str]:
    """Each command of the demo after its sweep, as a shell prompt, and what it printed: the fit's
    decision-first summary, then (where validate.json is there) the validation's runs and headline."""
    lines = [f"$ scaling fit {runs_dir}", *scaling.load(fit_dir).summary().splitlines()]
    if (fit_dir / VALIDATION).exists():
        validation = load_validation(fit_dir / VALIDATION)
        force = " --force" if validation.forced else ""
        lines += ["", f"$ scaling validate {fit_dir} --compute {sci(validation.compute)}{force}",
                  *format_validation(validation)]
    return lines


def chinchilla_numbers() -> None:
    start = time.perf_counter()
    fit = scaling.fit("chinchilla", drop_highest_loss=5)
    elapsed = time.perf_counter() - start
    print(f"Chinchilla, 5 highest losses dropped: {fit.data.n_points} points, verdict {fit.verdict} "
          f"(fit and 1,000-resample bootstrap in {elapsed:.1f} s)")
    for name in ("E", "A", "B", "alpha", "beta", "a"):
        print(f"  {name} = {getattr(fit, name):.4g} {interval(fit, name, '.4g')}")
    print(f"  tokens per parameter at {fit.reference_compute:.3g} = {fit.tokens_per_param:.3g} "
          f"{interval(fit, 'tokens_per_param', '.3g')}; residual RMS {100 * fit.residual_rms:.2f}%")
    if fit.holdout is not None and fit.holdout.mean_abs_rel_error is not None:
        print(f"  hold-out: the {len(fit.holdout.rows)} largest-compute points predicted within "
              f"{100 * fit.holdout.mean_abs_rel_error:.2f}% on average")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("runs_dir", nargs="?", type=Path, help="a run store, e.g. runs/tiny")
    p.add_argument("fit_dir", nargs="?", type=Path, help="its fit folder, e.g. fits/tiny")
    only = p.add_mutually_exclusive_group()
    only.add_argument("--chinchilla", action="store_true", help="the Chinchilla refit's numbers (docs/fitting.md)")
    only.add_argument("--readme", action="store_true",
                   help="README.md's excerpt of `make demo`, as a code block, in place of the numbers")
    args = p.parse_args(argv)
    if args.runs_dir is None and (args.readme or not args.chinchilla):
        p.error("give RUNS_DIR FIT_DIR" + ("" if args.readme else ", or --chinchilla"))
    if args.runs_dir is not None:
        fit_dir = args.fit_dir if args.fit_dir is not None else Path("fits") / args.runs_dir.name
        if args.readme:   # indented: the code block README.md quotes
            print("\n".join(f"    {line}".rstrip() for line in demo_excerpt(args.runs_dir, fit_dir)))
            return 0
        runs_numbers(args.runs_dir)
        fit_numbers(fit_dir)
    if args.chinchilla:
        chinchilla_numbers()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
