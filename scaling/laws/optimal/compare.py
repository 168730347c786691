"""Your fitted law beside the published ones, and your three approaches beside each other.

Pure functions, no I/O: `compare` builds rows, `format_table` lays them out as plain text,
`compare_approaches` checks that Approaches 1, 2 and 3 agree within their intervals.

What is compared: the exponents alpha and beta, the allocation exponents a = beta/(alpha+beta)
(N_opt ~ C^a) and b = alpha/(alpha+beta) (D_opt ~ C^b), and tokens per parameter D_opt/N_opt at
your reference compute and at a larger budget (1e23 FLOPs unless given), every C counted as your
law counts it (`law.flops`: 6ND, or the exact c(N) D of a run store), Kaplan's D = C / c(N) and the
published parametric laws planned under that count too, so that a D/N here is the one `scaling plan`
gives at the same C. E, A and B are not compared (see CAVEATS).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from scaling.formats import plain_table, sci
from scaling.laws.forms.law import Law
from scaling.laws.forms.references import BESIROGLU, CHINCHILLA, KAPLAN
from scaling.laws.optimal.allocation import RULE_TOKENS_PER_PARAM, kaplan_allocation

if TYPE_CHECKING:
    from scaling.laws.results.fit_sections import Intervals
    from scaling.train.compute import FlopsPerToken

LARGE_COMPUTE = 1e23
COMPARED = ("alpha", "beta", "a", "b", "tokens_per_param")

CAVEATS = (
    "E, A and B depend on the tokenizer, the data and how loss is measured (nats per token of "
    "which vocabulary); they are not comparable across setups, so they are not compared here. "
    "The exponents alpha, beta and the allocation exponents a, b are.",
    "Kaplan et al. fit a different form, L(N, D) = [(N_c/N)^(alpha_N/alpha_D) + D_c/D]^alpha_D "
    "(alpha_N = 0.076, alpha_D = 0.095), so it has no alpha, beta in this sense; its row gives "
    "a = 0.73 and the split N = 1.3e9 (C / 8.64e19)^0.73 non-embedding parameters, D = C / c(N) under "
    "your law's count of C (C / (6N) where C = 6ND), as `scaling plan` splits it.",
    f"Chinchilla's row is its parametric (Approach 3) law: a = {CHINCHILLA.parametric_law.a:.3f} from "
    f"alpha = {CHINCHILLA.parametric_law.alpha}, beta = {CHINCHILLA.parametric_law.beta} "
    f"({CHINCHILLA.extra['rounding']}), and a "
    "tokens-per-parameter ratio that grows with C; Hoffmann et al.'s "
    "Approaches 1 and 2 gave a = 0.50 and 0.49, and the 20-tokens-per-parameter rule is its "
    "own row.",
    "Whether a published value is inside your interval is a check of consistency, not a test "
    "of which is right: your interval reflects only your runs' scatter (bootstrap), not "
    "differences of tokenizer, data, schedule or parameter counting.",
)


def _inside(value: float | None, interval: Sequence[float] | None) -> bool | None:
    if value is None or interval is None:
        return None
    lo, hi = interval
    return bool(lo <= value <= hi)


def _bounds(interval: Iterable[Any] | None) -> tuple[float, float] | None:
    """(lo, hi) when both are finite numbers; fit.json writes a NaN bound as null."""
    if interval is None:
        return None
    try:
        lo, hi = (float(v) for v in interval)
    except (TypeError, ValueError):
        return None
    return (lo, hi) if math.isfinite(lo) and math.isfinite(hi) else None


def _law_row(name: str, law: Law, reference_compute: float, large_compute: float, citation: str,
             flops: FlopsPerToken | None = None) -> dict:
    """A law's exponents as published, its D/N at the two budgets planned under `flops` (its own count
    where None)."""
    planned = law if flops is None else replace(law, flops=flops)
    return {
        "name": name, "citation": citation,
        "alpha": law.alpha, "beta": law.beta, "a": law.a, "b": law.b,
        "tokens_per_param": float(planned.tokens_per_param(reference_compute)),
        "tokens_per_param_large": float(planned.tokens_per_param(large_compute)),
    }


def compare(law: Law, ci: Intervals | None, reference_compute: float | None = None,
            large_compute: float = LARGE_COMPUTE) -> list[dict]:
    """Rows: your fit first (with its intervals), then Kaplan, Chinchilla, Besiroglu and the
    20-tokens rule. Each row has alpha, beta, a, b, tokens_per_param (at reference_compute),
    tokens_per_param_large (at `large_compute`) and, for published rows, `inside`: per quantity,
    whether the published value lies inside your 95% interval (None where either is missing).

    `ci`: the fit's bootstrap intervals (a `results.Intervals`) (tokens_per_param's at `reference_compute`), or None.
    With no reference_compute, 1e23 FLOPs is used.
    """
    c = LARGE_COMPUTE if reference_compute is None else float(reference_compute)
    intervals = {k: (ci.interval(k) if ci is not None else None) for k in COMPARED}
    big = float(large_compute)
    mine = _law_row("your fit", law, c, big, "")
    mine["ci"] = {k: (list(v) if v else None) for k, v in intervals.items()}
    mine["ci_level"] = ci.level if ci is not None else None

    kaplan_c, kaplan_large = kaplan_allocation(c, law), kaplan_allocation(big, law)
    published = [
        {"name": "kaplan", "citation": KAPLAN.citation, "alpha": None, "beta": None,
         "a": KAPLAN.a["kaplan"], "b": 1 - KAPLAN.a["kaplan"],
         "tokens_per_param": kaplan_c.tokens_per_param,
         "tokens_per_param_large": kaplan_large.tokens_per_param},
        _law_row("chinchilla", CHINCHILLA.parametric_law, c, big, CHINCHILLA.citation, law.flops),
        _law_row("besiroglu", BESIROGLU.parametric_law, c, big, BESIROGLU.citation, law.flops),
        {"name": f"{RULE_TOKENS_PER_PARAM:g} tokens/param", "citation": CHINCHILLA.citation
         + ", Table 3 (70e9 parameters on 1.4e12 tokens)", "alpha": None, "beta": None,
         "a": 0.5, "b": 0.5, "tokens_per_param": RULE_TOKENS_PER_PARAM,
         "tokens_per_param_large": RULE_TOKENS_PER_PARAM},
    ]
    for row in published:
        row["inside"] = {k: _inside(row[k], intervals[k]) for k in COMPARED}
    return [mine, *published]


def _num(value: float | None, fmt: str) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    return format(value, fmt)


TABLE_FORMATS = {"alpha": ".3f", "beta": ".3f", "a": ".3f", "b": ".3f",
                 "tokens_per_param": ".3g", "tokens_per_param_large": ".3g"}


def table_cells(rows: list[dict], reference_compute: float | None = None, out_mark: str = "OUT",
                large_compute: float = LARGE_COMPUTE, measure: str = "") -> tuple[list[str], list[list[str]]]:
    """(header, cells) of the comparison: your row shows [lo, hi]; published rows mark each value
    'in' or `out_mark` of your interval (nothing where you have no interval for it). measure: what C
    counts (`FlopsPerToken.name`), named in the D/N columns' headers where given."""
    c = LARGE_COMPUTE if reference_compute is None else float(reference_compute)
    unit = f" ({measure})" if measure else ""
    header = ["", "alpha", "beta", "a", "b", f"D/N at {sci(c)}{unit}", f"D/N at {sci(large_compute)}{unit}"]
    cells = []
    for row in rows:
        line = [row["name"]]
        for key, fmt in TABLE_FORMATS.items():
            text = _num(row.get(key), fmt)
            if "ci" in row and row["ci"].get(key):
                lo, hi = row["ci"][key]
                text += f" [{format(lo, fmt)}, {format(hi, fmt)}]"
            elif text != "-" and row.get("inside", {}).get(key) is not None:
                text += " in" if row["inside"][key] else f" {out_mark}"
            line.append(text)
        cells.append(line)
    return header, cells


