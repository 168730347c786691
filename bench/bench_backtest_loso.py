"""Leave one source out: how the rule beyond the data fares on a source whose tables it never learned from.

    python bench/bench_backtest_loso.py DEV.json HELD.json ... [--simulated SIM.json]
    python bench/bench_backtest.py --loso DEV.json HELD.json ... [--simulated SIM.json]   # the same

It reads the "after" `--json` dumps of bench_backtest.py's groups (and of its `--simulate`) and
predicts each split again with no fit (`rescore`): the frozen rule, and the rule whose fallback
bias is relearned on the other sources' splits for each source in turn (`loso_report`).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from dataclasses import replace
from functools import cache
from pathlib import Path

import numpy as np

BENCH = Path(__file__).resolve().parent
sys.path[:0] = [str(BENCH.parent), str(BENCH)]     # scaling, and bench_backtest beside this file

from bench_backtest import FACTORS, HALVES, _row, load, sim_table, simulate, table  # noqa: E402

from scaling.laws.checks import backtest, extrapolation  # noqa: E402

# Leave one source out (`--loso`): which source each table comes from (bench/data/backtest/README.md).
# A source's tables leave together: Marin 2026's three corpora, Porian et al.'s ten configurations,
# Gadre et al.'s three corpora, the Marin optimizer study's two optimizers (a study apart from
# Marin 2026's sweeps: other models, other loss), and the Marin MoE learning-rate sweep apart from
# both (mixture-of-experts models, another optimizer and loss); AI2's "amberish" ladder with OLMo 2's
# (the same team and ladder script, a year apart: counted as one source, the cautious side); every
# other table is its own source.
SOURCE_PREFIXES = (("marin_optsweep_", "marin optimizer study"), ("marin_moe_", "marin moe lr sweep"),
                   ("marin_", "marin 2026"), ("porian_", "porian"), ("gadre_", "gadre"),
                   ("olmo_amberish_", "olmo_ladder"))
UNSEEN = ("fresh2", "fresh3", "fresh4", "fresh5")       # the groups each run once, unseen, on a frozen rule


def source(name: str) -> str:
    return next((src for prefix, src in SOURCE_PREFIXES if name.startswith(prefix)), name)


@cache
def _table(group: str, name: str):
    return load(name) if group in HALVES else simulate(group, int(name))


@cache
def _context(key: str) -> dict:
    """What the rule beyond the data needs of one split ("group|table|factor", or a simulation's
    "truth|seed|factor") besides its dump, none of it a fit: the predicted runs' N and D as the
    bench cut them, the median tokens per parameter of the runs below the cut, and the lowest
    loss and the top compute of the runs the backtest's law was fitted to (`backtest.backtest`)."""
    group, name, factor = key.split("|")
    data = _table(group, name)
    train, test, _ = backtest.future_split(data.compute, data.budgets, float(factor))
    sub = data.take(train)
    runs = backtest.trained(sub, np.arange(len(sub)))
    base = sub if runs.size == len(sub) or backtest.too_small(sub, runs) else sub.take(runs)
    return {"n": data.n[test], "d": data.d[test], "tpp": backtest.median_tpp(sub, np.arange(len(sub))),
            "lowest": float(base.loss.min()), "n_train": len(sub), "top": float(sub.compute.max())}


def rescore(key: str, split: dict, prior: extrapolation.Extrapolation, well_trained: float) -> dict:
    """A dumped split predicted again by the rule beyond the data with another fallback (`prior`)
    and gate (`well_trained`): the same refits and cuts (no fit), as `LawFit.predict` predicts."""
    ctx, check = _context(key), backtest.Backtest.from_json(split["backtest"])
    assert check.law is not None
    rule = extrapolation.rule_beyond(check.cuts, tokens_per_param=ctx["tpp"], E=check.law.E, lowest_loss=ctx["lowest"],
                                     noise=check.extrapolation.noise, prior=prior, well_trained=well_trained)
    rows = []
    for r, est in zip(split["rows"], check.estimation_sd(ctx["n"], ctx["d"])):
        if r["far"] > 0:
            rows.append(_row(*(float(v) for v in rule.widen(r["law"], r["far"], estimation=est, dof=check.dof)),
                             r["observed"]))
        else:                                   # inside the fitted compute: the bootstrap's, unchanged
            rows.append(_row(r["fitted"], *r["boot"], r["observed"]))
    return {"rows": rows}


def observed_cut(key: str, split: dict) -> backtest.Cut:
    """A dumped split as one cut of its table, as `--learn` counts a full table's cuts: the backtest's
    law's own errors on the runs it predicted, their distances and the law's precision there."""
    ctx, check = _context(key), backtest.Backtest.from_json(split["backtest"])
    errors = tuple((r["law"] - r["observed"]) / r["observed"] for r in split["rows"])
    sd = check.estimation_sd(ctx["n"], ctx["d"]) if check.covariance else np.full(len(errors), np.inf)
    return backtest.Cut(float(key.split("|")[2]), ctx["n_train"], len(errors), ctx["top"], errors=errors,
                        distances=tuple(r["far"] for r in split["rows"]), raw_errors=errors,
                        prediction_sd=tuple(float(v) for v in sd))


