"""Benchmark the Approach-3 fit on Hoffmann et al.'s runs (Besiroglu et al.'s 240 points).

    python bench/bench_fit.py            # batched fit x3, the whole per-start scipy loop once, bootstrap
    python bench/bench_fit.py --quick    # time the scipy loop on 300 random starts and extrapolate

Prints: the batched fit time over the full 4,500-start grid (median of 3); the plain per-start
scipy.optimize.minimize(L-BFGS-B) loop time over the same grid and objective; their ratio; the
constants from both and their relative differences; the 1,000-resample bootstrap time and its
95% intervals. The loop here uses the same analytic objective and gradient as the batched fit
(a fair comparison of the optimisers, not of objective implementations).
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from scaling.laws.fitting import fit, readers, selection
from scaling.laws.fitting.bootstrap import CI_NAMES, bootstrap
from scaling.laws.forms.references import BESIROGLU


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="time the scipy loop on a random subset of starts")
    p.add_argument("--quick-starts", type=int, default=300, help="starts timed with --quick (default 300)")
    p.add_argument("--threaded-starts", type=int, default=100,
                   help="also time this many starts with OpenBLAS's default threading (0: skip)")
    p.add_argument("--repeats", type=int, default=3, help="batched fit repeats (default 3)")
    p.add_argument("--resamples", type=int, default=1000, help="bootstrap resamples (default 1000)")
    args = p.parse_args(argv)

    data = selection.apply_filters(readers.from_dataset("chinchilla"), drop_highest_loss=5)
    n, d, loss = data.n, data.d, data.loss
    n_grid = fit.hoffmann_grid().shape[0]
    print(f"data: {len(data)} points ({len(data.dropped)} highest-loss dropped), grid: {n_grid} starts")

    times = []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        res = fit.fit_law(n, d, loss)
        times.append(time.perf_counter() - t0)
    batched = statistics.median(times)
    print(f"batched fit, {n_grid} starts: median {batched:.2f} s of {args.repeats} "
          f"({', '.join(f'{t:.2f}' for t in times)}); {res.n_starts_at_optimum} starts at the optimum")

    if args.quick:
        rng = np.random.default_rng(0)
        subset = np.sort(rng.choice(n_grid, size=min(args.quick_starts, n_grid), replace=False))
        t0 = time.perf_counter()
        theta, f_loop, _, _ = fit.fit_scipy_loop(n, d, loss, starts_subset=subset)
        part = time.perf_counter() - t0
        loop = part * n_grid / subset.size
        print(f"scipy loop, {subset.size} random starts: {part:.2f} s, extrapolated to {n_grid}: {loop:.1f} s")
    else:
        t0 = time.perf_counter()
        theta, f_loop, _, _ = fit.fit_scipy_loop(n, d, loss)
        loop = time.perf_counter() - t0
        print(f"scipy loop, all {n_grid} starts: {loop:.1f} s (once)")
    print(f"ratio loop / batched: {loop / batched:.1f}x")
    if args.threaded_starts:
        # The same loop as a plain script runs it: OpenBLAS's default threading inside scipy.
        rng = np.random.default_rng(1)
        subset = np.sort(rng.choice(n_grid, size=min(args.threaded_starts, n_grid), replace=False))
        t0 = time.perf_counter()
        fit.fit_scipy_loop(n, d, loss, starts_subset=subset, blas_single_thread=False)
        part = time.perf_counter() - t0
        t0 = time.perf_counter()
        fit.fit_scipy_loop(n, d, loss, starts_subset=subset, blas_single_thread=True)
        single = time.perf_counter() - t0
        print(f"same {subset.size} random starts, default OpenBLAS threading: {part:.2f} s "
              f"(extrapolated to {n_grid}: {part * n_grid / subset.size:.0f} s); single-threaded BLAS: "
              f"{single:.2f} s ({part / single:.0f}x)")

    loop_law = fit.law_from_theta(theta)
    print(f"objective: batched {res.objective:.12g}, loop best {f_loop:.12g} "
          f"(relative difference {(f_loop - res.objective) / res.objective:+.2e})")
    print(f"{'':>6} {'batched':>12} {'scipy loop':>12} {'rel diff':>10} {'Besiroglu':>10}")
    for name in ("E", "A", "B", "alpha", "beta"):
        a, b = getattr(res.law, name), getattr(loop_law, name)
        print(f"{name:>6} {a:>12.6g} {b:>12.6g} {(b - a) / a:>+10.2e} {getattr(BESIROGLU.law, name):>10.6g}")

    t0 = time.perf_counter()
    boot = bootstrap(n, d, loss, n_resamples=args.resamples, seed=0, full_fit=res)
    bt = time.perf_counter() - t0
    print(f"bootstrap, {args.resamples} resamples x {boot.n_starts_per_resample} starts: {bt:.1f} s; "
          f"{boot.n_converged} converged; reference C = {boot.reference_compute:.4g}")
    for name in CI_NAMES:
        lo, hi = boot.intervals[name]
        pub = BESIROGLU.ci.get(name)
        extra = f"   Besiroglu ({pub[0]:.4g}, {pub[1]:.4g})" if pub else ""
        print(f"  {name:<16} ({lo:.4g}, {hi:.4g}){extra}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
