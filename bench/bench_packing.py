"""Packing runs onto the cores: the same sweep, one run at a time vs several at once.

    python bench/bench_packing.py             # configs/tiny.yaml's shapes at 1/4 of its budgets (a few minutes)
    python bench/bench_packing.py --full      # the whole tiny sweep (its real budgets)
    python bench/bench_packing.py --budget-scale 0.125 --repeats 3
    python bench/bench_packing.py --skip-serial-1 --repeats 2   # only the old default vs packed

Trains the grid three times, each into a fresh run store (the token cache is prepared first and
shared, so only training is timed):

    serial-T    workers=1, threads_per_run=T   one run at a time on all T cores (the old default)
    serial-1    workers=1, threads_per_run=1   one run at a time, one thread
    packed      workers=T, threads_per_run=1   T single-threaded runs at once (the new default)

where T is the number of usable cores. Prints each sweep's wall time and tokens/s, the speed-ups,
and checks the final losses: packed must equal serial-1 bit for bit (packing changes no result);
serial-T differs from them only where the thread count changes the reduction order, and the
largest difference is printed. With --repeats, the three are timed in rotating order and the
medians are compared. The machine may be shared: the load average around each sweep is printed.

It also replays the packed sweep's measured run times through the scheduler to compare handing
runs out longest first (what a sweep does: scaling.sweeps.plan.job_order) with the plan's order
(smallest first).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from scaling.config import load_config
from scaling.data.tokens import prepare_tokens
from scaling.runs import store
from scaling.sweeps.driver import run_sweep
from scaling.sweeps.estimates import makespan
from scaling.sweeps.packing import usable_cores
from scaling.sweeps.plan import job_order, plan

TINY = Path(__file__).parent.parent / "configs" / "tiny.yaml"


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3]) if Path("/proc/loadavg").exists() else "n/a"


def sweep(cfg, workers: int, threads: int, cache_dir) -> tuple[float, dict, dict, str, str]:
    """(wall seconds, final loss by run id, run wall by run id, load before, load after)."""
    cfg = cfg.model_copy(update={"executor": cfg.executor.model_copy(
        update={"workers": workers, "threads_per_run": threads})})
    with tempfile.TemporaryDirectory(prefix="bench-packing-") as runs:
        before = load()
        start = time.perf_counter()
        result = run_sweep(cfg, runs, cache_dir)
        wall = time.perf_counter() - start
        table = store.read_runs(result.sweep_dir).set_index("run_id")
    assert (table.status == "finished").all(), table.status.value_counts()
    assert set(int(s["threads"]) for s in result.trained) == {threads}
    return wall, table.final_val_loss.to_dict(), table.wall_s.to_dict(), before, load()


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", type=Path, default=TINY, help="sweep config (default: configs/tiny.yaml)")
    p.add_argument("--full", action="store_true", help="the config's real token budgets")
    p.add_argument("--budget-scale", type=float, default=0.25, help="budgets x this without --full (default 0.25)")
    p.add_argument("--cores", type=int, default=usable_cores(), help="T: cores to use (default: all usable)")
    p.add_argument("--repeats", type=int, default=1, help="time each setting this many times (default 1)")
    p.add_argument("--cache-dir", type=Path, default=None, help="token cache root (default: the usual)")
    p.add_argument("--skip-serial-1", action="store_true",
                   help="time only serial-T and packed (no bitwise check against serial-1)")
    args = p.parse_args(argv)

    cfg = load_config(args.config)
    if not args.full:
        batch = cfg.train.batch_tokens
        tokens = sorted({max(batch, round(t * args.budget_scale / batch) * batch) for t in cfg.grid.tokens})
        cfg = cfg.model_copy(update={"grid": cfg.grid.model_copy(update={"tokens": tokens})})
    T = args.cores
    runs = plan(cfg)
    total_tokens = sum(r.spec.tokens for r in runs)
    print(f"{args.config.name}: {len(runs)} runs, shapes d{'/'.join(str(m.d_model) for m in cfg.grid.models)}, "
          f"budgets {', '.join(f'{t:,}' for t in sorted(cfg.grid.tokens))} tokens "
          f"({total_tokens:,} in all); {T} cores; python {sys.version.split()[0]}")
    prepare_tokens(cfg, args.cache_dir)

    settings = {f"serial-{T}": (1, T), "serial-1": (1, 1), "packed": (T, 1)}
    if args.skip_serial_1:
        del settings["serial-1"]
    walls = {name: [] for name in settings}
    losses, run_walls = {}, {}
    names = list(settings)
    for r in range(args.repeats):
        for name in names[r % len(names):] + names[:r % len(names)]:  # rotate the order each repeat
            workers, threads = settings[name]
            wall, loss, per_run, before, after = sweep(cfg, workers, threads, args.cache_dir)
            walls[name].append(wall)
            if losses.setdefault(name, loss) != loss:
                print(f"  note: {name} gave different losses on repeat {r + 1}")
            run_walls[name] = per_run
            print(f"  {name:<9} workers={workers} threads/run={threads}: {wall:7.1f} s  "
                  f"{total_tokens / wall / 1e3:6.1f}K tok/s  (load avg {before} -> {after})", flush=True)

    median = {name: statistics.median(w) for name, w in walls.items()}
    print(f"\n{'setting':<10} {'workers':>7} {'threads':>7} {'wall (median)':>14} {'tok/s':>8} {'speed-up':>9}")
    base = median[f"serial-{T}"]
    for name, (workers, threads) in settings.items():
        rate = total_tokens / median[name] / 1e3
        speedup = base / median[name]
        print(f"{name:<10} {workers:>7} {threads:>7} {median[name]:>12.1f} s {rate:>7.1f}K {speedup:>8.2f}x")
    print(f"packed vs serial-{T} (one run on all cores): {base / median['packed']:.2f}x"
          + (f"; packed vs serial-1: {median['serial-1'] / median['packed']:.2f}x" if "serial-1" in median else ""))

    same = losses["packed"] == losses.get("serial-1", losses["packed"])
    if "serial-1" in losses:
        print(f"final losses, packed vs serial-1: {'bitwise equal' if same else 'DIFFERENT'} "
              f"({len(losses['packed'])} runs)")
    diffs = [abs(losses["packed"][k] - losses[f"serial-{T}"][k]) for k in losses["packed"]]
    n_equal = sum(d == 0 for d in diffs)
    worst = max(losses["packed"], key=lambda k: abs(losses["packed"][k] - losses[f"serial-{T}"][k]))
    print(f"final losses, {T} threads vs 1 thread: {n_equal}/{len(diffs)} bitwise equal, median difference "
          f"{statistics.median(diffs):.2e} nats, largest {max(diffs):.2e} ({worst})")

    by_plan = [run_walls["packed"][r.run_id] for r in runs]
    longest = sorted(by_plan, key=lambda d: -d)  # the ideal the FLOPs order approximates
    by_flops = [run_walls["packed"][r.run_id] for r in job_order(runs)]
    print(f"scheduler replay of the packed run times on {T} workers: longest first (FLOPs) "
          f"{makespan(by_flops, T):.1f} s, plan order {makespan(by_plan, T):.1f} s, "
          f"longest first by measured time {makespan(longest, T):.1f} s, sum/{T} {sum(by_plan) / T:.1f} s")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
