"""The report's sections on the fit, each drawing its figures and writing its text into a `Report`
(`scaling.report.page`); those on what to train (the plan, with repeated data, the validation) are in
`scaling.report.decisions`, those that set the fit beside the field (the four estimates of a, the
published laws, Kaplan's single-variable laws) in `scaling.report.literature`, and the reading order
is `scaling.report.report.SECTIONS`:

    report = Report.start(inputs)                 # the fit's own hold-out check
    for section in SECTIONS:
        section(report)

Every number comes from the LawFit (`report.fit`) or is computed here from the points; the text
around it says what it means. The lists (at a glance, settings, evidence, limitations,
provenance) are in `scaling.report.prose`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from scaling.laws.checks.holdout import pct
from scaling.laws.fitting import fit as fitting
from scaling.laws.fitting import readers
from scaling.laws.forms.law import PARAM_NAMES
from scaling.laws.forms.references import BESIROGLU, CHINCHILLA, KAPLAN
from scaling.laws.results.summary import FORMATS, format_lack_of_fit
from scaling.report import figures as figs
from scaling.report import prose
from scaling.report.drawn import chinchilla_note, chosen_form_line, drawn_law, drawn_note, equation
from scaling.report.page import FIGURE_TITLES, Report
from scaling.report.prose import bounds, number

if TYPE_CHECKING:
    from scaling.train.compute import FlopsPerToken

MAX_POINTS_LISTED = 60       # longer point tables (a dataset) are summarised instead


def summary(r: Report) -> None:
    fit, law = r.fit, r.fit.law
    r.doc.h(1, r.title)
    r.doc.p(prose.source_line(r.inputs))
    _verdict(r)
    r.doc.p(f"The fitted law: **L(N, D) = {law.E:.4g} + {law.A:.4g} / N^{law.alpha:.4f} + {law.B:.4g} / "
            f"D^{law.beta:.4f}**, with N in {r.n_label} and D in training tokens; L in nats per token."
            + ("" if (chosen := chosen_form_line(fit)) is None else f" {chosen}"))
    r.doc.ul(prose.at_a_glance(fit, r.holdout))


def _verdict(r: Report) -> None:
    """The verdict first, with the reasons that decided it (see the Diagnostics section)."""
    diag = r.fit.diagnostics
    if diag is None:
        r.doc.p("**Verdict: none recorded.** This fit.json predates the diagnostics; refit it with "
                "`scaling fit` for a verdict on whether the data determine the law.")
        return
    r.doc.p(f"**Verdict: {diag.verdict}.** " + {
        "trustworthy": "Every diagnostic passed; how far beyond its data the law was tested is the backtest's "
                       "line below.",
        "use with caution": "The data determine the law, but the checks below did not all pass: use its numbers "
                            "with their intervals and these reasons in mind (docs/diagnostics.md: what each check "
                            "measures, its thresholds and why).",
        "not identified": "The data do not determine the law: its allocation and tokens per parameter "
                          "are not a recommendation until the sweep is redesigned.",
    }[diag.verdict])
    if diag.reasons:
        r.doc.ul(list(diag.reasons))


def diagnostics(r: Report) -> None:
    diag = r.fit.diagnostics
    if diag is None:
        return
    r.doc.h(2, "Diagnostics")
    r.doc.p(f"Each check, its measured value, the threshold it is held to and its status; the verdict "
            f"(**{diag.verdict}**) is the worst status. The thresholds are explained in docs/diagnostics.md.")
    r.doc.table(["check", "value", "threshold", "status", "what it measured"],
                [[c.name, number(c.value, ".3g"), c.threshold, c.status, c.reason] for c in diag.checks],
                align=["l", "r", "l", "l", "l"])
    if r.fit.param_conventions:
        r.doc.p(f"The same runs with N counted each way (this report's law counts {r.fit.data.param_convention} "
                "parameters; Kaplan et al. counted non-embedding, Hoffmann et al. total):")
        r.doc.table(["N counts", "alpha", "a", "tokens per parameter", "resamples"], [
            [name, number(c.get("alpha"), ".3f"), f"{number(c.get('a'), '.3f')} {bounds(c.get('a_ci'), '.3f')}",
             f"{number(c.get('tokens_per_param'), '.3g')} {bounds(c.get('tokens_per_param_ci'), '.3g')}",
             str(c.get("n_resamples", "-"))] if "reason" not in c else [name, "-", "-", c["reason"], "-"]
            for name, c in sorted(r.fit.param_conventions.items())])


def left_out(r: Report) -> None:
    pairs = [(str(d.get("id")), d.get("reason", "")) for d in r.fit.data.dropped]
    pairs += [(str(what), why) for what, why in r.inputs.left_out]
    reasons: dict[str, list[str]] = {}          # one row per run or point, its reasons in order found
    for what, why in pairs:
        if why not in reasons.setdefault(what, []):
            reasons[what].append(why)
    r.left_out = [(what, "; ".join(whys)) for what, whys in reasons.items()]
    if r.left_out or r.inputs.notes:
        r.doc.h(2, "What was left out, and why")
        if r.left_out:
            r.doc.table(["run / point", "why"], r.left_out, align=["l", "l"])
        r.doc.ul(r.inputs.notes)


def sweep(r: Report) -> None:
    inputs, data = r.inputs, r.inputs.data
    r.doc.h(2, "The sweep" if inputs.runs_dir is not None else "The data")
    if inputs.settings is not None:
        r.doc.ul(prose.settings_lines(inputs))
    elif data is not None:
        r.doc.p(f"Points: {r.fit.data.source or data.source}.")
    if inputs.runs is not None:
        fitted = set(map(str, data.ids)) if data is not None else set()
        flops = r.fit.law.flops
        r.doc.p(f"{len(inputs.runs)} runs in the store, {len(fitted)} fitted. "
                f"N_ne: non-embedding parameters; N: total; C: the compute the fit counts, {flops.name} "
                f"(the store's {readers.COMPUTE_COLUMNS.get(flops.measure, 'flops_6nd')}); "
                "loss: final validation loss in nats/token; bpb: bits per byte.")
        held = {row.id for row in r.holdout.rows} if r.holdout is not None else set()
        r.doc.table(["run", "status", "N_ne", "N", "D (tokens)", f"C ({flops.name})", "lr", "loss", "bpb",
                     "epochs", "wall (s)", "in the fit"],
                    prose.run_rows(inputs.runs, fitted, held, readers.COMPUTE_COLUMNS.get(flops.measure, "flops_6nd")),
                    align=["l", "l"] + ["r"] * 9 + ["l"])
    elif data is not None:
        r.doc.p(prose.points_summary(data, listed=len(data) <= MAX_POINTS_LISTED))
        if len(data) <= MAX_POINTS_LISTED:
            r.doc.table(["point", "N", "D (tokens)", f"C ({data.flops.name})", "loss"],
                        [(str(i), f"{n:.4g}", f"{d:.4g}", f"{c:.4g}", f"{loss:.4f}")
                         for i, n, d, c, loss in zip(data.ids, data.n, data.d, data.compute, data.loss)])
    if inputs.curves is not None and len(inputs.curves):
        r.figure("loss_curves", figs.loss_curves(inputs.curves, r.colours, n_label=r.n_label),
                 "Validation loss against tokens seen for every run (log tokens). One colour per model size, the "
                 "same in every figure; each run's line ends at its own budget, at the dot (its final loss). "
                 "Runs that did not finish are dashed and end in a cross.")
    else:
        r.missing_figures["loss_curves"] = ("no training curves: a packaged dataset or table has only final "
                                            "losses" if inputs.runs_dir is None else "no run has a validation curve")
    if inputs.context_curves is not None and len(inputs.context_curves):
        r.figure("context_curves", figs.context_curves(inputs.context_curves, r.colours, n_label=r.n_label),
                 "How much lower each run's loss is over the second half of its context than at positions 1-7 "
                 "(a few tokens seen), against tokens seen. Tiny models first learn what a few tokens predict and "
                 "only after millions of tokens use the rest of their context, and then their loss falls faster: "
                 "runs on both sides of the dashed line follow different laws (the verdict's context_regime "
                 "check), and a law fitted on one side does not predict the other.")


def fitted_law(r: Report) -> None:
    fit, options, ci = r.fit, r.fit.options, r.fit.ci
    level = ci.level if ci is not None else 0.95
    r.doc.h(2, "The fitted law")
    r.doc.p(f"Approach 3 of Hoffmann et al.: Huber loss (delta {options.delta or fitting.DEFAULT_DELTA:g}) on "
            f"log residuals, L-BFGS from {options.n_starts or 4500} starts; "
            + (f"{100 * level:g}% percentile intervals from {ci.n_resamples} bootstrap resamples (seed "
               f"{fit.seed})." if ci is not None else "no bootstrap, so no intervals."))
    f = FORMATS
    values = {**{name: getattr(fit.law, name) for name in PARAM_NAMES}, "a": fit.a, "b": fit.b, "G": fit.G}
    rows = [(name, number(value, f[name]), bounds(fit.interval(name), f[name])) for name, value in values.items()]
    if fit.reference_compute is not None:
        rows.append((f"tokens_per_param at C = {fit.reference_compute:.3g}",
                     number(fit.tokens_per_param, f["tokens_per_param"]),
                     bounds(fit.interval("tokens_per_param"), f["tokens_per_param"])))
    r.doc.table(["constant", "value", f"{100 * level:g}% interval"], rows)
    if fit.residual_rms is not None:
        r.doc.p(f"Residual RMS {fit.residual_rms:.4g} in log loss; {fit.n_starts_at_optimum} of {options.n_starts} "
                f"starts ended at the optimum. {_allocation_formula(fit.law.flops)}")
    if fit.lack_of_fit is not None:
        r.doc.p(format_lack_of_fit(fit.lack_of_fit).capitalize() + " (scaling.laws.checks.lack_of_fit: a small p says "
                "the residuals share errors by that grouping, which a bootstrap over points does not see; every "
                "interval here is widened by the square root of the largest design effect the tests measure).")
    _points_figures(r)
    _bootstrap_figure(r)


def _allocation_formula(flops: FlopsPerToken) -> str:
    """How a and b follow from alpha and beta under the fit's compute count (the table's a, b)."""
    if flops.is_six_n:
        return ("a = beta/(alpha+beta) is the exponent of N_opt ~ C^a, b = alpha/(alpha+beta) that of "
                f"D_opt ~ C^b (C = {flops.name}).")
    return (f"a = beta/(alpha + gamma beta) is the exponent of N_opt ~ C^a, b = alpha/(alpha + gamma beta) that of "
            f"D_opt ~ C^b, with C in {flops.name}: a token costs c(N) = 6 kappa N^gamma of them, kappa = "
            f"{flops.kappa:.4g} and gamma = {flops.gamma:.4g} fitted across the runs' shapes (within "
            f"{100 * flops.max_error:.1f}%), so C = c(N) D.")


def _points_figures(r: Report) -> None:
    data, law = r.inputs.data, drawn_law(r.fit)
    if data is None:
        for name in ("final_loss", "residuals"):
            r.missing_figures[name] = "no points to draw (see above)"
        return
    grid = np.unique(data.d).size <= 8 and np.unique(data.n).size <= 8
    r.figure("final_loss", figs.final_loss(data.n, data.d, data.loss, law, r.colours, title=equation(r.fit),
                                           n_label=r.n_label),
             "Final loss of the fitted runs against model size at each token budget (left) and against tokens at "
             "each model size (right), with the fitted law's curves "
             + ("in the same colours." if grid else "at five representative values (the points scatter over many "
                "values of N and D; the colour bars match points to curves).") + drawn_note(r.fit))
    resid = np.log(data.loss) - np.log(law.loss(data.n, data.d))
    worst = int(np.argmax(np.abs(resid)))
    r.figure("residuals", figs.residuals(data.n, data.compute, resid, r.colours, n_label=r.n_label,
                                         compute_label=law.flops.name),
             f"Residuals ln L_observed - ln L_fitted against compute and model size (RMS "
             f"{np.sqrt(np.mean(resid ** 2)):.3g}; largest {resid[worst]:+.3g} at {data.ids[worst]}). A trend with "
             "compute or size means the law's form misses something there; scatter without trend is noise."
             + drawn_note(r.fit))


def _bootstrap_figure(r: Report) -> None:
    fit = r.fit
    samples = fit.bootstrap_samples()           # fit.bootstrap.csv's resamples (or this fit's, in memory)
    law, ci = fit.law, fit.ci
    if samples is None or ci is None:
        r.missing_figures["bootstrap"] = "no bootstrap resamples (see above)"
        return
    estimates = {"alpha": law.alpha, "beta": law.beta, "a": law.a, "tokens_per_param": fit.tokens_per_param}
    intervals = {key: fit.interval(key) for key in ("alpha", "beta", "a", "tokens_per_param")}
    refs = {ref.key: {"alpha": ref.parametric_law.alpha, "beta": ref.parametric_law.beta, "a": ref.parametric_law.a}
            for ref in (CHINCHILLA, BESIROGLU)}
    refs["kaplan"] = {"a": KAPLAN.a["kaplan"]}
    r.figure("bootstrap", figs.bootstrap_distributions(
        samples, estimates, intervals, references=refs, reference_compute=fit.reference_compute,
        n_resamples=ci.n_resamples, level=ci.level),
        f"Bootstrap distributions over {ci.n_resamples} Bayesian-bootstrap resamples of the points (seed "
        f"{fit.seed}), each refitted: alpha, beta, a and tokens per parameter at C = "
        f"{fit.reference_compute:.3g} FLOPs. Solid black: the full fit; dashed: the {100 * ci.level:g}% "
        "interval; coloured lines: published values (E, A, B and tokens per parameter depend on the setup "
        "and are not compared)." + chinchilla_note(fit))


def holdout_check(r: Report) -> None:
    check, law = r.holdout, r.fit.law
    r.doc.h(2, "Hold-out check: does the law predict runs it has not seen?")
    if check is None:
        r.doc.p("None here: this fit.json records no hold-out check, or its points were not found to refit at "
                "the fraction asked for (see the notes above).")
        return
    r.doc.p(prose.holdout_intro(check))
    if check.reason:
        r.doc.p(check.reason)
        return
    refit = check.law
    assert refit is not None, "a Holdout has either a refit or the reason it has none"
    r.doc.table(["held-out run", "N", "D (tokens)", f"C ({r.fit.law.flops.name})", "observed loss", "predicted",
                 "abs rel error", "full fit's error"],
                [(row.id, f"{row.n:.4g}", f"{row.d:.4g}", f"{row.compute:.4g}", f"{row.loss:.4f}",
                  f"{row.predicted:.4f}", pct(row.abs_rel_error), pct(abs(row.full_predicted - row.loss) / row.loss))
                 for row in check.rows])
    r.doc.p(f"**Mean absolute relative error of the held-out predictions: {pct(check.mean_abs_rel_error)}** "
            f"(the full fit, which saw these runs: {pct(check.full_mean_abs_rel_error)}). The refit without them: "
            f"alpha = {refit.alpha:.4f}, beta = {refit.beta:.4f}, a = {refit.a:.4f} (full fit: "
            f"{law.alpha:.4f}, {law.beta:.4f}, {law.a:.4f}).")


def closing(r: Report) -> None:
    """Evidence, limitations, the figures not drawn and how the report was made."""
    r.doc.h(2, "Evidence")
    r.doc.ul(list(r.fit.evidence) + prose.more_evidence(r.holdout))
    r.doc.h(2, "Limitations")
    r.doc.ul(list(r.fit.limitations) + prose.more_limitations(r.inputs, r.holdout, r.budgets))
    if r.missing_figures:
        r.doc.h(2, "Figures not drawn")
        r.doc.ul(f"{FIGURE_TITLES[name]}: {why}" for name, why in r.missing_figures.items())
    r.doc.h(2, "How this report was made")
    r.doc.ul(prose.provenance(r.inputs, r.holdout, r.holdout_fraction))

