"""`scaling compare` and `scaling plan`: your fit beside the published laws, and what to train.

    scaling compare FIT [--json]
        alpha, beta, a, b and tokens per parameter of your fit against Kaplan, Chinchilla,
        Besiroglu and the 20-tokens rule, each published value marked in or OUT of your 95%
        interval; the caveats; and Approaches 1-3 side by side when fit.json has "approaches".

    scaling plan --compute C [C ...] [--fit FIT | --law chinchilla|besiroglu|kaplan] [--json]
        N_opt, D_opt, tokens per parameter and predicted loss at each budget, beside the
        20-tokens-per-parameter rule and Kaplan's allocation (each with the loss the law
        predicts for it). With neither --fit nor --law the published Chinchilla law is used,
        and the output says so. --law kaplan has no L(N, D): Kaplan's allocation only.

Thin layer over scaling.laws.optimal.allocation and scaling.laws.optimal.compare. Numbers are parsed here, not by
argparse, so a bad one is a UsageError (exit 2) that names it.
"""

from __future__ import annotations

import argparse
import json
import math
import re
from pathlib import Path
from typing import TYPE_CHECKING

from scaling.cli.law_choice import FIT, FIT_HELP, add_fit_option
from scaling.errors import UsageError
from scaling.formats import json_safe, plain_table, positive
from scaling.laws.checks.backtest import UNDERTRAINED_TPP
from scaling.laws.forms.references import REFERENCES
from scaling.laws.optimal import allocation, compare
from scaling.laws.results import summary
from scaling.laws.results.fit_file import FILENAME, load_fit
from scaling.laws.results.law_choice import DEFAULT_LAW, LawChoice, choose_law
from scaling.laws.results.lawfit import LawFit
from scaling.runs.store import run_dirs

if TYPE_CHECKING:
    from scaling.laws.repeated.section import RepeatedPlan


def register(subparsers: argparse._SubParsersAction) -> None:
    cmp = subparsers.add_parser(
        "compare", help="your fit against Kaplan, Chinchilla and Besiroglu",
        description="Exponents, allocation exponents and tokens per parameter of a fit "
                    "beside the published laws, each published value marked in or OUT of your "
                    "95% interval. E, A, B are not compared: they depend on tokenizer and data.",
        epilog="examples:\n"
               "  scaling compare fits/tiny          # each exponent in or OUT of your interval\n"
               "  scaling compare fits/tiny --json   # the same, as JSON")
    cmp.add_argument("fit", metavar=FIT, type=Path, help=FIT_HELP)
    cmp.add_argument("--json", action="store_true", help="print JSON instead of a table")
    cmp.set_defaults(func=cmd_compare)

    laws = ", ".join(REFERENCES)
    plan = subparsers.add_parser(
        "plan", help="compute-optimal N, D for budgets C, beside D = 20 N and Kaplan",
        description="For each compute budget C (FLOPs, C = 6 N D): the law's compute-optimal "
                    "N, D, tokens per parameter and predicted loss, beside D = 20 N and Kaplan "
                    "et al.'s N = 1.3e9 (C / 8.64e19)^0.73. Uses the published Chinchilla law "
                    "unless --fit or --law is given.",
        epilog="examples:\n"
               "  scaling plan --fit fits/tiny --compute 6e12 1e13   # your fit's plan, with 95% intervals\n"
               "  scaling plan --compute 1e21 1e23 --law besiroglu  # a published law's")
    add_compute_option(plan, "training compute in FLOPs; several allowed (e.g. --compute 1e18 1e21 1e23)",
                       required=True)
    add_fit_option(plan, "your own fit (a fit folder or its fit.json)")
    plan.add_argument("--law", default=None,
                      help=f"a published law: {laws} (default {DEFAULT_LAW} when --fit is not given)")
    plan.add_argument("--unique-tokens", metavar="U", default=None,
                      help="only U unique tokens of data: the best N and epochs under the data-constrained law "
                           "(Muennighoff et al. 2023), and the loss that costs against unlimited data")
    plan.add_argument("--json", action="store_true", help="print JSON instead of a table")
    plan.set_defaults(func=cmd_plan)


# ----------------------------------------------------------------------------- numbers

# A token that argparse before Python 3.13 takes for an option (it reads only -7 and -.5 as numbers):
# -1e21 would stop at "expected at least one argument" instead of reaching the check that names it.
NEGATIVE_NUMBER = re.compile(r"^-\.?\d")


def add_compute_option(parser: argparse.ArgumentParser, help: str, *, required: bool = False) -> None:
    """--compute C [C ...], text that `parse_computes` checks. The command's parser reads a token
    such as -1e21 as a value (as Python 3.13's argparse does; none of its options looks like a
    number), so a negative budget is refused naming it."""
    parser._negative_number_matcher = NEGATIVE_NUMBER
    parser.add_argument("--compute", nargs="+", required=required, metavar="C", help=help)


