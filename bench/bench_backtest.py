"""How far beyond its data does the tool's law predict? Leave-future-out on 32 public tables.

    python bench/bench_backtest.py                   # "after": the fit as it is now (widened intervals)
    python bench/bench_backtest.py --method before   # the law and its bootstrap interval, unwidened
    python bench/bench_backtest.py --half fresh      # tables added after the held-out half (run once; see HALVES)
    python bench/bench_backtest.py --half fresh2     # tables added last, for the rule frozen after "fresh" (run once)
    python bench/bench_backtest.py --half fresh3     # tables added after fresh2 was run (run once, by the lead)
    python bench/bench_backtest.py --half fresh4     # tables added after fresh3 was run (run once, by the lead)
    python bench/bench_backtest.py --half fresh5     # tables added after fresh4 was run (run once, by the lead)
    python bench/bench_backtest.py --simulate 3      # simulated sweeps whose true law is another form
    python bench/bench_backtest.py --simulate 3 --form median   # the same sweeps, the median of the forms predicting
    python bench/bench_backtest.py --learn           # the fallback rule (extrapolation.PRIOR) from the dev half
    python bench/bench_backtest.py --learn --form median   # the median of the forms' floor (combined.MEDIAN_FLOOR)
    python bench/bench_backtest.py --spread FILE     # extrapolation.BIAS_SPREAD from a --json dump's dev half
    python bench/bench_backtest.py --loso DEV.json HELD.json ... [--simulated SIM.json]   # leave one source out
    python bench/bench_backtest.py --form kaplan --half dev   # one law form, as `scaling fit --form kaplan` predicts
    python bench/bench_backtest.py --form all --half dev      # every form, and two rules choosing or combining them
    python bench/bench_backtest.py --form median --half dev   # the median of the forms, as `scaling fit --form median`

`--loso` reads the `--json` dumps of every group (and of `--simulate`) and predicts each split again with
no fit: the fallback bias relearned on the other sources' splits for each source in turn
(bench_backtest_loso.py, which also runs on its own).

`--json FILE` keeps every split's predictions, and for "after" what any rule beyond the data needs
(each run's observed loss, its distance, the backtest's law, the fitted law and its bootstrap
interval, the backtest itself), so that "before" and another rule can be read from one run.

For each table (bench/data/backtest, provenance in its README) and each extrapolation factor f in
3, 10, 30, the runs are cut as `scaling.laws.checks.backtest.future_split` cuts them (fit on the runs whose
budget is at most C_top / f, predict the top budget's runs; by compute band where a table has no
budgets), the default fit (`analysis.fit_data`, every option at its default but the bootstrap:
BOOTSTRAP resamples, to keep the bench to a few minutes) is made on the runs below the cut, and
each top run's loss is predicted with its 95% interval. Printed per half and per f: the median over
tables of each table's median absolute error, the worst table's, the pooled coverage of the
intervals and their median half-width (relative to the prediction).

The tables were split into a development half and a held-out half (HALVES) before any rule was
tuned; rules were tuned on "dev" only, and "held-out" was run once with the rule fixed. Having been
seen, "held-out" then became development data too: the interval rule was retuned on both, and a
third group, "fresh" (tables found afterwards, fixed in HALVES before any was evaluated), was run
once with the retuned rule. A fourth group, "fresh2" (tables from sources no rule had seen, committed
with HALVES before any fit was made on them), is for one run of the rule frozen after that.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scaling.laws import analysis  # noqa: E402
from scaling.laws.checks import backtest, combined, cross_forms, extrapolation  # noqa: E402
from scaling.laws.fitting import fit as fitting  # noqa: E402
from scaling.laws.fitting import readers  # noqa: E402
from scaling.laws.forms import catalog  # noqa: E402
from scaling.laws.forms.fixed_e import FROM_TABLE  # noqa: E402

DATA = Path(__file__).resolve().parent / "data" / "backtest"
FACTORS = (3.0, 10.0, 30.0)
BOOTSTRAP = 200
# Fixed before tuning: each source's tables spread over both halves (Porian et al.'s RefinedWeb and
# OpenWebText2 configurations alternate; Marin's three corpora are split 1 / 2).
HALVES = {
    "dev": ("chinchilla", "marin_dclm", "misfitting",
            "porian_rw_0_longwarmup_kaplandecay_base_kaplan_train",
            "porian_rw_2_shortwarmup_kaplandecay_base_standard_val",
            "porian_rw_4_shortwarmup_constdecay_tuned_standard_val",
            "porian_owt2_1_longwarmup_kaplandecay_base_standard_val",
            "porian_owt2_3_shortwarmup_chinchilladecay_base_standard_val"),
    "held-out": ("llama3", "marin_nemotron", "marin_comma", "datablations_le4epochs",
                 "porian_rw_1_longwarmup_kaplandecay_base_standard_val",
                 "porian_rw_3_shortwarmup_chinchilladecay_base_standard_val",
                 "porian_owt2_0_longwarmup_kaplandecay_base_kaplan_train",
                 "porian_owt2_2_shortwarmup_kaplandecay_base_standard_val",
                 "porian_owt2_4_shortwarmup_constdecay_tuned_standard_val"),
    # Added after "held-out" had been run once and the rule then retuned on it (with "dev"): tables
    # no rule had seen, fixed here before anything was evaluated on them, run once.
    "fresh": ("gadre_c4", "gadre_rpj", "gadre_rw", "steplaw_dense"),
    # Added after "fresh" had been run: one table per source, none of them a source already above,
    # committed with this line before anything was fitted on them; for one run of the frozen rule.
    "fresh2": ("olmo_ladder", "gemstones_cooldown", "xlstm_llama_ctx8192"),
    # Added after "fresh2" had been run: sources none of the groups above use, committed with this
    # line before anything was fitted on them; for one run of the rule, by the lead only.
    "fresh3": ("marin_optsweep_adamw", "marin_optsweep_muon", "oellm_dense", "pile_scaling_neox"),
    # Added after "fresh3" had been run: sources none of the groups above use, committed with this
    # line before anything was fitted on them; for one run of the rule, by the lead only.
    "fresh4": ("marin_moe_lrsweep", "olmo_core_gdn_ladder"),
    # Added after "fresh4" had been run: sources none of the groups above use, committed with this
    # line before anything was fitted on them; for one run of the rule, by the lead only.
    "fresh5": ("olmo_amberish_ladder", "olmoe_ladder_moe_a0"),
}


def load(name: str):
    """A table's points, with its budgets where it has them."""
    frame = pd.read_csv(DATA / f"{name}.csv")
    budget = "budget" if "budget" in frame.columns else None
    return readers.from_frame(frame, source=name, n_col="N", d_col="D", loss_col="loss", budget_col=budget)


