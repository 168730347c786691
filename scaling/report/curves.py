"""The report's section on the law fitted to the training curves (`scaling fit --curves`, Tissue
et al. 2024): every size's curves with its fitted curve law, the leave-one-run-out check of the
curve laws, and the curve-based law beside the final-loss law.

    curves_section(report)      # in scaling.report.report.SECTIONS, with the detail after the decisions

Drawn when the fit has a "curves" section: a fit.json made with `scaling fit --curves`, or a run
store fitted here with `scaling report RUNS_DIR --curves` (the same fit, made once). Every number
is the section's; nothing is refitted. The figures need the run store too: its evaluations and
each run's schedule (`curve_store.read_curve_runs`), to draw each curve law along each run's own
schedule.
"""

from __future__ import annotations

import numpy as np

from scaling.errors import UsageError
from scaling.formats import sci
from scaling.laws.curves.law import CurveLaw
from scaling.laws.curves.runs import read_curve_runs
from scaling.laws.forms.law import Law
from scaling.report import curve_figures
from scaling.report.page import Report
from scaling.report.prose import bounds, number

COMPARED = (("alpha", "alpha", ".4f"), ("beta", "beta", ".4f"), ("a", "a", ".4f"), ("b", "b", ".4f"),
            ("tokens per parameter", "tokens_per_param", ".4g"))


def curves_section(r: Report) -> None:
    curves = r.fit.curves
    if curves is None:
        return                    # a fit made without --curves: nothing to show, nothing refitted
    r.doc.h(2, "The law from the training curves")
    ci = curves.get("ci") or {}
    r.doc.p("Every evaluation of every run, not only its last: each model size's curves (all its runs, past their "
            "warmup) fix that size's curve law L = L0 + A S1^-alpha - C S2 (Tissue et al. 2024; S1 the summed "
            f"learning rate, S2 the annealing area with momentum {curves['decay']:g}"
            + (", the momentum of least squared error" if curves.get("decay_profile") else "")
            + "); the law L(N, D) is then fitted "
            "to the final losses the curve laws give at each size's D's of interest under the sweep's schedule. "
            + (f"{100 * ci['level']:g}% intervals from {ci['n_resamples']} resamples of whole runs (a curve's "
               "points share its run's seed, so they are not resampled one by one)."
               if ci else "No resamples, so no intervals."))
    _side_by_side(r, curves)
    _size_table(r, curves)
    _leave_one_out(r, curves)
    _figures(r, curves)


def _side_by_side(r: Report, curves: dict) -> None:
    fit, ci = r.fit, curves.get("ci") or {}
    mine = {**curves["params"], **curves["allocation"], "tokens_per_param": curves["tokens_per_param_at_reference"]}
    rows = []
    for label, key, f in COMPARED:
        theirs = getattr(fit.law, key) if key in ("alpha", "beta") else \
            fit.tokens_per_param if key == "tokens_per_param" else getattr(fit, key)
        rows.append((label, f"{number(theirs, f)} {bounds(fit.interval(key), f)}",
                     f"{number(mine[key], f)} {bounds(ci.get(key), f)}"))
    r.doc.table(["", "fitted to final losses", "fitted to the curves"], rows, align=["l", "r", "r"])
    r.doc.p(f"Tokens per parameter at C = {sci(curves['reference_compute'])} FLOPs, as the fit's. L(N, D) to the "
            f"curve laws' final losses: residual RMS {curves['residual_rms']:.4g} in log loss.")