def learned_fallback(cuts: list, growth: bool) -> extrapolation.Extrapolation:
    """The fallback learned from `cuts` as `learn` learns it (pooled, no prior, no floor): its bias,
    and its growth where `growth` (else PRIOR's, tuned for coverage rather than learned)."""
    rule = extrapolation.learn_extrapolation(cuts, weight=0.0, floor=0.0)
    return replace(extrapolation.PRIOR, bias=rule.bias, growth=rule.growth if growth else extrapolation.PRIOR.growth,
                   source="the other sources' tables")


def leave_one_source_out(dump: dict, well_trained: float, growth: bool = False) -> tuple[dict, dict]:
    """Each source in turn scored by the rule whose fallback was learned on the other sources'
    splits alone (those the gate `well_trained` gives the fallback bias: median tokens per
    parameter below it): ({key: rescored split}, {source: its fallback})."""
    splits = {k: v for k, v in dump.items() if v and "backtest" in v}
    cuts = {k: observed_cut(k, v) for k, v in splits.items()}
    out, fallbacks = {}, {}
    for src in sorted({source(k.split("|")[1]) for k in splits}):
        others = [c for k, c in cuts.items() if source(k.split("|")[1]) != src and _context(k)["tpp"] < well_trained]
        fallbacks[src] = learned_fallback(others, growth)
        out.update({k: rescore(k, v, fallbacks[src], well_trained) for k, v in splits.items()
                    if source(k.split("|")[1]) == src})
    return out, fallbacks


def by_source(rules: dict) -> str:
    """Per source and factor, each rule's median over its tables of the median abs. error and its
    runs inside the interval."""
    names = list(rules)
    lines = ["| source | factor | " + " | ".join(f"rule {j + 1}" for j in range(len(names))) + " |",
             "| --- | --- |" + " --- |" * len(names)]
    first = rules[names[0]]
    for src in sorted({source(k.split("|")[1]) for k in first}):
        for f in FACTORS:
            keys = [k for k in first if source(k.split("|")[1]) == src and k.endswith(f"|{f:g}")]
            if keys:
                cells = []
                for name in names:
                    rows = [rules[name][k]["rows"] for k in keys]
                    med = np.median([np.median(np.abs([r["error"] for r in t])) for t in rows])
                    cells.append(f"{100 * med:.2f}% / {sum(r['covered'] for t in rows for r in t)} of "
                                 f"{sum(len(t) for t in rows)}")
                lines.append(f"| {src} | {f:g}x | " + " | ".join(cells) + " |")
    return "\n".join(["rules: " + "; ".join(f"{j + 1}. {name}" for j, name in enumerate(names)), *lines])


def loso_report(dump: dict, sim_dump: dict | None) -> None:
    """The frozen rule, the rule with its fallback relearned leaving each source out, and the
    candidate (no gate: the fallback bias for every table, shrunk by its own cuts as now), on all
    the tables and on the unseen groups; the candidate frozen on all the tables in simulation."""
    t0 = time.perf_counter()
    frozen = {k: rescore(k, v, extrapolation.PRIOR, extrapolation.WELL_TRAINED_TPP)
              for k, v in dump.items() if v and "backtest" in v}
    rules = {"the rule as frozen (fallback -2.7%/decade, gate 20)": frozen}
    for title, gate, growth in (("LOSO, the rule (gate 20)", extrapolation.WELL_TRAINED_TPP, False),
                                ("LOSO, the rule, growth relearned too", extrapolation.WELL_TRAINED_TPP, True),
                                ("LOSO, candidate: no gate", math.inf, False)):
        rules[title], fallbacks = leave_one_source_out(dump, gate, growth)
        print(f"{title}: fallback learned without each source: " + "; ".join(
            f"{src} {100 * fb.bias:+.2f}%/decade, growth {100 * fb.growth:.2f}%" for src, fb in fallbacks.items()))
    groups_of = ((f"all {sum(map(len, HALVES.values()))} tables", tuple(HALVES)),
                 (f"unseen groups ({', '.join(UNSEEN)})", UNSEEN))
    for title, results in rules.items():
        for label, groups in groups_of:
            print(f"\n{title}, {label}")
            print(table({f"x|{k.split('|', 1)[1]}": v for k, v in results.items() if k.split("|")[0] in groups}, "x"))
    print("\n" + by_source(rules))
    print(f"\nrescored in {time.perf_counter() - t0:.0f} s (no fit)")
    if sim_dump:
        whole = learned_fallback([observed_cut(k, v) for k, v in dump.items() if v and "backtest" in v], False)
        print(f"\nthe candidate frozen on all the tables: fallback {100 * whole.bias:+.2f}%/decade for every table")
        print(sim_table({k: rescore(k, v, extrapolation.PRIOR, extrapolation.WELL_TRAINED_TPP)
                         for k, v in sim_dump.items() if v}, "the rule as frozen, rescored"))
        print(sim_table({k: rescore(k, v, whole, math.inf) for k, v in sim_dump.items() if v}, "candidate: no gate"))


def report(dumps: list[Path], simulated: Path | None) -> None:
    """`loso_report` of the dumps' splits together (each a `--json` dump of one run)."""
    dump = {k: v for path in dumps for k, v in json.loads(path.read_text()).items()}
    loso_report(dump, json.loads(simulated.read_text()) if simulated else None)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("dumps", type=Path, nargs="+", metavar="JSON", help="'after' --json dumps of every group")
    p.add_argument("--simulated", type=Path, metavar="JSON", help="a --simulate --json dump to rescore")
    args = p.parse_args()
    report(args.dumps, args.simulated)


if __name__ == "__main__":
    main()