def predict_split(data, factor: float, method: str, bootstrap: int = BOOTSTRAP, form: str | None = None) -> dict | None:
    """The fit below the cut at `factor` and its predictions of the top budget's runs (`form`
    "median": the median of the forms, the fit's default; None or "chinchilla": the Chinchilla-form law's)."""
    train, test, _ = backtest.future_split(data.compute, data.budgets, factor)
    sub = data.take(train)
    if backtest.too_small(sub, np.arange(len(sub))):
        return None
    # The forms beside it change none of its predictions: left out here (`predict_form` runs each).
    fit = analysis.fit_data(sub, bootstrap=bootstrap, seed=0, backtest=method == "after", forms=False,
                            form=form or "chinchilla")
    rows = []
    for i in test:
        n, d, obs = float(data.n[i]), float(data.d[i]), float(data.loss[i])
        if method == "after":
            p = fit.predict(n, d)
            center, (lo, hi) = p.loss, p.interval
        else:
            center, (lo, hi) = float(fit.law.loss(n, d)), fit.loss_interval(n, d)
        row = _row(center, lo, hi, obs)
        if fit.backtest is not None:    # what any rule beyond the data needs (`rescore`): no refit
            boot = replace(fit, backtest=None).loss_interval(n, d)      # "before": the bootstrap's, unwidened
            row.update(far=float(fit.beyond(n, d)), law=float((fit.backtest.law or fit.law).loss(n, d)),
                       fitted=float(fit.law.loss(n, d)), boot=None if boot is None else [float(v) for v in boot])
        if fit.median is not None and fit.forms is not None:     # each member's prediction, for other rules
            row["members"] = {e.name: float(e.predict(n, d, fit.beyond(n, d), level=0.95, noise=False)[0])
                              for e in fit.forms.entries if e.name in fit.median.members}
        rows.append(row)
    out = {"rows": rows, "verdict": fit.verdict, "E": fit.law.E, "inner": _inner(fit.backtest)}
    if fit.backtest is not None:
        out["backtest"] = fit.backtest.to_json()
    if fit.median is not None:
        out["median"] = fit.median.to_json()
        out["members"] = [{k: v for k, v in e.to_json().items() if k not in ("samples", "sample_names")}
                          for e in fit.forms.entries if e.name in fit.median.members]
    return out


