"""Time and peak memory of the whole `scaling fit` command on large tables (issues 15 and 29).

Public tables are this size (a learning-rate/batch study has about 1,900 runs; training-curve
tables 9,000+ points), and a careless export can be a million rows. Each size writes a CSV of a
simulated cross grid (Chinchilla's law, 1% noise), then runs `python -m scaling fit --csv ...` as
a child process and reads that child's own peak RSS from wait4: the command as a user runs it
(loading, the fit, the bootstrap, every diagnostic, writing fit.json), imports included.

    .venv/bin/python bench/bench_fit_memory.py [--rows 10000 1000000] [--bootstrap 0]

Targets (issue 29): 10k rows under 500 MB; 1e6 rows under 2 GB, or refused in one line (exit 2).
Measured (2 shared cores, after bracketed_share lost its n x n matrix; before: 10k rows 1.77 GB,
1e6 rows a traceback asking for 7.28 TiB):

         rows  boot  seconds  peak MB
        10000     0      7.0      272
        10000  1000    523        356
      1000000     0    129        505    (an earlier run on a busier machine: 273 s, 539 MB)

The bootstrap fits its resamples a chunk at a time (scaling.laws.fitting.objective.batch_rows), so its
memory does not grow with the resamples; 1e6 rows with the default 1,000 resamples is bounded the
same way but takes hours of CPU, and was not run.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def write_table(rows: int, path: Path) -> None:
    import numpy as np
    import pandas as pd

    from scaling.laws.design.simulate import cross_grid, simulate
    from scaling.laws.forms.references import reference

    side = int(round(rows ** 0.5))
    grid = cross_grid(np.geomspace(1e6, 1e10, side), np.geomspace(1e8, 1e12, rows // side))
    data = simulate(reference("chinchilla").law, grid, noise=0.01, seed=0)
    pd.DataFrame({"N": data.n, "D": data.d, "loss": data.loss}).to_csv(path, index=False)


def run_fit(table: Path, out: Path, n_boot: int) -> dict:
    """`scaling fit` on `table` in a child process: seconds, its peak RSS, exit code, last line."""
    cmd = [sys.executable, "-m", "scaling", "fit", "--csv", str(table), "--n-col", "N", "--d-col", "D",
           "--loss-col", "loss", "--bootstrap", str(n_boot), "--out", str(out)]
    start = time.perf_counter()
    with tempfile.TemporaryFile() as log:
        child = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(child.pid, 0)   # this child's own peak, not the largest so far
        child.returncode = os.waitstatus_to_exitcode(status)
        log.seek(0)
        lines = log.read().decode(errors="replace").strip().splitlines()
    return {"seconds": time.perf_counter() - start, "peak_mb": usage.ru_maxrss / 1024,
            "rc": child.returncode, "last": lines[-1] if lines else ""}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[10_000, 1_000_000])
    parser.add_argument("--bootstrap", type=int, default=0, help="resamples (default 0: the fit alone)")
    args = parser.parse_args()
    print(f"{'rows':>9} {'boot':>5} {'seconds':>8} {'peak MB':>8} {'rc':>3}  last line")
    with tempfile.TemporaryDirectory() as tmp:
        for rows in args.rows:
            table = Path(tmp) / f"points-{rows}.csv"
            write_table(rows, table)
            r = run_fit(table, Path(tmp) / f"fit-{rows}", args.bootstrap)
            print(f"{rows:>9} {args.bootstrap:>5} {r['seconds']:>8.1f} {r['peak_mb']:>8.0f} {r['rc']:>3}  "
                  f"{r['last'][:100]}", flush=True)


if __name__ == "__main__":
    main()