def _size_table(r: Report, curves: dict) -> None:
    def warmups(size: dict) -> str:
        lo, hi = size.get("warmup_steps") or ("-", "-")
        return str(lo) if lo == hi else f"{lo}-{hi}"

    rows = [(f"{s['n']:.4g}", str(len(s["runs"])), warmups(s), str(s["law"]["n_points"]), f"{s['law']['L0']:.4g}",
             f"{s['law']['A']:.4g}", f"{s['law']['alpha']:.3f}", f"{s['law']['C']:.4g}", f"{s['law']['rms']:.3g}")
            for s in curves["sizes"]]
    r.doc.table(["N", "runs", "warmup (steps)", "evaluations", "L0", "A", "alpha", "C", "residual RMS"], rows)
    if any(len(set(s.get("warmup_steps") or ())) > 1 for s in curves["sizes"]):
        r.doc.p("A size whose runs warm up over different numbers of steps (a warmup that is a fraction of each "
                "run) does not give its curve law one early history: the law sees a warmup only through S1, and a "
                "short warmup at a high rate costs a run more than that (on the demo, up to 8.5% of its final loss; "
                "bench/bench_curve_warmup.py). One warmup per size, as a WSD sweep shares, fits it better.")


def _leave_one_out(r: Report, curves: dict) -> None:
    loo = curves["leave_one_run_out"]
    if not loo["n_runs"]:
        r.doc.p("Leave one run out: no size has two runs with curves, so no final loss can be predicted from "
                "its size's other runs.")
        return
    r.doc.p(f"Leave one run out: each run's final loss predicted by its size's curve law fitted without it, within "
            f"{100 * loo['mean_abs_error']:.2f}% on average (median {100 * loo['median_abs_error']:.2f}%, bias "
            f"{100 * loo['mean_error']:+.2f}%, worst {100 * loo['max_abs_error']:.2f}%, {loo['n_runs']} runs). A run "
            "longer than its size's other runs is an extrapolation of their curves: "
            + "; ".join(f"{part['n_runs']} runs {where} their reach, "
                        + ("-" if part["mean_abs_error"] is None else f"{100 * part['mean_abs_error']:.2f}% on average")
                        for where, part in loo["by_reach"].items()) + ".")
    r.doc.table(["run", "N", "D", "final loss", "predicted", "error", "beyond the others' reach"],
                [(row["run_id"], f"{row['n']:.4g}", f"{row['d']:.4g}", f"{row['loss']:.4f}",
                  f"{row['predicted']:.4f}", f"{100 * row['error']:+.2f}%", "yes" if row["beyond_reach"] else "no")
                 for row in loo["runs"]], align=["l"] + ["r"] * 5 + ["l"])


def _figures(r: Report, curves: dict) -> None:
    why = "the fit's run store was not found: its curves and schedules are not at hand"
    runs = None
    if r.inputs.runs_dir is not None:
        try:
            runs = read_curve_runs(r.inputs.runs_dir, r.fit.data.param_convention or "total")
        except UsageError as exc:
            why = f"the run store's curves cannot be read ({exc})"
    if runs is None:
        for name in ("curve_laws", "two_fits"):
            r.missing_figures[name] = why
        return
    laws = {float(s["n"]): CurveLaw(**s["law"]) for s in curves["sizes"]}
    runs = runs.only([run_id for s in curves["sizes"] for run_id in s["runs"]])
    r.figure("curve_laws", curve_figures.curve_laws(runs, laws, r.colours, n_label=r.n_label),
             "Each size's validation curves (dots; hollow: in the warmup, which the curve law leaves out) and its "
             "fitted curve law along each run's own learning-rate schedule (lines). Where a size's runs sit apart "
             "at equal S1, one law cannot pass through all of them: see the leave-one-run-out table above.")
    finals = np.array([runs.final[run_id] for run_id in runs.final]).T
    sizes = {float(s["n"]): tuple(np.array(s["points"]).T) for s in curves["sizes"]}
    r.figure("two_fits", curve_figures.two_fits(finals, sizes, r.fit.law, Law.from_dict(curves["params"]),
                                                r.colours, n_label=r.n_label),
             "Final loss against tokens at each size: the runs' final losses (dots) and the law fitted to them "
             "(solid); the curve laws' final losses at each size's D's of interest (crosses) and the law fitted to "
             "those (dashed).")