def as_default(split: dict | None) -> dict | None:
    """A split of `--form median` as the default fit predicts it: the same fit's backtest law, moved
    and widened by its rule (`LawFit.predict` beyond the data without --form), so that one run gives
    both predictors on the same fits."""
    if not split or "backtest" not in split:
        return None
    rule = extrapolation.Extrapolation.from_json(split["backtest"]["extrapolation"])
    return {"rows": [_row(*(float(v) for v in rule.widen(r["law"], r["far"])), r["observed"]) for r in split["rows"]]}


def _row(center: float, lo: float, hi: float, obs: float) -> dict:
    """One predicted run as the tables count it: its error, whether its interval holds the loss, its half-width."""
    return {"error": (center - obs) / obs, "covered": bool(lo <= obs <= hi), "half_width": (hi - lo) / 2 / center,
            "center": center, "lo": lo, "hi": hi, "observed": obs}


def _inner(check) -> float | None:
    """The median error (the refit's own) at the farthest cut of a fit's own backtest: what a rule
    choosing the form from the runs below the split can see."""
    cut = None if check is None else check.farthest
    return None if cut is None else float(np.median(np.abs(cut.raw_errors or cut.errors)))


def predict_form(data, factor: float, name: str, bootstrap: int = BOOTSTRAP) -> dict | None:
    """As `predict_split`, for a law form other than the Chinchilla fit: the form fitted below the
    cut, bootstrapped and backtested as `scaling fit --form NAME` does (`cross_forms.fitted_entry`),
    predicts the top budget's runs with its prediction interval (`FormEntry.predict`). fixed-E pins
    E at the whole table's Chinchilla fit: an oracle (that E saw the runs it predicts)."""
    train, test, _ = backtest.future_split(data.compute, data.budgets, factor)
    sub = data.take(train)
    if backtest.too_small(sub, np.arange(len(sub))):
        return None
    E = fitting.fit_law(data.n, data.d, data.loss).law.E if name == "fixed-E" else None
    form = catalog.get(name, E=E, source=FROM_TABLE)
    entry = cross_forms.fitted_entry(form, cross_forms.trained_base(sub), resamples=bootstrap, seed=0,
                                     prior=extrapolation.fallback(backtest.median_tpp(sub, np.arange(len(sub)))))
    if entry.params is None:
        return None
    top = float(sub.compute.max())
    rows = []
    for i in test:
        far = extrapolation.distance(float(data.compute[i]), top)
        center, lo, hi = (float(v) for v in entry.predict(data.n[i], data.d[i], far, level=0.95, noise=True))
        rows.append(_row(center, lo, hi, float(data.loss[i])))
    cut = entry.farthest
    return {"rows": rows, "inner": None if cut is None else cut.median_abs_error}


def run(method: str, halves, form: str = "chinchilla", bootstrap: int = BOOTSTRAP) -> dict:
    results: dict = {}
    for half in halves:
        for name in HALVES[half]:
            data = load(name)
            for f in FACTORS:
                t0 = time.perf_counter()
                out = (predict_split(data, f, method, bootstrap, form) if form in ("chinchilla", combined.NAME)
                       else predict_form(data, f, form, bootstrap))
                if out is not None:
                    out["seconds"] = time.perf_counter() - t0
                results[f"{half}|{name}|{f:g}"] = out
                print(f"  {half} {name} {f:g}x: " + ("too few runs below the cut" if out is None else
                      f"median error {100 * np.median([abs(r['error']) for r in out['rows']]):.2f}%, "
                      f"covered {sum(r['covered'] for r in out['rows'])}/{len(out['rows'])}"), file=sys.stderr)
    return results