def format_table(rows: list[dict], reference_compute: float | None = None, measure: str = "") -> str:
    """The comparison as aligned plain text (see `table_cells`; measure: what C counts, for the headers)."""
    return plain_table(*table_cells(rows, reference_compute, measure=measure))


# ----------------------------------------------------------------------------- approaches

APPROACH_NAMES = {"approach_1": "Approach 1 (envelope)", "approach_2": "Approach 2 (IsoFLOP)",
                  "approach_3": "Approach 3 (parametric fit)", "vpnls": "VPNLS (variable projection)"}


def _interval(entry: dict) -> tuple[float, float] | None:
    ci = entry.get("a_ci", entry.get("ci"))
    return _bounds(ci.get("a") if isinstance(ci, dict) else ci)


def compare_approaches(approaches: dict, law: Law | None = None,
                       ci: Intervals | None = None) -> tuple[list[dict], list[str]]:
    """The exponent a from each approach, and each pair that disagrees ("X a = .. and Y a = ..
    disagree beyond their intervals"; `disagreement` turns them into one warning with its advice).

    `approaches` is fit.json's "approaches": {"approach_1": {"a": .., "a_ci": [lo, hi]}, ...}
    (the interval may be missing). When it has no approach_3, the fit's own law and its interval of a
    stand for it. Two approaches disagree when both have intervals and their difference exceeds
    the two half-widths that face each other combined in quadrature, sqrt(h_x^2 + h_y^2) (a test
    of the difference at the intervals' level, treating the two as independent; mere overlap,
    h_x + h_y, lets a systematic gap of 0.05-0.09 in a pass), or when only one has an interval and
    the other's a lies outside it; with no intervals at all nothing can be said and no warning is
    given.
    """
    entries = {k: dict(v) for k, v in (approaches or {}).items()
               if isinstance(v, dict) and v.get("a") is not None}
    if "approach_3" not in entries and law is not None:
        entries["approach_3"] = {"a": law.a, "a_ci": ci.interval("a") if ci is not None else None}
    rows = [{"approach": key, "name": APPROACH_NAMES.get(key, key), "a": float(e["a"]),
             "a_ci": _interval(e)} for key, e in sorted(entries.items())]
    warnings = []
    for i, x in enumerate(rows):
        for y in rows[i + 1:]:
            ix, iy = x["a_ci"], y["a_ci"]
            if ix and iy:
                clash = _apart(x["a"], ix, y["a"], iy)
            elif ix or iy:
                inner, point = (ix, y["a"]) if ix else (iy, x["a"])
                clash = not (inner[0] <= point <= inner[1])
            else:
                clash = False
            if clash:
                warnings.append(f"{x['name']} a = {_fmt_a(x)} and {y['name']} a = {_fmt_a(y)} disagree "
                                "beyond their intervals")
    return rows, warnings


