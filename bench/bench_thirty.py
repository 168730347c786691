"""The 30x pessimism's candidates (docs/backtests.md, "The 30x pessimism: candidates, fixed before
measuring"), scored leave-one-source-out from dumps already made: no fit.

    python bench/bench_thirty.py --loso DEV.json HELD.json FRESH.json FRESH2.json FRESH3.json \\
        --members MDEV.json MHELD.json MFRESH.json MFRESH2.json MFRESH3.json \\
        --simulated SIM.json --simulated-members MSIM.json

--loso: `bench_backtest.py --half H --bootstrap 20 --json` dumps (the default fit's splits);
--members: `bench_backtest.py --form median --half H --bootstrap 20 --json` dumps of the same groups
(each run's four predicting forms' predictions, and each form's cuts and rule). The two dumps hold the
same fits: the backtest's law is the same run by run (checked).

A: the centre beyond the data is the geometric median of the four forms' predictions; B: the tied
form's where the law beyond the data cannot tell alpha from beta (|alpha - beta| < 1.96 sd, its
Gauss-Newton covariance), else the default's. Both carry the default's interval over in log. C: A's
centre with the median of the forms' own interval (`combined.combine`'s rule, recomputed from the
members' cuts) never narrower than the default law's estimation error (`extrapolation.at_least`). Under
leave-one-source-out each member's bias is relearned with the fallback learned without its source,
as the default's is (`bench_backtest_loso.leave_one_source_out`).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

# What it reuses of the bench: its tables and formats, and the leave-one-source-out rescoring.
from bench_backtest import FACTORS, HALVES, _row, sim_table, table  # noqa: E402
from bench_backtest_loso import UNSEEN, _context, by_source, leave_one_source_out, rescore, source  # noqa: E402

from scaling.laws.checks import backtest, combined, extrapolation  # noqa: E402

Z = 1.96


def member_bias(member: dict, tpp: float, prior: extrapolation.Extrapolation) -> float:
    """A form's bias beyond the data as `cross_forms.fitted_entry` learns it, with fallback `prior`."""
    cuts = extrapolation.distinct_cuts(backtest.Cut.from_json(c) for c in member["cuts"])
    return extrapolation.table_bias(cuts, extrapolation.fallback(tpp, prior), extrapolation.PRIOR_WEIGHT)


def member_centres(key: str, split: dict, prior: extrapolation.Extrapolation) -> list[dict]:
    """Each row's member predictions, their biases relearned with `prior` in place of the frozen one."""
    tpp = _context(key)["tpp"]
    shift = {}
    for m in split["members"]:
        frozen = member_bias(m, tpp, extrapolation.PRIOR)
        assert math.isclose(frozen, m["extrapolation"]["bias"], rel_tol=1e-9, abs_tol=1e-12), (key, m["name"])
        shift[m["name"]] = member_bias(m, tpp, prior) - frozen
    return [{name: v * math.exp(shift[name] * max(r["far"], 0.0)) for name, v in r["members"].items()}
            for r in split["rows"]]


def median_rule(key: str, split: dict, prior: extrapolation.Extrapolation) -> extrapolation.Extrapolation:
    """The median of the forms' own rule beyond the data (`combined.combine`), from the dumped members'
    cuts, each member's bias (and unknown bias, where it has one) relearned with the fallback `prior`."""
    tpp = _context(key)["tpp"]
    chosen, biases, unknown = [], [], 0.0
    for m in split["members"]:
        cuts = tuple(backtest.Cut.from_json(c) for c in m["cuts"])
        frozen = extrapolation.Extrapolation.from_json(m["extrapolation"])
        rule = replace(frozen, bias=member_bias(m, tpp, prior), bias_sd=0.0)
        if frozen.bias_sd > 0:              # its E far below its runs (`rule_beyond`): the unknown bias about it
            rule = extrapolation.unknown_bias(rule, cuts)
            if prior is extrapolation.PRIOR:
                assert math.isclose(rule.bias_sd, frozen.bias_sd, rel_tol=1e-9), (key, m["name"])
        chosen.append(SimpleNamespace(name=m["name"], cuts=cuts))
        biases.append(rule.bias)
        unknown = max(unknown, rule.bias_sd)
    cuts = combined._cuts(chosen, biases, combined.FACTORS)
    noise = float(np.median([m["residual_rms"] for m in split["members"]]))
    rule = extrapolation.learn_extrapolation(cuts, prior=combined.NO_BIAS, noise=noise, floor=combined.MEDIAN_FLOOR,
                                             bias=0.0)
    if unknown > 0:
        rule = extrapolation.unknown_bias(rule, cuts)
        rule = replace(rule, bias_sd=max(rule.bias_sd, unknown))
    return rule