def table(results: dict, half: str) -> str:
    """The issue's table for one half: per factor, over the tables that reach it."""
    lines = [f"| {half} | " + " | ".join(f"{f:g}x" for f in FACTORS) + " |",
             "| --- | " + " | ".join("---" for _ in FACTORS) + " |"]
    cols: dict = {k: [] for k in ("tables", "median", "worst", "coverage", "half", "ratio", "high")}
    for f in FACTORS:
        splits = [v for k, v in results.items() if k.startswith(half + "|") and k.endswith(f"|{f:g}") and v]
        if not splits:                  # no table of the half reaches the cut (fresh5: 3x only)
            for k, col in cols.items():
                col.append("0" if k == "tables" else "-")
            continue
        meds = [np.median([abs(r["error"]) for r in s["rows"]]) for s in splits]
        rows = [r for s in splits for r in s["rows"]]
        med_half = np.median([r["half_width"] for r in rows])
        cols["tables"].append(f"{len(splits)}")
        cols["median"].append(f"{100 * np.median(meds):.2f}%")
        cols["worst"].append(f"{100 * max(meds):.1f}%")
        cols["coverage"].append(f"{100 * np.mean([r['covered'] for r in rows]):.0f}% of {len(rows)}")
        cols["half"].append(f"{100 * med_half:.2f}%")
        cols["ratio"].append(f"{med_half / np.median([abs(r['error']) for r in rows]):.2f}")
        cols["high"].append(f"{sum(np.median([r['error'] for r in s['rows']]) > 0 for s in splits)} of {len(splits)}")
    names = {"tables": "tables reaching the cut", "median": "median over tables of the median abs. error",
             "worst": "worst table", "coverage": "runs inside the 95% interval (pooled)",
             "half": "median half-width of that interval", "ratio": "half-width / median abs. error (pooled)",
             "high": "tables over-predicted (median error > 0)"}
    lines += [f"| {names[k]} | " + " | ".join(v) + " |" for k, v in cols.items()]
    return "\n".join(lines)


def learn() -> extrapolation.Extrapolation:
    """The fallback rule: the dev half's tables' own cuts, pooled (no prior)."""
    cuts = []
    for name in HALVES["dev"]:
        data = load(name)
        full = analysis.fitting.fit_law(data.n, data.d, data.loss)
        cuts += [backtest.cut_errors(data, f, delta=full.delta, fixed_E=None, starts=full.end_points)
                 for f in backtest.FACTORS]
    return extrapolation.learn_extrapolation(cuts, weight=0.0, floor=0.0)


def learn_median() -> extrapolation.Extrapolation:
    """combined.MEDIAN_FLOOR: the growth of the median of the forms' own cut errors on the dev half's
    full tables, pooled (no prior, no floor, no bias: the members' biases are in its predictions)."""
    cuts = []
    for name in HALVES["dev"]:
        fit = analysis.fit_data(load(name), bootstrap=20, seed=0, form=combined.NAME)
        cuts += list(fit.median.cuts) if fit.median is not None else []
    return extrapolation.learn_extrapolation(cuts, prior=combined.NO_BIAS, weight=0.0, floor=0.0, calibrate=False,
                                             bias=0.0)


def spread(dump: dict) -> str:
    """extrapolation.BIAS_SPREAD: how far the dev half's tables' own biases (each outer split's,
    `extrapolation.measured_bias`) lie from the fallback's, less what their own variances explain."""
    measured = [extrapolation.measured_bias(extrapolation.distinct_cuts(backtest.Cut.from_json(c)
                                                              for c in split["backtest"]["cuts"]))
                for key, split in dump.items() if key.startswith("dev|") and split]
    own, var = np.array([m for m in measured if m is not None]).T
    rms = float(np.sqrt(np.mean((own - extrapolation.PRIOR.bias) ** 2)))
    noise = float(np.sqrt(np.mean(var)))
    return (f"{own.size} dev splits: rms {100 * rms:.2f}% per decade about the fallback, their own standard errors "
            f"{100 * noise:.2f}%: BIAS_SPREAD = {100 * np.sqrt(max(rms ** 2 - noise ** 2, 0.0)):.2f}%")


# Simulated IsoFLOP sweeps whose true law is not the fitted form (and one that is), for the
# coverage of the intervals beyond the data: 10 budgets from 1e17 to 5.1e19 FLOPs (x2), 7 sizes
# each, 0.5% log-normal scatter; cut and predicted as the public tables are.
TRUTH = dict(E=1.8, A=480.0, B=2100.0, alpha=0.34, beta=0.37)
SIM_BUDGETS = 1e17 * 2.0 ** np.arange(10)
SIM_SCATTER = 0.005
SIM_BOOTSTRAP = 20     # beyond the data the interval is the backtest's (no bootstrap in it): 20 keep it quick


