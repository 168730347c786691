"""Sweeps of few compute budgets: does the default's interval hold where the fit can barely test itself?

    python bench/bench_budgets.py                    # simulated sweeps of 1, 2, 3 and 5 budgets, 4 truths
    python bench/bench_budgets.py --seeds 5 --tables # more seeds; and the public tables cut to their top budgets

A user's table often has one IsoFLOP budget, or two or three. For each truth (the fitted form, a data
term that steepens past 2e9 tokens, a data exponent growing with N, an extra term fading with compute:
bench_backtest.py's `true_loss`) and each number of budgets k, an IsoFLOP sweep of k budgets 3x apart
ending at 1e19 FLOPs (12 sizes a budget about the true optimum, 1% scatter, N and D rounded as a
table's are) is fitted by the default (`analysis.fit_data`, BOOTSTRAP resamples), and the 7 runs about
the true optimum at 3x, 10x and 30x its top budget (each with its own 1% scatter) are predicted.
Printed per k and factor: how many predictions came with an interval, how many of those the interval
held, the median half-width over the median absolute error (a calibrated normal interval: 2.9), and
any exception a fit raised.

With --tables, each public table with budgets (bench/data/backtest) is cut as bench_backtest.py cuts
it at 3x, 10x and 30x, and only the top one or two budgets below the cut are kept for the fit: real
few-budget sweeps, predicting the table's top budget.
"""

from __future__ import annotations

import argparse
import sys
import time
import traceback
from pathlib import Path

import numpy as np
import pandas as pd

BENCH = Path(__file__).resolve().parent
sys.path[:0] = [str(BENCH.parent), str(BENCH)]

from bench_backtest import HALVES, load, true_loss  # noqa: E402

from scaling.laws import analysis  # noqa: E402
from scaling.laws.checks import backtest  # noqa: E402
from scaling.laws.fitting import readers  # noqa: E402

TRUTHS = ("chinchilla", "broken", "n_dependent_beta", "shifted_E")
BUDGET_COUNTS = (1, 2, 3, 5)
FACTORS = (3.0, 10.0, 30.0)
TOP = 1e19
SCATTER = 0.01
BOOTSTRAP = 100


def _sizes(compute: float, k: int) -> np.ndarray:
    """k sizes spread a factor 4 either side of about 20 tokens per parameter at `compute`."""
    return 0.09 * compute ** 0.5 * np.geomspace(0.25, 4.0, k)


def sweep(truth: str, n_budgets: int, seed: int):
    """An IsoFLOP sweep of `truth` at `n_budgets` budgets 3x apart ending at TOP, rounded as a CSV is."""
    rng = np.random.default_rng(seed)
    rows = []
    for c in TOP / 3.0 ** np.arange(n_budgets)[::-1]:
        for n in _sizes(c, 12):
            d = c / (6 * n)
            rows.append((round(n, -3), round(d, -5), true_loss(truth, n, d) * np.exp(SCATTER * rng.standard_normal())))
    frame = pd.DataFrame(rows, columns=["N", "D", "loss"])
    return readers.from_frame(frame, source=f"{truth}, {n_budgets} budget(s), seed {seed}", n_col="N", d_col="D",
                              loss_col="loss")


def _row(fit, n: float, d: float, observed: float) -> dict:
    p = fit.predict(n, d)
    row = {"error": (p.loss - observed) / observed, "given": p.interval is not None}
    if p.interval is not None:
        lo, hi = p.interval
        row.update(covered=bool(lo <= observed <= hi), half_width=(hi - lo) / 2 / p.loss)
    return row


def simulated(seeds: int) -> tuple[dict, list]:
    """{(k, factor): [rows]} over every truth and seed, and the exceptions raised."""
    cells: dict = {(k, f): [] for k in BUDGET_COUNTS for f in FACTORS}
    failures = []
    for truth in TRUTHS:
        for k in BUDGET_COUNTS:
            for seed in range(seeds):
                data = sweep(truth, k, seed)
                try:
                    fit = analysis.fit_data(data, bootstrap=BOOTSTRAP, seed=seed)
                except Exception:                       # noqa: BLE001 - counted and shown: the bench's finding
                    failures.append((data.source, traceback.format_exc(limit=2).splitlines()[-1]))
                    continue
                runs = np.random.default_rng(10_000 + seed)      # the predicted runs' own scatter
                for f in FACTORS:
                    for n in _sizes(f * TOP, 7):
                        d = f * TOP / (6 * n)
                        observed = float(true_loss(truth, n, d)) * np.exp(SCATTER * runs.standard_normal())
                        cells[(k, f)].append(_row(fit, n, d, observed))
    return cells, failures


def tables() -> dict:
    """{(kept budgets, factor): [rows]}: the public tables with budgets, cut at each factor, the fit
    given only the top one or two budgets below the cut."""
    cells: dict = {(k, f): [] for k in (1, 2) for f in FACTORS}
    for name in (t for group in HALVES.values() for t in group):
        data = load(name)
        if data.budgets is None:
            continue
        for f in FACTORS:
            train, test, _ = backtest.future_split(data.compute, data.budgets, f)
            for k in (1, 2):
                kept = np.unique(data.budgets[train])[-k:]
                sub = data.take(train[np.isin(data.budgets[train], kept)])
                if np.unique(sub.budgets).size < k or backtest.too_small(sub, np.arange(len(sub))):
                    continue
                fit = analysis.fit_data(sub, bootstrap=BOOTSTRAP)
                cells[(k, f)] += [_row(fit, float(data.n[i]), float(data.d[i]), float(data.loss[i])) for i in test]
    return cells


def report(cells: dict, what: str) -> str:
    lines = [f"{what}: predictions with an interval; of those, inside it; median half-width / median abs. error",
             "| budgets | " + " | ".join(f"{f:g}x" for f in FACTORS) + " |", "| --- |" + " --- |" * len(FACTORS)]
    for k in sorted({k for k, _ in cells}):
        row = []
        for f in FACTORS:
            rows = cells[(k, f)]
            given = [r for r in rows if r["given"]]
            if not rows:
                row.append("-")
                continue
            error = float(np.median([abs(r["error"]) for r in rows]))
            text = f"{len(given)} of {len(rows)}"
            if given:
                held = sum(r["covered"] for r in given)
                ratio = float(np.median([r["half_width"] for r in given])) / error
                text += f"; held {held} ({100 * held / len(given):.0f}%); {ratio:.1f}"
            row.append(text + f"; error {100 * error:.1f}%")
        lines.append(f"| {k} | " + " | ".join(row) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--tables", action="store_true", help="also the public tables cut to their top budgets")
    args = parser.parse_args()
    start = time.perf_counter()
    cells, failures = simulated(args.seeds)
    print(report(cells, f"simulated sweeps ({len(TRUTHS)} truths x {args.seeds} seeds)"))
    fits = len(TRUTHS) * len(BUDGET_COUNTS) * args.seeds
    print(f"exceptions: {len(failures)} of {fits} fits" + "".join(f"\n  {s}: {e}" for s, e in failures))
    if args.tables:
        print(report(tables(), "public tables, the top budgets below each cut kept"))
    print(f"({time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
