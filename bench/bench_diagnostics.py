"""Calibrate the verdict: fit simulated sweeps of known laws and count how often it is right.

    python bench/bench_diagnostics.py                 # 8 laws x 5 designs x 7 error kinds = 280 fits
    python bench/bench_diagnostics.py --laws 2        # a quick look (70 fits)

Each table comes from `scaling.laws.design.simulate`, with a law drawn either around Besiroglu et al.'s
refit of Chinchilla (`random_law`) or far from it (`distant_law`: alpha != beta, E from 1.5 to 3.5),
alternately; one of five designs (a cross grid of 5 sizes over 2 decades x 4 token counts; 5 IsoFLOP
budgets x 5 sizes of one model family (a ladder, as a real sweep has) nearest the optimum; 6 sizes
within a factor 1.3; 5 sizes x 4 token counts within a factor 1.3; 3 sizes x 2 token counts); and
one kind of error: independent log-normal scatter (0.5, 1, 2%), Student-t scatter with 3 degrees
of freedom (1%: outlying runs), per-size offsets (0.5% or 1% shared by every run of a size, as a
mistuned learning rate gives, plus 0.25-0.5% independent scatter), or a misspecified law (the truth
has an N x D interaction term worth +-1% over the design, plus 0.5% scatter). Each is fitted as
`scaling fit --form chinchilla` does (Hoffmann's 4,500 starts; `--resamples` bootstrap resamples) and
diagnosed: the verdict calibrated is the Chinchilla-form law's (the default's backtest check reads the
median of the forms' cuts instead).
Prints the verdicts per design and error kind, and the two rates the thresholds are held to
(issues 13 and 24):

* of the `trustworthy` verdicts, the share whose tokens-per-parameter interval misses the truth
  (target: at most 5%), by error kind;
* of the well-designed sweeps (cross grid or IsoFLOP, independent noise <= 1%), the share called
  `not identified` (target: at most 5%); and of those, the share among the sweeps that can determine
  their law's allocation at all: the ones whose first-order bound (`design.asymptotic_precision`,
  the truth and its scatter known) is within half the `not identified` thresholds (a's width <= 0.25,
  tokens-per-parameter hi/lo <= sqrt(20)). The bootstrap's widths ran 1.2-1.7x that bound at 0.5-1%
  scatter (multinomial counts, before the Bayesian bootstrap), so a sweep whose bound sits near the
  thresholds is undetermined as often as not, and one past them always: calling it `not identified`
  is the verdict doing its job, and the 5% target is held by the determinable sweeps.
"""

from __future__ import annotations

import argparse
import collections
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

from scaling.errors import UsageError
from scaling.laws import analysis
from scaling.laws.checks.verdict import THRESHOLDS
from scaling.laws.design.simulate import cross_grid, isoflop_grid, simulate
from scaling.laws.design.sweep import asymptotic_precision
from scaling.laws.forms.law import Law
from scaling.laws.forms.references import BESIROGLU

BUDGETS = np.geomspace(1e18, 1e20, 5)
LADDER = np.geomspace(3e6, 3e10, 21)        # a model family: sizes a factor 1.58 apart

# name -> simulate() keywords; "independent" kinds are the clean ones the not-identified rate uses.
ERRORS = {
    "independent 0.5%": {"noise": 0.005},
    "independent 1%": {"noise": 0.01},
    "independent 2%": {"noise": 0.02},
    "t3 tails 1%": {"noise": 0.01, "tails": 3},
    "size offsets 0.5%": {"noise": (0.0025, 0.005), "size_offset": 0.005},
    "size offsets 1%": {"noise": (0.0025, 0.005), "size_offset": 0.01},
    "interaction 1%": {"noise": 0.005, "interaction": 0.01},
}


def designs(law: Law) -> dict:
    return {
        "cross grid": cross_grid(np.geomspace(1e7, 1e9, 5), np.geomspace(1e9, 3e10, 4)),
        "isoflop": isoflop_grid(BUDGETS, law, per_budget=5, ladder=LADDER),
        "narrow N": cross_grid(np.geomspace(1e8, 1.3e8, 6), np.geomspace(1e9, 3e10, 4)),
        "narrow D": cross_grid(np.geomspace(1e7, 1e9, 5), np.geomspace(1e10, 1.3e10, 4)),
        "few points": cross_grid([1e7, 1e8, 1e9], [1e9, 3e10]),
    }