def true_loss(kind: str, n, d):
    t = TRUTH
    base = t["A"] / n ** t["alpha"]
    if kind == "chinchilla":                       # the fitted form: a control
        return t["E"] + base + t["B"] / d ** t["beta"]
    if kind == "broken":                           # the data term steepens past 2e9 tokens
        return t["E"] + base + t["B"] / d ** t["beta"] * (1 + d / 2e9) ** -0.1
    if kind == "n_dependent_beta":                 # Farseer-like: beta grows with N
        return t["E"] + base + t["B"] / d ** (t["beta"] + 0.02 * np.log(n / 1e8))
    if kind == "shifted_E":                        # an extra term fading with compute: E looks higher small
        return t["E"] + base + t["B"] / d ** t["beta"] + 0.3 * (6 * n * d / 1e17) ** -0.15
    raise ValueError(kind)


def simulate(kind: str, seed: int):
    rng = np.random.default_rng(seed)
    rows = []
    for c in SIM_BUDGETS:
        n_opt = 0.09 * c ** 0.5                    # about 20 tokens per parameter at the centre
        for n in n_opt * np.geomspace(0.25, 4.0, 7):
            d = c / (6 * n)
            rows.append((n, d, true_loss(kind, n, d) * np.exp(SIM_SCATTER * rng.standard_normal()), c))
    frame = pd.DataFrame(rows, columns=["N", "D", "loss", "budget"])
    return readers.from_frame(frame, source=f"{kind} seed {seed}", n_col="N", d_col="D", loss_col="loss",
                              budget_col="budget")


def simulations(method: str, seeds: int, dump: dict | None = None, form: str | None = None) -> str:
    """Coverage and errors of the intervals at 3x, 10x, 30x over `seeds` sweeps of each truth
    (each split's predictions kept in `dump` where given; `form` "median": the median of the forms')."""
    splits = {f"{kind}|{seed}|{f:g}": predict_split(simulate(kind, seed), f, method, SIM_BOOTSTRAP, form)
              for kind in SIM_KINDS for f in FACTORS for seed in range(seeds)}
    if dump is not None:
        dump.update(splits)
    return sim_table(splits, f"{seeds} seeds each, {method}" + (f", {form}" if form else ""))


SIM_KINDS = ("chinchilla", "broken", "n_dependent_beta", "shifted_E")


def sim_table(splits: dict, title: str) -> str:
    """The simulations' table from their splits (keys "kind|seed|factor"), fitted or rescored."""
    lines = [f"simulated sweeps ({title}): coverage of the 95% intervals / median abs. error",
             "| truth | " + " | ".join(f"{f:g}x" for f in FACTORS) + " |", "| --- |" + " --- |" * len(FACTORS)]
    pooled: dict = {f: [] for f in FACTORS}
    for kind in SIM_KINDS:
        cells = []
        for f in FACTORS:
            rows = [r for k, split in splits.items() if split and k.startswith(kind + "|") and k.endswith(f"|{f:g}")
                    for r in split["rows"]]
            pooled[f] += rows
            cells.append(f"{100 * np.mean([r['covered'] for r in rows]):.0f}% of {len(rows)} / "
                         f"{100 * np.median([abs(r['error']) for r in rows]):.2f}%")
        lines.append(f"| {kind} | " + " | ".join(cells) + " |")
    lines.append("| pooled | " + " | ".join(f"{100 * np.mean([r['covered'] for r in pooled[f]]):.0f}%"
                                            for f in FACTORS) + " |")
    return "\n".join(lines)


# The rules tried on the development half, fixed before it was run: the forms that predict (fixed-E
# is an oracle, not a predictor), chosen per split by the smallest error at the farthest cut of the
# form's own backtest on the runs below the split ("inner choice"), or combined by the geometric
# median of their predictions with the median of their log half-widths widened by their spread.
PREDICTORS = ("chinchilla", "tied", "kaplan", "farseer")


def _inner_choice(splits: dict) -> dict:
    fitted = {k: v for k, v in splits.items() if k in PREDICTORS and v is not None}
    return fitted[min(fitted, key=lambda k: (fitted[k]["inner"] is None, fitted[k]["inner"] or 0.0))]


