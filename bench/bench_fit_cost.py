"""CPU time of `scaling fit` (its backtest and forms included) on three tables, before and after a change.

    python bench/bench_fit_cost.py                       # this checkout: median CPU of 3 per table
    python bench/bench_fit_cost.py --before 5eacfc7      # and that revision's, with the ratios

Each case runs `python -m scaling fit ... --seed 0` in a child process with OMP_NUM_THREADS=1 (imports
included) and reads that child's own user + sys CPU time from wait4, the median of --repeats runs: on a
shared machine CPU time moves far less than wall time, and the before and after runs of a case alternate
so that both see the same load. With --before, the revision is exported (`git archive`) to a temporary
directory and run the same way, and each case's fit.json is compared byte for byte (a change meant
only to save time must leave every number as it was).

The cases: the Chinchilla table (245 runs, the default 1,000 resamples); a demo-like sweep (20 runs: 3
budgets 5e11-2e12 FLOPs, 7 sizes each from a ladder of 9, as configs/tiny.yaml; simulated from a known
law, 0.5% scatter); a 1,000-point cross grid (Chinchilla's law, 1% scatter, as bench_fit_memory.py);
with --cases '10,000', a 10,000-point cross grid (100 x 100, the same law and scatter).
Measured: docs/performance.md ("Fitting").
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from scaling.laws.design.simulate import cross_grid, isoflop_grid, simulate  # noqa: E402
from scaling.laws.forms.law import Law  # noqa: E402
from scaling.laws.forms.references import reference  # noqa: E402

DEMO_LAW = Law(E=1.8, A=400.0, B=2000.0, alpha=0.34, beta=0.37)
DEMO_BUDGETS = (5e11, 1e12, 2e12)


def write_tables(folder: Path) -> dict[str, list[str]]:
    """Each case's `scaling fit` arguments (its table written under `folder`)."""
    budgets = np.array(DEMO_BUDGETS)
    runs = isoflop_grid(budgets, DEMO_LAW, per_budget=7, span=4.0, ladder=np.geomspace(6.3e3, 3.94e5, 9))
    demo = simulate(DEMO_LAW, runs, noise=0.005, seed=0)
    frame = pd.DataFrame({"N": demo.n, "D": demo.d, "loss": demo.loss, "budget": np.repeat(budgets, 7)})
    frame.iloc[1:].to_csv(folder / "demo20.csv", index=False)          # 20 runs, as the demo's
    grid = cross_grid(np.geomspace(1e6, 1e10, 40), np.geomspace(1e8, 1e12, 25))
    big = simulate(reference("chinchilla").law, grid, noise=0.01, seed=0)
    pd.DataFrame({"N": big.n, "D": big.d, "loss": big.loss}).to_csv(folder / "grid1000.csv", index=False)
    grid = cross_grid(np.geomspace(1e6, 1e10, 100), np.geomspace(1e8, 1e12, 100))
    huge = simulate(reference("chinchilla").law, grid, noise=0.01, seed=0)
    pd.DataFrame({"N": huge.n, "D": huge.d, "loss": huge.loss}).to_csv(folder / "grid10000.csv", index=False)
    table = ["--n", "N", "--d", "D", "--loss", "loss"]
    return {"chinchilla (245 runs)": ["--dataset", "chinchilla"],
            "demo-like (20 runs)": ["--csv", str(folder / "demo20.csv"), *table, "--budget", "budget"],
            "1,000-point grid": ["--csv", str(folder / "grid1000.csv"), *table],
            "10,000-point grid": ["--csv", str(folder / "grid10000.csv"), *table]}


def cpu_of_fit(root: Path, args: list[str], out: Path) -> float:
    """User + sys CPU seconds of one `scaling fit` child run from the checkout `root`."""
    env = {**os.environ, "PYTHONPATH": str(root), "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "scaling", "fit", *args, "--seed", "0", "--out", str(out)]
    child = subprocess.Popen(cmd, cwd=root, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(child.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"scaling fit {' '.join(args)} failed in {root}")
    return usage.ru_utime + usage.ru_stime


def export(revision: str, folder: Path) -> Path:
    """The checkout of `revision`, exported under `folder`."""
    archive = subprocess.run(["git", "archive", revision], cwd=ROOT, check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)
    return folder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", help="a git revision to compare with (exported, run the same way)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--cases", default="chinchilla;demo;1,000",
                        help="the cases to run, by the start of their names, separated by ';' (the 10,000-point "
                             "grid, minutes a fit, runs only when named: '10,000')")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        wanted = [w.strip() for w in args.cases.split(";")]
        cases = {k: v for k, v in write_tables(work).items() if any(k.startswith(w) for w in wanted)}
        roots = {"after": ROOT}
        if args.before:
            roots = {"before": export(args.before, Path(tempfile.mkdtemp(dir=tmp))), "after": ROOT}
        print("| case | " + " | ".join(f"{k} (CPU s, median of {args.repeats})" for k in roots)
              + (" | ratio | fit.json identical |" if args.before else " |"))
        print("| --- |" + " --- |" * (len(roots) + (2 if args.before else 0)))
        for case, fit_args in cases.items():
            cpu: dict[str, list[float]] = {k: [] for k in roots}
            for i in range(args.repeats):
                for name, root in roots.items():      # alternate, so that both see the same load
                    cpu[name].append(cpu_of_fit(root, fit_args, work / f"{name}-{i}"))
            med = {k: statistics.median(v) for k, v in cpu.items()}
            row = f"| {case} | " + " | ".join(f"{med[k]:.1f}" for k in roots)
            if args.before:
                same = all((work / f"before-{i}" / "fit.json").read_bytes() == (work / f"after-{i}" / "fit.json")
                           .read_bytes() for i in range(args.repeats))
                row += f" | {med['before'] / med['after']:.2f}x | {'yes' if same else 'NO'}"
            print(row + " |", flush=True)


if __name__ == "__main__":
    main()