DISAGREEMENT_ADVICE = ("the allocation depends on the method, so check the sweep's coverage of N at each "
                       "budget and the fit's residuals before trusting any one")


def disagreement(clashes: list[str]) -> list[str]:
    """`compare_approaches`' clashing pairs as one warning (none where none clash), the advice once."""
    return ["; ".join(clashes) + ": " + DISAGREEMENT_ADVICE + "."] if clashes else []


def _apart(ax: float, ix: tuple[float, float], ay: float, iy: tuple[float, float]) -> bool:
    """Whether a_x and a_y differ by more than their facing half-widths combined in quadrature."""
    (lo_a, lo_i), (hi_a, hi_i) = sorted([(ax, ix), (ay, iy)], key=lambda t: t[0])
    facing = math.hypot(lo_i[1] - lo_a, hi_a - hi_i[0])
    return hi_a - lo_a > facing


def _fmt_a(row: dict) -> str:
    if row["a_ci"]:
        return f"{row['a']:.3f} [{row['a_ci'][0]:.3f}, {row['a_ci'][1]:.3f}]"
    return f"{row['a']:.3f} (no interval)"


def format_approaches(rows: list[dict]) -> str:
    width = max((len(r["name"]) for r in rows), default=0)
    return "\n".join(f"{r['name'].ljust(width)}  a = {_fmt_a(r)}" for r in rows)