def parse_computes(values: list[str]) -> list[float]:
    return [positive(text, "--compute (FLOPs, e.g. 1e21)") for text in values]


# ----------------------------------------------------------------------------- commands

def cmd_compare(args: argparse.Namespace) -> int:
    from scaling.laws.api import compare as compare_fit  # pandas and the fitter: only for this command

    fit = load_fit(not_a_run_store(args.fit))
    rows = compare_fit(fit)
    c = fit.reference_compute
    approach_rows: list = []
    warnings: list[str] = []
    if fit.approaches:
        approach_rows, warnings = compare.compare_approaches(fit.approaches, fit.law, fit.ci)
    if args.json:
        print(json.dumps(json_safe({"fit": str(args.fit), "verdict": _verdict_json(fit), "reference_compute": c,
                                    "compute_measure": fit.law.flops.to_dict(), "rows": rows,
                                    "caveats": list(compare.CAVEATS), "approaches": approach_rows,
                                    "warnings": warnings}), indent=2))
        return 0
    print(f"fit: {args.fit}  ({_data_line(fit)})")
    print("\n".join(summary.verdict_preamble(fit)))
    print(compare.format_table(rows, c, measure=fit.law.flops.name))   # every D/N splits C as the fit counts it
    print("in / OUT: the published value lies inside / outside your 95% interval")
    if approach_rows:
        print("\nallocation exponent a (N_opt ~ C^a) by approach:")
        print(compare.format_approaches(approach_rows))
        for key, entry in sorted((fit.approaches or {}).items()):
            if isinstance(entry, dict) and entry.get("a") is None:  # say why an approach gave no a
                print(f"{compare.APPROACH_NAMES.get(key, key)}: no estimate: {entry.get('reason')}")
    for w in compare.disagreement(warnings):
        print(f"warning: {w}")
    print("\ncaveats:")
    for text in compare.CAVEATS:
        print(f"- {text}")
    return 0


def not_a_run_store(path: Path) -> Path:
    """`path`, unless it is a run store (runs/<sweep>): UsageError naming the fit it likely meant,
    fits/<sweep> (`scaling fit`'s default), instead of "runs/<sweep>/fit.json does not exist"."""
    if path.is_dir() and not (path / FILENAME).exists() and run_dirs(path):
        fit = Path("fits") / path.resolve().name
        made = f"the fit of it is {fit}" if (fit / FILENAME).is_file() else f"fit it first: `scaling fit {path}`"
        raise UsageError(f"{path} is a run store, not a fit: {made}")
    return path


def cmd_plan(args: argparse.Namespace) -> int:
    computes = parse_computes(args.compute)
    choice = choose_law(args.fit, args.law)
    law, fit = choice.law, choice.fit
    if fit is not None and args.unique_tokens is not None and fit.form_entry is not None:
        raise UsageError(f"--unique-tokens needs the Chinchilla form's law; this fit predicts with the {fit.form} "
                         "form (refit without --form)")
    if law is not None:
        allocation.check_allocatable(law, choice.name)
    if fit is not None:      # the law that predicts plans: `LawFit.plan`, its optimum along the compute curve
        fitted = [fit.plan(c) for c in computes]
        plans = [summary.plan_rows(fit, p) for p in fitted]
        intervals = {c: p.intervals for c, p in zip(computes, fitted)}
    else:
        plans = [allocation.compare_allocations(law, c) for c in computes]   # UsageError: an optimum of no model
        intervals = {}
    notes = []
    if law is None:
        notes.append("Kaplan et al. publish no parametric L(N, D) comparable to these: "
                     "the loss is not predicted.")
    notes += _extrapolation_notes(fit, computes)
    repeated = repeated_plan(choice, computes, args.unique_tokens) if args.unique_tokens is not None else None
    if fit is not None and not any(intervals.values()):
        notes.append("no bootstrap samples beside this fit.json (fit.bootstrap.csv): no intervals; "
                     "refit with `scaling fit` to get them")
    if args.json:
        print(json.dumps(json_safe({
            "law": choice.label, "form": None if fit is None else fit.form, "sources": number_sources(choice),
            "verdict": _verdict_json(fit), "compute_measure": None if law is None else law.flops.to_dict(),
            "plans": [{"compute": c, "allocations": [a.to_dict() for a in rows],
                       "intervals": iv.to_dict() if (iv := intervals.get(c)) else None}
                      for c, rows in zip(computes, plans)], "notes": notes,
            **({} if repeated is None else {"data_constrained": repeated.to_json()})}), indent=2))
        return 0
    _print_plan(choice, plans, intervals)
    for note in notes:
        print(f"note: {note}")
    if repeated is not None:
        print("\n" + "\n".join(summary.format_repeated_plan(repeated)))
    return 0