def tied_allowed(split: dict) -> bool:
    """Whether the law beyond the data cannot tell alpha from beta at 95% (its covariance's last two
    constants are alpha and beta, E pinned or not); False where no covariance was measured."""
    cov = split["backtest"].get("covariance") or []
    if not cov:
        return False
    c = np.array(cov)
    law = split["backtest"]["law"]
    sd = math.sqrt(max(c[-2, -2] + c[-1, -1] - 2 * c[-2, -1], 0.0))
    return abs(law["alpha"] - law["beta"]) < Z * sd


def recentred(row: dict, centre: float) -> dict:
    """The default's row with its interval carried over in log to `centre`."""
    if row is None:
        return row
    scale = centre / row["center"]
    return _row(centre, row["lo"] * scale, row["hi"] * scale, row["observed"])


def candidates(key: str, default: dict, split: dict, members: dict,
               prior: extrapolation.Extrapolation) -> dict:
    """{"A", "B", "C": split} for one split: A and B the default's rescored rows re-centred; C the
    median's own rule (`median_rule`) about A's centre, never narrower than the default law's own
    estimation error (`at_least`, as the default's interval)."""
    centres = member_centres(key, members, prior)
    tied = tied_allowed(split)
    rule = median_rule(key, members, prior)
    check = backtest.Backtest.from_json(split["backtest"])
    ctx = _context(key)
    out: dict = {"A": {"rows": []}, "B": {"rows": [], "tied": tied}, "C": {"rows": []}}
    for r, d, m, est in zip(split["rows"], default["rows"], centres, check.estimation_sd(ctx["n"], ctx["d"])):
        if r["far"] <= 0:                       # inside the data: the default's, unchanged
            for name in out:
                out[name]["rows"].append(d)
            continue
        centre = float(np.exp(np.median(np.log(list(m.values())))))
        out["A"]["rows"].append(recentred(d, centre))
        out["B"]["rows"].append(recentred(d, m["tied"]) if tied else d)
        out["C"]["rows"].append(_row(*(float(v) for v in rule.widen(centre, r["far"], estimation=est, dof=check.dof)),
                                     r["observed"]))
    return out


NAMES = {"A": "A: median of the forms", "B": "B: tied where alpha ~ beta",
         "C": "C: median of the forms, its own interval and the estimation floor"}


def score(dump: dict, members: dict, loso: bool) -> dict:
    """{rule: {key: split}} for the default and the candidates, every split of `dump`: with `loso`
    the fallback relearned without each split's source, else the frozen one."""
    if loso:
        default, fallbacks = leave_one_source_out(dump, extrapolation.WELL_TRAINED_TPP)
    else:
        default = {k: rescore(k, v, extrapolation.PRIOR, extrapolation.WELL_TRAINED_TPP)
                   for k, v in dump.items() if v and "backtest" in v}
    tag = " (LOSO)" if loso else " (frozen)"
    rules: dict = {"default" + tag: default, **{name + tag: {} for name in NAMES.values()}}
    for key, split in default.items():
        prior = fallbacks[source(key.split("|")[1])] if loso else extrapolation.PRIOR
        got = candidates(key, split, dump[key], members[key], prior)
        for short, name in NAMES.items():
            rules[name + tag][key] = got[short]
    return rules


def check_same_fits(dump: dict, members: dict) -> None:
    """The two dumps must hold the same fits: the backtest's law's prediction equal run by run."""
    for key, split in dump.items():
        if split and "backtest" in split:
            other = members.get(key)
            assert other and len(other["rows"]) == len(split["rows"]), key
            assert all(math.isclose(a["law"], b["law"], rel_tol=1e-12) for a, b in zip(split["rows"], other["rows"]))


