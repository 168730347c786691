"""The report's sections that set the fit beside the field: the four estimates of the allocation
exponent a (Hoffmann et al.'s three approaches and VPNLS), the published laws and their frontiers,
and Kaplan et al.'s single-variable laws. Like `scaling.report.sections`, each takes the `Report`.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from scaling.errors import UsageError
from scaling.formats import sci
from scaling.laws import analysis
from scaling.laws.fitting.fitdata import FitData
from scaling.laws.forms.allocating import AllocatingLaw
from scaling.laws.forms.references import BESIROGLU, CHINCHILLA, KAPLAN
from scaling.laws.optimal import allocation, approaches, compare
from scaling.report import figures as figs
from scaling.report import frontiers as frontier_figure
from scaling.report import prose
from scaling.report.drawn import drawn_law, drawn_name, drawn_note
from scaling.report.page import Report
from scaling.report.prose import bounds, number

FRONTIER_MAX_C = 1e24


def allocation_exponents(r: Report) -> None:
    fit = r.fit
    r.doc.h(2, "Four estimates of the allocation exponent a")
    apps = fit.approaches or {}
    rows = []
    for key in ("approach_1", "approach_2", "approach_3", "vpnls"):
        e, published = apps.get(key), f"{CHINCHILLA.a[key]:.2f}" if key in CHINCHILLA.a else "-"
        if e is None:
            why = "needs training curves (a run store)" if key == "approach_1" else "not in this fit.json"
            rows.append((compare.APPROACH_NAMES[key], "-", "-", "-", published, why))
            continue
        iv = e.get("a_ci")
        rows.append((compare.APPROACH_NAMES[key], number(e.get("a"), ".4f"),
                     "-" if not iv or None in iv else bounds(iv, ".4f"), number(e.get("b"), ".4f"), published,
                     prose.approach_note(e)))
    r.doc.table(["approach", "a", "interval", "b", "Hoffmann et al.", "notes"], rows,
                align=["l", "r", "r", "r", "r", "l"])
    if apps:
        r.doc.ul(f"warning: {w}" for w in compare.disagreement(compare.compare_approaches(apps, fit.law, fit.ci)[1]))
    if r.inputs.data is None:
        r.missing_figures["isoflop"] = "no points to group by budget"
        return
    _isoflop(r, r.inputs.data)


def _isoflop(r: Report, data: FitData) -> None:
    """Approach 2's budgets on the points drawn (as fit.json's approach_2 for the points fitted)."""
    law, curves = drawn_law(r.fit), r.inputs.curves
    iso = analysis.isoflop_of(data)           # as the fit grouped them: by planned budgets where recorded
    frontier = None
    if curves is not None and len(curves):
        env = approaches.envelope(curves[(curves.status == "finished") & curves.run_id.isin(list(map(str, data.ids)))])
        if len(env.frontier):
            frontier = (env.frontier.compute.to_numpy(float), env.frontier.n.to_numpy(float))
    r.doc.p(f"Approach 2 budgets ({iso.grouping}): a budget is used when at least 3 model sizes sampled it and "
            "its parabola in ln N has a minimum inside the sampled sizes.")
    r.doc.table(["budget C (FLOPs)", "runs", "sizes", "N sampled", "status", "N_opt (parabola)", "N_opt (law)"],
                [(f"{b.compute:.3g}", b.n_runs, b.n_sizes, f"{b.n_range[0]:.3g} - {b.n_range[1]:.3g}", b.status,
                  number(b.n_opt, ".3g"), _law_n_opt(law, b.compute)) for b in iso.budgets],
                align=["r", "r", "r", "r", "l", "r", "r"])
    r.figure("isoflop", figs.isoflop(iso, data.n, data.loss, law, frontier=frontier, n_label=r.n_label,
                                     data_c_range=(float(data.compute.min()), float(data.compute.max())),
                                     law_name=drawn_name(r.fit)),
             "Left: final loss against model size along each compute budget; the parabola in ln N fitted to each "
             "budget's runs and its minimum (Approach 2), and the fitted law along the same budget with its "
             "optimum (Approach 3). Right: compute-optimal N against C from each approach." + drawn_note(r.fit))


def _law_n_opt(law: AllocatingLaw, compute: float) -> str:
    """The law's N_opt at `compute`, or '-' where that optimum is no model (a flat table's N = 1e116:
    the plan section and the bracketing check say why)."""
    try:
        n, _ = allocation.model_optimum(law, compute)
    except UsageError:
        return "-"
    return f"{float(n):.3g}"


def kaplan_laws(r: Report) -> None:
    kap = r.fit.kaplan
    if not kap:
        return
    r.doc.h(2, "Kaplan-style single-variable laws")
    r.doc.p(f"L(X) = (X_c / X)^alpha_X without an irreducible term (Kaplan et al. 2020), fitted on the runs "
            f"closest to each law's condition; N counted as {kap.get('param_convention')}. Kaplan's own "
            "exponents are for non-embedding parameters on WebText2.")
    rows, degenerate = [], []
    for key, label in (("L_N", "L(N)"), ("L_D", "L(D)"), ("L_C", "L(C)")):
        theirs = f"{KAPLAN.extra['alpha_' + key[-1]]:.3f}"
        e = kap.get(key)
        if e is None:
            rows.append((label, "-", "-", "-", "-", theirs))
            continue
        iv = e.get("alpha_ci")
        why = _kaplan_degenerate(e)
        if why:
            degenerate.append(f"{label} is not determined: {why}; its row is no finding")
            rows.append((label, "not determined", "-", "-", e.get("n_points"), theirs))
            continue
        rows.append((label, number(e.get("alpha"), ".4f"), "-" if not iv or None in iv else bounds(iv, ".4f"),
                     number(e.get("x_c"), ".3g"), e.get("n_points"), theirs))
    r.doc.table(["law", "alpha_X", "interval", "X_c", "points", "Kaplan et al."], rows)
    r.doc.ul(degenerate + list(kap.get("reasons") or []))


# An X_c beyond any compute, parameter or token count a law could describe: alpha_X near 0 with
# X_c running off to keep the loss, i.e. no power law in X measured.
KAPLAN_X_C_MAX = 1e40


def _kaplan_degenerate(e: dict) -> str | None:
    """Why a Kaplan-style fit L(X) = (X_c / X)^alpha_X determines nothing, or None when it does."""
    alpha, x_c, iv = e.get("alpha"), e.get("x_c"), e.get("alpha_ci")
    if iv and None not in iv and iv[0] <= 0 <= iv[1]:
        return (f"alpha_X's interval [{iv[0]:.3g}, {iv[1]:.3g}] reaches 0 (X_c = {number(x_c, '.3g')} grows to "
                "make up for it)")
    if x_c is None or not math.isfinite(x_c) or x_c > KAPLAN_X_C_MAX or alpha is None or alpha <= 0:
        return f"alpha_X = {number(alpha, '.3g')} with X_c = {number(x_c, '.3g')}: the loss barely moves with X here"
    return None


def published_laws(r: Report) -> None:
    fit, data = r.fit, r.inputs.data
    r.doc.h(2, "Comparison with published laws")
    # D/N at the reference compute and at the plan's largest budget, every law's split in the fit's count
    # of C: Kaplan's D/N there is the plan table's
    large = max(r.budgets, default=compare.LARGE_COMPUTE)
    measure = fit.law.flops.name
    rows = compare.compare(fit.law, fit.ci, fit.reference_compute, large_compute=large)
    r.doc.table(*compare.table_cells(rows, fit.reference_compute, out_mark="**OUT**", large_compute=large,
                                     measure=measure))
    top = fit.data.c_range[1] if fit.data.c_range else None
    r.doc.p(f"in / OUT: the published value lies inside / outside your interval. D/N at C = {sci(large)} FLOPs "
            f"({measure}; {prose.beyond_runs(large, top)} your largest run, the plan's largest budget): each law's "
            "compute-optimal split of that C counted as your fit counts it.")
    r.doc.ul(compare.CAVEATS)
    n, c = (data.n, data.compute) if data is not None else (np.array([]), np.array([]))
    r.figure("frontiers", frontier_figure.frontiers(
        drawn_law(fit), n, c,
        r.colours, c_range=fit.data.c_range, c_max=FRONTIER_MAX_C, budgets=r.budgets, n_label=r.n_label,
        references={"chinchilla": replace(CHINCHILLA.parametric_law, flops=fit.law.flops).n_opt,
                    "besiroglu": replace(BESIROGLU.parametric_law, flops=fit.law.flops).n_opt,
                    "kaplan": lambda c: allocation.KAPLAN_N_COEFF * (np.asarray(c) / allocation.PF_DAY_FLOP)
                    ** allocation.KAPLAN_N_EXPONENT}),
        f"Iso-loss contours of the fitted L(N, D) along C = {fit.law.flops.name} over compute and model size "
        "(each contour is the loss the "
        "fit reaches at a power of ten of C with the best split, and touches the fitted frontier there); your "
        "runs as points; your compute-optimal N_opt(C), solid over your runs' compute and dashed beyond; "
        "Chinchilla's, Besiroglu et al.'s and Kaplan's frontiers (theirs planned under your count of C), to "
        f"{sci(FRONTIER_MAX_C)} FLOPs ({fit.law.flops.name}); dotted: the budgets of the plan (section "
        "\"Plan for a few budgets\"). "
        "\"Plan for a few budgets\"). "
        + ("The published frontiers count total parameters (Kaplan: non-embedding); "
           f"yours counts {r.n_label}." if fit.data.param_convention else "") + drawn_note(fit))