def _median_of_forms(splits: dict) -> dict:
    fitted = [v for k, v in splits.items() if k in PREDICTORS and v is not None]
    rows = []
    for j, first in enumerate(fitted[0]["rows"]):
        centers = np.log([s["rows"][j]["center"] for s in fitted])
        halves = [np.log(s["rows"][j]["hi"] / s["rows"][j]["center"]) for s in fitted]
        center = float(np.exp(np.median(centers)))
        half = float(np.hypot(np.median(halves), np.std(centers)))
        rows.append(_row(center, center * np.exp(-half), center * np.exp(half), first["observed"]))
    return {"rows": rows}


def forms_and_rules(halves, json_path) -> None:
    """Every form's table, then the two rules' (see PREDICTORS)."""
    t0 = time.perf_counter()
    by_form = {name: run("after", halves, name) for name in catalog.FORMS}
    keys = by_form["chinchilla"].keys()
    rules = {"inner choice": {}, "median of forms": {}}
    for key in keys:
        splits = {name: by_form[name][key] for name in catalog.FORMS}
        ok = splits["chinchilla"] is not None
        rules["inner choice"][key] = _inner_choice(splits) if ok else None
        rules["median of forms"][key] = _median_of_forms(splits) if ok else None
    print(f"every form and rule, {BOOTSTRAP} bootstrap resamples; {time.perf_counter() - t0:.0f} s")
    for half in halves:
        for name, results in {**by_form, **rules}.items():
            print(f"\n{name}" + (" (oracle: E from the whole table)" if name == "fixed-E" else ""))
            print(table(results, half))
    if json_path:
        json_path.write_text(json.dumps({"forms": by_form, "rules": rules}, indent=1))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--method", choices=("before", "after"), default="after")
    p.add_argument("--half", default="both",
                   choices=("dev", "held-out", "fresh", "fresh2", "fresh3", "fresh4", "fresh5", "both"),
                   help='"both": dev and held-out (fresh, fresh2, fresh3, fresh4, fresh5: each on its own, once)')
    p.add_argument("--learn", action="store_true", help="print the fallback rule learned on the dev half")
    p.add_argument("--spread", type=Path, metavar="JSON", help="print BIAS_SPREAD from an 'after' --json dump")
    p.add_argument("--json", type=Path, help="write every split's predictions here")
    p.add_argument("--loso", type=Path, nargs="+", metavar="JSON",
                   help="leave one source out: rescore 'after' --json dumps of every group (no fit)")
    p.add_argument("--simulated", type=Path, metavar="JSON", help="with --loso: a --simulate --json dump to rescore")
    p.add_argument("--bootstrap", type=int, default=BOOTSTRAP,
                   help=f"resamples (default {BOOTSTRAP}; the median of the forms' predictions and intervals beyond "
                        "the data do not use them: fewer give the same figures sooner)")
    p.add_argument("--simulate", type=int, metavar="SEEDS", help="simulated sweeps instead of the tables")
    p.add_argument("--form", choices=(*catalog.FORMS, combined.NAME, "all"), default="chinchilla",
                   help="the law form that predicts (chinchilla: the default fit; median: the median of the forms "
                        "as the fit predicts with it); all: every form and the rules")
    args = p.parse_args()
    if args.learn:
        print(learn_median() if args.form == combined.NAME else learn())
        return
    if args.loso:
        from bench_backtest_loso import report  # beside this file; it imports this module's tables
        report(args.loso, args.simulated)
        return
    if args.spread:
        print(spread(json.loads(args.spread.read_text())))
        return
    if args.simulate:
        dump: dict = {}
        print(simulations(args.method, args.simulate, dump, args.form if args.form == combined.NAME else None))
        if args.json:
            args.json.write_text(json.dumps(dump, indent=1))
        return
    halves = ("dev", "held-out") if args.half == "both" else (args.half,)
    if args.form == "all":
        forms_and_rules(halves, args.json)
        return
    t0 = time.perf_counter()
    results = run(args.method, halves, args.form, args.bootstrap)
    print(f"method: {args.method}; {args.form} with {args.bootstrap} bootstrap resamples; "
          f"{time.perf_counter() - t0:.0f} s")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    for half in halves:
        print(table(results, half))
    if args.form == combined.NAME and args.method == "after":
        print("the default fit (chinchilla), read from the same fits:")
        for half in halves:
            print(table({k: as_default(v) for k, v in results.items()}, half))


if __name__ == "__main__":
    main()
