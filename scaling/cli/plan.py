"""`scaling compare` and `scaling plan`: your fit beside the published laws, and what to train.

    scaling compare FIT_JSON [--json]
        alpha, beta, a, b and tokens per parameter of your fit against Kaplan, Chinchilla,
        Besiroglu and the 20-tokens rule, each published value marked in or OUT of your 95%
        interval; the caveats; and Approaches 1-3 side by side when fit.json has "approaches".

    scaling plan --compute C [C ...] [--fit FIT_JSON | --law chinchilla|besiroglu|kaplan] [--json]
        N_opt, D_opt, tokens per parameter and predicted loss at each budget, beside the
        20-tokens-per-parameter rule and Kaplan's allocation (each with the loss the law
        predicts for it). With neither --fit nor --law the published Chinchilla law is used,
        and the output says so. --law kaplan has no L(N, D): Kaplan's allocation only.

Thin layer over scaling.laws.allocation and scaling.laws.compare. Numbers are parsed here, not by
argparse, so a bad one is a UsageError (exit 2) that names it.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from scaling.errors import UsageError
from scaling.laws import allocation, compare
from scaling.laws.law import Law
from scaling.laws.references import REFERENCES, reference

DEFAULT_LAW = "chinchilla"


def register(subparsers) -> None:
    cmp = subparsers.add_parser(
        "compare", help="your fit against Kaplan, Chinchilla and Besiroglu",
        description="Exponents, allocation exponents and tokens per parameter of a fit.json "
                    "beside the published laws, each published value marked in or OUT of your "
                    "95%% interval. E, A, B are not compared: they depend on tokenizer and data.")
    cmp.add_argument("fit", metavar="FIT_JSON", type=Path, help="a fit.json written by `scaling fit`")
    cmp.add_argument("--json", action="store_true", help="print JSON instead of a table")
    cmp.set_defaults(func=cmd_compare)

    laws = ", ".join(REFERENCES)
    plan = subparsers.add_parser(
        "plan", help="compute-optimal N and D for a budget, beside the 20-tokens rule and Kaplan",
        description="For each compute budget C (FLOPs, C = 6 N D): the law's compute-optimal "
                    "N, D, tokens per parameter and predicted loss, beside D = 20 N and Kaplan "
                    "et al.'s N = 1.3e9 (C / 8.64e19)^0.73. Uses the published Chinchilla law "
                    "unless --fit or --law is given.")
    plan.add_argument("--compute", nargs="+", required=True, metavar="C",
                      help="training compute in FLOPs; several allowed (e.g. --compute 1e18 1e21 1e23)")
    plan.add_argument("--fit", default=None, metavar="FIT_JSON", type=Path,
                      help="your own fit.json")
    plan.add_argument("--law", default=None,
                      help=f"a published law: {laws} (default {DEFAULT_LAW} when --fit is not given)")
    plan.add_argument("--json", action="store_true", help="print JSON instead of a table")
    plan.set_defaults(func=cmd_plan)


# ----------------------------------------------------------------------------- loading

def load_fit(path: Path) -> tuple[Law, dict]:
    """(Law, the whole fit.json dict); imported late so `plan --law` does not load the fitter."""
    from scaling.laws.results import load_fit as results_load_fit

    return results_load_fit(path)


def parse_computes(values: list[str]) -> list[float]:
    out = []
    for text in values:
        try:
            c = float(text)
        except ValueError:
            raise UsageError(f"--compute {text!r} is not a number of FLOPs (e.g. 1e21)") from None
        if not math.isfinite(c) or c <= 0:
            raise UsageError(f"--compute {text!r}: compute must be positive and finite")
        out.append(c)
    return out


def _choose_law(args) -> tuple[Law | None, str, dict | None]:
    """(law or None for Kaplan, a label saying where it came from, fit.json dict or None)."""
    if args.fit is not None and args.law is not None:
        raise UsageError("give --fit or --law, not both")
    if args.fit is not None:
        law, data = load_fit(args.fit)
        return law, f"your fit {args.fit}", data
    key = args.law or DEFAULT_LAW
    ref = reference(key)  # UsageError naming the known laws
    label = f"{key} ({ref.citation})"
    if args.law is None:
        label += " [default; pass --fit FIT_JSON for your own law]"
    return ref.law, label, None


# ----------------------------------------------------------------------------- commands

def cmd_compare(args) -> int:
    law, data = load_fit(args.fit)
    c = data.get("reference_compute")
    c = float(c) if c is not None else None
    rows = compare.compare(law, data.get("ci"), c)
    approach_rows, warnings = ([], [])
    if data.get("approaches"):
        approach_rows, warnings = compare.compare_approaches(data["approaches"], law, data.get("ci"))
    if args.json:
        print(json.dumps({"fit": str(args.fit), "reference_compute": c, "rows": rows,
                          "caveats": list(compare.CAVEATS), "approaches": approach_rows,
                          "warnings": warnings}, indent=2, default=_jsonable))
        return 0
    print(f"fit: {args.fit}  ({_data_line(data)})")
    print(compare.format_table(rows, c))
    print("in / OUT: the published value lies inside / outside your 95% interval")
    if approach_rows:
        print("\nallocation exponent a (N_opt ~ C^a) by approach:")
        print(compare.format_approaches(approach_rows))
        for key, entry in sorted((data.get("approaches") or {}).items()):
            if isinstance(entry, dict) and entry.get("a") is None:  # say why an approach gave no a
                print(f"{compare.APPROACH_NAMES.get(key, key)}: no estimate: {entry.get('reason')}")
    for w in warnings:
        print(f"warning: {w}")
    print("\ncaveats:")
    for text in compare.CAVEATS:
        print(f"- {text}")
    return 0


def cmd_plan(args) -> int:
    computes = parse_computes(args.compute)
    law, label, data = _choose_law(args)
    plans = [allocation.compare_allocations(law, c) for c in computes]
    notes = []
    if law is None:
        notes.append("Kaplan et al. publish no parametric L(N, D) comparable to these: "
                     "the loss is not predicted.")
    c_range = ((data or {}).get("data") or {}).get("c_range")
    if c_range:
        top = float(c_range[1])
        for c in computes:
            if c > top:
                notes.append(f"C = {c:.3g} is {math.log10(c / top):.1f} orders of magnitude above "
                             f"the largest run in the fit ({top:.3g} FLOPs): an extrapolation.")
    if args.json:
        print(json.dumps({"law": label, "plans": [
            {"compute": c, "allocations": [a.to_dict() for a in rows]}
            for c, rows in zip(computes, plans)], "notes": notes}, indent=2))
        return 0
    print(f"law: {label}")
    header = ("C (FLOPs)", "allocation", "N (params)", "D (tokens)", "D/N", "loss")
    lines = [header]
    for rows in plans:
        for a in rows:
            lines.append((f"{a.compute:.3g}", "law optimum" if a.method == "law" else a.method, f"{a.n:.4g}", f"{a.d:.4g}",
                          f"{a.tokens_per_param:.3g}", "-" if a.loss is None else f"{a.loss:.4f}"))
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    for j, line in enumerate(lines):
        print("  ".join(cell.ljust(w) if i in (0, 1) else cell.rjust(w)
                        for i, (cell, w) in enumerate(zip(line, widths))).rstrip())
        if j == 0:
            print("  ".join("-" * w for w in widths))
    if law is not None:
        print("loss: what the law predicts for each allocation (the law's own optimum is lowest)")
    print("kaplan: N = 1.3e9 (C / 8.64e19 FLOP)^0.73 non-embedding params (Kaplan et al. 2020, "
          "Table 6), D = C / (6 N)")
    for note in notes:
        print(f"note: {note}")
    return 0


def _data_line(data: dict) -> str:
    d = data.get("data") or {}
    parts = []
    if d.get("n_points") is not None:
        parts.append(f"{d['n_points']} runs")
    if d.get("source"):
        parts.append(f"from {d['source']}")
    if d.get("param_convention"):
        parts.append(f"N counted as {d['param_convention']}")
    return ", ".join(parts) or "no data description"


def _jsonable(obj):
    if isinstance(obj, tuple):
        return list(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")
