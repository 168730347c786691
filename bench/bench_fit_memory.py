"""Time and peak memory of a fit on large tables (issue 15, case 9): 10k, 30k and 100k rows.

Public tables are this size (a learning-rate/batch study has about 1,900 runs; training-curve
tables 9,000+ points). The grid fit's memory is bounded by chunking the starts
(`scaling.laws.objective.batch_rows`), the bootstrap's by streaming its resamples. Each size runs
in a fresh process, so the peak (ru_maxrss) is that size's own.

    .venv/bin/python bench/bench_fit_memory.py [--rows 10000 30000 100000] [--bootstrap 0]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time


def one(rows: int, n_boot: int) -> dict:
    """Fit a simulated cross grid of about `rows` points (Chinchilla's law, 1% noise)."""
    import numpy as np

    from scaling.laws.bootstrap import bootstrap
    from scaling.laws.fit import fit_law
    from scaling.laws.references import reference
    from scaling.laws.simulate import cross_grid, simulate

    side = int(round(rows ** 0.5))
    grid = cross_grid(np.geomspace(1e6, 1e10, side), np.geomspace(1e8, 1e12, rows // side))
    data = simulate(reference("chinchilla").law, grid, noise=0.01, seed=0)
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    fit = fit_law(data.n, data.d, data.loss)
    fit_s = time.perf_counter() - start
    boot_s = None
    if n_boot:
        start = time.perf_counter()
        bootstrap(data.n, data.d, data.loss, n_resamples=n_boot, full_fit=fit)
        boot_s = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"rows": len(data), "fit_s": fit_s, "bootstrap_s": boot_s, "peak_mb": peak / 1024,
            "before_fit_mb": base / 1024, "alpha": fit.law.alpha, "beta": fit.law.beta}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[10_000, 30_000, 100_000])
    parser.add_argument("--bootstrap", type=int, default=0, help="resamples after the fit (default 0)")
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one(args.one, args.bootstrap)))
        return
    print(f"{'rows':>7} {'fit s':>7} {'boot s':>7} {'peak MB':>8}  (process peak, imports included)")
    for rows in args.rows:
        out = subprocess.run([sys.executable, __file__, "--one", str(rows), "--bootstrap", str(args.bootstrap)],
                             capture_output=True, text=True, check=True)
        r = json.loads(out.stdout.strip().splitlines()[-1])
        boot = "-" if r["bootstrap_s"] is None else f"{r['bootstrap_s']:.1f}"
        print(f"{r['rows']:>7} {r['fit_s']:>7.1f} {boot:>7} {r['peak_mb']:>8.0f}  "
              f"(alpha {r['alpha']:.3f}, beta {r['beta']:.3f})")


if __name__ == "__main__":
    main()