def random_law(rng) -> Law:
    """Besiroglu et al.'s law with its exponents moved by up to 0.03 and A, B, E by up to 30%: the
    kind of law a sweep planned around Chinchilla's prior meets (tokens per parameter at 1e19
    FLOPs from about 5 to 80, inside the designs' range)."""
    law = BESIROGLU.law
    return Law(E=law.E * rng.uniform(0.8, 1.2), A=law.A * rng.uniform(0.7, 1.4), B=law.B * rng.uniform(0.7, 1.4),
               alpha=law.alpha + rng.uniform(-0.03, 0.03), beta=law.beta + rng.uniform(-0.03, 0.03))


def distant_law(rng) -> Law:
    """A law unlike Besiroglu's: alpha and beta drawn apart from 0.2 to 0.6, E from 1.5 to 3.5, and
    A, B set so that each term is 0.2-1.0 nats at the middle of the designs (N 1e8, D 4e9)."""
    alpha, beta = (float(x) for x in rng.uniform(0.2, 0.6, 2))
    return Law(E=float(rng.uniform(1.5, 3.5)), A=float(rng.uniform(0.2, 1.0) * 1e8 ** alpha),
               B=float(rng.uniform(0.2, 1.0) * 4e9 ** beta), alpha=alpha, beta=beta)


def table(law: Law, runs, error: dict, rng):
    """The simulated points of `runs` under `law` with one kind of `error`."""
    kw = {k: v for k, v in error.items() if k != "interaction"}
    if isinstance(kw["noise"], tuple):
        kw["noise"] = rng.uniform(*kw["noise"])
    data = simulate(law, runs, seed=int(rng.integers(2**31)), **kw)
    if "interaction" in error:        # +-error["interaction"] at the design's corners, 0 at its centre
        z = [(np.log(v) - np.log(v).mean()) / np.ptp(np.log(v)) * 2 for v in (data.n, data.d)]
        data = replace(data, loss=data.loss * np.exp(error["interaction"] * z[0] * z[1]),
                       source=data.source + f" with an N x D interaction of {error['interaction']:g}")
    return data


def determinable(runs, law: Law, noise: float) -> tuple[bool, float, float]:
    """Whether a sweep of `runs` can determine `law`'s allocation at independent scatter `noise`: its
    first-order bound within half the `not identified` thresholds (a's width; log of tokens per
    parameter's hi/lo), at the design's largest compute; and the bound's two widths."""
    reference = float(np.max(6.0 * runs[:, 0] * runs[:, 1]))
    a_width, tpp_ratio = asymptotic_precision(runs, law, noise=noise, compute=reference)
    ok = a_width <= THRESHOLDS["a_width"][1] / 2 and tpp_ratio <= np.sqrt(THRESHOLDS["tpp_ratio"][1])
    return ok, a_width, tpp_ratio


def record(law_index: int, design: str, kind: str, law: Law, fit, runs) -> dict:
    """One fitted table: what it was, its verdict, its tokens-per-parameter interval and the truth,
    and the first-order bound of its design at its independent scatter (none for the other kinds)."""
    row = {"law": law_index, "design": design, "error": kind, "verdict": "not identified" if fit is None else
           fit.diagnostics.verdict}
    noise = ERRORS[kind]["noise"]
    if len(ERRORS[kind]) == 1:
        row.update(zip(("determinable", "bound_a_width", "bound_tpp_ratio"), determinable(runs, law, noise)))
    if fit is not None:
        lo, hi = fit.interval("tokens_per_param") or (np.nan, np.nan)
        lof = fit.lack_of_fit or {}
        p_values = [t["p_value"] for t in lof.get("tests", []) if t["p_value"] is not None]
        row.update(tpp_lo=lo, tpp_hi=hi, tpp_true=law.tokens_per_param(fit.reference_compute),
                   widened_by=fit.ci.widened_by, lack_of_fit_p=min(p_values, default=np.nan),
                   not_identified_by=deciding(fit) if fit.diagnostics.verdict == "not identified" else "")
    return row