def report(rules: dict, unseen: tuple = UNSEEN) -> None:
    """Each rule's table on every table and on the `unseen` groups, per source, and B's choices."""
    for title, results in rules.items():
        for label, groups in (("all tables", tuple(HALVES)), (f"unseen groups ({', '.join(unseen)})", unseen)):
            print(f"\n{title}, {label}")
            chosen = {f"x|{k.split('|', 1)[1]}": v for k, v in results.items() if k.split("|")[0] in groups}
            print(table(chosen, "x"))
    print("\n" + by_source(rules))
    tied = next(v for k, v in rules.items() if k.startswith(NAMES["B"]))
    used = sorted(k for k, v in tied.items() if v.get("tied"))
    print(f"\nB used the tied form in {len(used)} of {len(tied)} splits: " + ", ".join(used))


def scaled(rules: dict, unseen: tuple = UNSEEN) -> None:
    """Each rule's intervals scaled (in log, one factor per cut) to hold exactly 95% and 90% of the
    runs, and the half-width / error they would then have: how sharp its interval's shape is at equal
    coverage (a calibrated normal interval's ratio is 1.96 / 0.674 = 2.91 at 95%, 2.44 at 90%)."""
    for title, results in rules.items():
        for label, groups in (("all tables", tuple(HALVES)), ("unseen groups", unseen)):
            print(f"\n{title}, {label}: scaled to hold 95% / 90%")
            for f in FACTORS:
                rows = [r for k, s in results.items() if s and k.split("|")[0] in groups and k.endswith(f"|{f:g}")
                        for r in s["rows"] if r]
                if not rows:
                    continue
                err, half = np.array([abs(r["error"]) for r in rows]), np.array([r["half_width"] for r in rows])
                need = err / half                  # the scale at which each run just falls inside
                scales = [np.quantile(need, c) for c in (0.95, 0.90)]
                cells = [f"x{s:.2f}, ratio {np.median(s * half) / np.median(err):.2f}" for s in scales]
                print(f"  {f:g}x ({len(rows)} runs; as is {np.mean(need <= 1):.0%}, ratio "
                      f"{np.median(half) / np.median(err):.2f}): " + "; ".join(cells))


def simulated(sim: dict, sim_members: dict) -> None:
    """The candidates frozen (the fallback as it is) on the simulated sweeps."""
    default = {k: rescore(k, v, extrapolation.PRIOR, extrapolation.WELL_TRAINED_TPP) for k, v in sim.items() if v}
    got = {k: candidates(k, default[k], sim[k], sim_members[k], extrapolation.PRIOR) for k in default}
    print(sim_table(default, "the default, rescored"))
    for name in NAMES:
        print(sim_table({k: v[name] for k, v in got.items()}, f"candidate {name}"))
    print(f"B used the tied form in {sum(v['B']['tied'] for v in got.values())} of {len(got)} simulated splits")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--loso", type=Path, nargs="+", required=True, metavar="JSON")
    p.add_argument("--members", type=Path, nargs="+", required=True, metavar="JSON")
    p.add_argument("--simulated", type=Path, metavar="JSON")
    p.add_argument("--simulated-members", type=Path, metavar="JSON")
    p.add_argument("--frozen", action="store_true", help="also the frozen fallback (no LOSO)")
    p.add_argument("--scaled", action="store_true",
                   help="also each rule's half-width / error with its intervals scaled to hold 95%% and 90%%")
    p.add_argument("--unseen", nargs="+", default=list(UNSEEN), metavar="GROUP",
                   help="the groups shown apart (default: %(default)s); a group run once, e.g. fresh4")
    args = p.parse_args()
    dump = {k: v for path in args.loso for k, v in json.loads(path.read_text()).items()}
    members = {k: v for path in args.members for k, v in json.loads(path.read_text()).items()}
    check_same_fits(dump, members)
    rules = score(dump, members, loso=True)
    report(rules, tuple(args.unseen))
    if args.scaled:
        scaled(rules, tuple(args.unseen))
    if args.frozen:
        report(score(dump, members, loso=False), tuple(args.unseen))
    if args.simulated and args.simulated_members:
        sim, sim_members = (json.loads(p.read_text()) for p in (args.simulated, args.simulated_members))
        check_same_fits(sim, sim_members)
        simulated(sim, sim_members)


if __name__ == "__main__":
    main()