def _extrapolation_notes(fit: LawFit | None, computes: list[float]) -> list[str]:
    """A note for each budget above the largest fitted run: the plan there is an extrapolation."""
    if fit is None or not fit.data.c_range:
        return []
    top = float(fit.data.c_range[1])
    return [f"C = {c:.3g} is {math.log10(c / top):.1f} orders of magnitude above the largest run in the fit "
            f"({top:.3g} FLOPs): an extrapolation." for c in computes if c > top]


def _print_plan(choice: LawChoice, plans: list[list[allocation.Allocation]], intervals: dict) -> None:
    """The plan as a table, each allocation with its intervals, and what the table's losses mean."""
    law, fit = choice.law, choice.fit
    print(f"law: {choice.label}")
    if law is not None:
        print(f"compute: {law.flops.describe()}; every N and D below spends C in that measure")
    if fit is not None:
        print("\n".join(summary.verdict_preamble(fit)))
    header = ["C (FLOPs)", "allocation", "N (params)", "D (tokens)", "D/N", "loss"]
    cells = [summary.allocation_row(a, intervals.get(a.compute)) for rows in plans for a in rows]
    print(plain_table(header, cells, n_left=2))
    if fit is not None and fit.ci is not None and any(intervals.values()):
        print(f"[lo, hi]: {100 * fit.ci.level:g}% bootstrap intervals ({fit.ci.n_resamples} resamples); the loss's "
              f"includes the runs' scatter (residual RMS {fit.residual_rms:.3g})")
    if (sources := number_sources(choice)) is not None:
        print(f"law optimum (N, D): {sources['allocation']}; loss (every row's): {sources['loss']}")
    print("kaplan: N = 1.3e9 (C / 8.64e19 FLOP)^0.73 non-embedding params (Kaplan et al. 2020, "
          "Table 6), D = C / " + ("(6 N)" if law is None or law.flops.is_six_n else "c(N) as above"))


def number_sources(choice: LawChoice) -> dict[str, str] | None:
    """Which law gives which number of the plan, said alike in the table's notes and its JSON: the
    law optimum's N and D ('allocation') and every row's loss ('loss'). For a fit, one law gives
    both: the law that predicts (`LawFit.predictor`), its optimum the minimum of its prediction
    along the compute curve. None for Kaplan's allocation, which has no L(N, D)."""
    law, fit = choice.law, choice.fit
    if law is None:
        return None
    if fit is None:
        return {"allocation": f"{choice.name}'s law, its closed-form optimum", "loss": f"{choice.name}'s L(N, D)"}
    where = ""
    if fit.form_entry is None and fit.median is None and fit.backtest is not None:
        where = (f" (beyond the fitted compute its backtest's law, fitted without the runs under {UNDERTRAINED_TPP:g} "
                 "tokens per parameter and moved by its bias; docs/fitting.md)")
    return {"allocation": f"{fit.predictor}{where}: the lowest loss it predicts along the compute curve",
            "loss": f"{fit.predictor}{where}"}


def repeated_plan(choice: LawChoice, computes: list[float], unique_text: str) -> RepeatedPlan:
    """The plan under the data-constrained law: your fit's R_D* where it has one (runs that repeated
    data), else Muennighoff et al.'s published R_D* and R_N* on your law."""
    from scaling.laws.repeated import plan_repeated
    from scaling.laws.repeated.law import MUENNIGHOFF_2023, RepeatedLaw

    unique = positive(unique_text, "--unique-tokens")
    if choice.law is None:
        raise UsageError("--unique-tokens needs a parametric law (Kaplan's has none): use --fit or another --law")
    repeated = choice.fit.repeated if choice.fit is not None else None
    if repeated is not None and repeated.law.r_d_star is not None:
        return plan_repeated(repeated.law, computes, unique, laws=repeated.laws(),
                             source=f"fitted to the {repeated.n_repeated} runs of your fit that repeat data")
    published = MUENNIGHOFF_2023
    law = RepeatedLaw(choice.law, published.r_d_star, published.r_n_star)
    return plan_repeated(law, computes, unique, source="published by Muennighoff et al. 2023 (C4), not measured on "
                                                       "your data; a fit of runs that repeat data measures yours")


def _verdict_json(fit: LawFit | None) -> dict | None:
    if fit is None or fit.diagnostics is None:
        return None
    return {"verdict": fit.diagnostics.verdict, "reasons": list(fit.diagnostics.reasons)}


def _data_line(fit: LawFit) -> str:
    d = fit.data
    parts = []
    if d.n_points is not None:
        parts.append(f"{d.n_points} runs")
    if d.source:
        parts.append(f"from {d.source}")
    if d.param_convention:
        parts.append(f"N counted as {d.param_convention}")
    parts.append(fit.law.flops.describe())
    return ", ".join(parts)