def deciding(fit) -> str:
    """The checks that made a fit `not identified`, with their values and the intervals' widening."""
    if fit is None:
        return "refused (the constants run off to infinity)"
    named = [f"{c.name} {c.value:.3g}" if c.value is not None else c.name
             for c in fit.diagnostics.checks if c.status == "not identified"]
    return ", ".join(named) + f"; intervals widened {fit.ci.widened_by:.2f}x"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--laws", type=int, default=8, help="laws per design and error kind (default 8)")
    p.add_argument("--resamples", type=int, default=200, help="bootstrap resamples per fit (default 200)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--designs", help="comma-separated designs to fit (default all; the tables of the others are still "
                                     "drawn, so each fitted table is the one a full run fits)")
    p.add_argument("--errors", help="comma-separated error kinds to fit (default all), likewise")
    p.add_argument("--csv", type=Path, help="also write one row per fitted table here (verdict, interval, truth, "
                                            "the lack-of-fit p and widening), to study other rules offline")
    args = p.parse_args(argv)
    rows = []
    chosen_designs = args.designs.split(",") if args.designs else list(designs(BESIROGLU.law))
    chosen_errors = args.errors.split(",") if args.errors else list(ERRORS)

    rng = np.random.default_rng(args.seed)
    verdicts = collections.Counter()
    trusted, missed = collections.Counter(), collections.Counter()
    good = good_unidentified = 0
    determined = determined_unidentified = 0
    start = time.perf_counter()
    for i in range(args.laws):
        law = (random_law if i % 2 == 0 else distant_law)(rng)
        for design, runs in designs(law).items():
            for kind, error in ERRORS.items():
                data = table(law, runs, error, rng)
                if design not in chosen_designs or kind not in chosen_errors:
                    continue
                try:
                    fit = analysis.fit_data(data, bootstrap=args.resamples, seed=0, form="chinchilla")
                except UsageError:              # refused: the constants run off to infinity
                    fit = None
                verdict = "not identified" if fit is None else fit.diagnostics.verdict
                verdicts[design, kind, verdict] += 1
                rows.append(record(i + 1, design, kind, law, fit, runs))
                if verdict == "trustworthy":
                    lo, hi = fit.interval("tokens_per_param") or (np.nan, np.nan)
                    trusted[kind] += 1
                    truth = law.tokens_per_param(fit.reference_compute)
                    if not lo <= truth <= hi:
                        missed[kind] += 1
                        print(f"  miss: law {i + 1}, {design}, {kind}: tokens per parameter {truth:.3g} outside "
                              f"[{lo:.3g}, {hi:.3g}], intervals widened {fit.ci.widened_by:.2f}x")
                if design in ("cross grid", "isoflop") and kind in ("independent 0.5%", "independent 1%"):
                    good += 1
                    good_unidentified += verdict == "not identified"
                    ok, a_bound, tpp_bound = determinable(runs, law, error["noise"])
                    determined += ok
                    determined_unidentified += ok and verdict == "not identified"
                    if verdict == "not identified":
                        print(f"  not identified: law {i + 1}, {design}, {kind}: {deciding(fit)}; first-order bound: "
                              f"a width {a_bound:.3g}, tokens per parameter hi/lo {tpp_bound:.3g}")
        print(f"law {i + 1}/{args.laws} done, {time.perf_counter() - start:.0f} s", flush=True)

    if args.csv:
        pd.DataFrame(rows).to_csv(args.csv, index=False)
    names = ("trustworthy", "use with caution", "not identified")
    print(f"\n{'design':<12} {'error':<18}  " + "  ".join(f"{n:>16}" for n in names))
    for design in designs(random_law(rng)):
        for kind in ERRORS:
            print(f"{design:<12} {kind:<18}  " + "  ".join(f"{verdicts[design, kind, n]:>16d}" for n in names))
    print(f"\n{sum(verdicts.values())} fits in {time.perf_counter() - start:.0f} s")
    print(f"\n{'error':<18} {'trustworthy':>12} {'misses truth':>13}")
    for kind in ERRORS:
        print(f"{kind:<18} {trusted[kind]:>12d} {missed[kind]:>13d}")
    total, total_missed = sum(trusted.values()), sum(missed.values())
    print(f"trustworthy verdicts whose tokens-per-parameter interval misses the truth: {total_missed} of "
          f"{total} ({100 * total_missed / max(total, 1):.1f}%; target <= 5%)")
    print(f"well-designed sweeps (cross grid or IsoFLOP, independent noise <= 1%) called not identified: "
          f"{good_unidentified} of {good} ({100 * good_unidentified / max(good, 1):.1f}%)")
    print(f"  of them, those whose design can determine the allocation (first-order bound within half the "
          f"thresholds): {determined_unidentified} of {determined} "
          f"({100 * determined_unidentified / max(determined, 1):.1f}%; target <= 5%)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
