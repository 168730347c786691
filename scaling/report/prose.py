"""The report's prose lists and rows: the summary at a glance, the sweep's settings, the run
table, and what the report adds to fit.json's evidence and limitations.

Pure: each function turns the inputs, the LawFit or the hold-out check into lines of text.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import pandas as pd

from scaling.laws.checks.backtest_text import summary_line
from scaling.laws.checks.cross_forms import fitted_form, forms_check
from scaling.laws.checks.holdout import Holdout, pct
from scaling.laws.fitting import fitdata
from scaling.laws.fitting.provenance import Provenance
from scaling.laws.results import lawfit as results
from scaling.laws.results.fit_file import samples_path
from scaling.report.inputs import Inputs
from scaling.report.style import human

# The plan's budgets, as multiples of the largest fitted run's compute: where the data are (1x) and as
# far as the backtest reaches (its cuts predict 2x-30x beyond a sweep), not fixed FLOPs that lie
# orders of magnitude beyond a small sweep. `scaling report --compute` adds the user's own.
PLAN_FACTORS = (1.0, 3.0, 10.0, 30.0)
CHINCHILLA_70B = 70e9


def n_label(convention: str | None) -> str:
    labels: dict[str | None, str] = {"non_embedding": "non-embedding parameters", "total": "total parameters"}
    return labels.get(convention, "parameters")


def plan_budgets(c_top: float | None, extra: Sequence[float] = ()) -> tuple[float, ...]:
    """The plan's budgets, ascending, each once: PLAN_FACTORS times `c_top` (the largest fitted run's
    compute; none where unknown) and the user's own `extra`."""
    base = () if c_top is None else tuple(f * float(c_top) for f in PLAN_FACTORS)
    return tuple(sorted({*base, *(float(c) for c in extra)}))


def beyond_runs(compute: float, c_top: float | None) -> str:
    """How far `compute` lies beyond the largest fitted run, in words: '3x beyond', 'at the largest run'."""
    if c_top is None:
        return "-"
    ratio = compute / float(c_top)
    if math.isclose(ratio, 1.0, rel_tol=1e-9):
        return "at the largest run"
    return f"{ratio:.3g}x beyond" if ratio > 1 else f"within the runs ({ratio:.3g}x)"


def number(value: float | None, f: str) -> str:
    """`value` in format `f`, or '-' when there is none (None, NaN, infinity)."""
    return "-" if value is None or not math.isfinite(value) else format(value, f)


def bounds(pair: Sequence[float | None] | None, f: str) -> str:
    """An interval as '[lo, hi]' in format `f`, or '-' when there is none."""
    return "-" if pair is None or None in pair else f"[{format(pair[0], f)}, {format(pair[1], f)}]"


def source_line(inputs: Inputs) -> str:
    data = inputs.fit.data
    if inputs.fitted_here:
        how = "fitted here (the same fit as `scaling fit`; its fit.json is written beside this report)"
    else:
        how = f"read from `{inputs.fit_path}`"
    count = f", {data.n_points} points" if data.n_points is not None else ""
    return f"Data: {data.source or 'an unnamed source'}{count}. Fit: {how}."


def at_a_glance(fit: results.LawFit, check: Holdout | None) -> list[str]:
    out = []
    if fit.a is not None:
        a_ci = fit.interval("a")
        out.append(f"Compute-optimal allocation: N_opt ~ C^{fit.a:.3f}"
                   + (f" (interval {bounds(a_ci, '.3f')})" if a_ci else "") + f", D_opt ~ C^{fit.b:.3f}.")
    if fit.tokens_per_param is not None:
        t_ci = fit.interval("tokens_per_param")
        out.append(f"Tokens per parameter at C = {fit.reference_compute:.3g} FLOPs: {fit.tokens_per_param:.3g}"
                   + (f" (interval {bounds(t_ci, '.3g')})" if t_ci else "") + "; Chinchilla's rule of thumb is 20.")
    if check is not None and check.mean_abs_rel_error is not None:
        out.append(f"Hold-out check: refitted without the {len(check.rows)} largest-compute runs, the law predicts "
                   f"their loss with a mean absolute relative error of {pct(check.mean_abs_rel_error)}"
                   + (" (at the budget the refit reached: not a test beyond the data)" if check.within_fitted else "")
                   + ".")
    if fit.backtest is not None:
        line = summary_line(fit.backtest)
        if (median := fit.median_backtest) is not None:       # the median of the forms predicts: its own first
            line = (f"backtest of the median of the forms (what predicts beyond the data, its intervals by its own "
                    f"rule): {summary_line(median).removeprefix('backtest: ')}; of the "
                    f"{fitted_form(fit.options.fixed_E)} form's law alone: {line.removeprefix('backtest: ')}")
        out.append(line[0].upper() + line[1:] + " (the backtest below).")
    if fit.forms is not None:
        out.append(f"Cross-check of the law's forms: {forms_check(fit.forms).reason} (the forms side by side below).")
    if c_range := fit.data.c_range:
        out.append(f"Measured from C = {c_range[0]:.3g} to {c_range[1]:.3g} FLOPs; everything beyond is extrapolation.")
    return out


def settings_lines(inputs: Inputs) -> list[str]:
    """The sweep's shared settings by section, what varies, and the size of the training split."""
    if inputs.settings is None:
        return []
    common, varying = inputs.settings["common"], inputs.settings["varying"]
    skip = {"run_id", "n_params_total", "n_params_non_embedding"}
    if "lr" in varying:
        skip.add("train.lr")      # the base rate; each run's own lr is in the run table
    sections: dict[str, list[str]] = {}
    for key, value in common.items():
        if key in skip or value is None or value == []:
            continue
        section, _, rest = key.partition(".")
        if not rest:
            section, rest = "sweep", {"sweep": "name"}.get(key, key)
        sections.setdefault(section, []).append(f"{rest} `{value}`")
    out = [f"{section}: " + ", ".join(items) for section, items in sections.items()]
    if varying:
        out.append("varies between runs: " + ", ".join(f"`{k}`" for k in varying))
    runs = inputs.runs
    if runs is not None and "epochs" in runs:
        ep = pd.to_numeric(runs.epochs, errors="coerce")
        tok = pd.to_numeric(runs.tokens, errors="coerce")
        ok = (ep > 0) & (tok > 0)
        if ok.any():
            split = float((tok[ok] / ep[ok]).median())
            out.append(f"training split: about {split:.4g} tokens (tokens / epochs of the runs); the largest run saw "
                       f"{float(ep[ok].max()):.3g} epochs of it")
    return out


def _cell(value: float | str | None, f: str) -> str:
    if value is None:
        return "-"
    try:
        value = float(value)
    except (TypeError, ValueError):
        return "-"
    return format(value, f) if math.isfinite(value) else "-"


def run_rows(runs: pd.DataFrame, fitted: set, held: set, compute_column: str) -> list:
    """One row per run of the store, by N, D and id; whether it is fitted, held out, or why not.
    compute_column: the store's column of the compute the fit counted (flops_exact, ...)."""
    df = runs.copy()
    if compute_column not in df:
        df[compute_column] = float("nan")
    df["_n"] = pd.to_numeric(df.n_params_non_embedding, errors="coerce")
    df["_d"] = pd.to_numeric(df.tokens, errors="coerce")
    df = df.sort_values(["_n", "_d", "run_id"], na_position="last", kind="stable")
    rows = []
    for _, r in df.iterrows():
        rid = str(r.run_id)
        if rid in held:
            role = "yes; held out in the check"
        elif rid in fitted:
            role = "yes"
        else:
            role = "no" + (f": {r.reason}" if isinstance(r.reason, str) and r.reason else "")
        rows.append((rid, r.status if isinstance(r.status, str) else "-", _cell(r.n_params_non_embedding, ".4g"),
                     _cell(r.n_params_total, ".4g"), _cell(r.tokens, ".4g"), _cell(r[compute_column], ".4g"),
                     _cell(r.lr, ".3g"), _cell(r.final_val_loss, ".4f"), _cell(r.final_val_bpb, ".4f"),
                     _cell(r.epochs, ".3g"), _cell(r.wall_s, ".1f"), role))
    return rows


def points_summary(data: fitdata.FitData, listed: bool) -> str:
    r = data.ranges()
    where = "listed below" if listed else "not listed here; see the source"
    return (f"{len(data)} points ({where}): {data.n_sizes} distinct N from {r['n_range'][0]:.3g} to "
            f"{r['n_range'][1]:.3g}, D from {r['d_range'][0]:.3g} to {r['d_range'][1]:.3g} tokens, "
            f"compute from {r['c_range'][0]:.3g} to {r['c_range'][1]:.3g} FLOPs ({data.flops.name}), "
            f"loss from {data.loss.min():.4g} to "
            f"{data.loss.max():.4g} nats/token.")


def holdout_intro(check: Holdout) -> str:
    k = check.n_points - check.n_train
    text = (f"The law is refitted (same method and options) on the {check.n_train} of {check.n_points} points "
            f"with the smallest compute, leaving out the {k} with the largest C (the top {100 * check.fraction:g}%), "
            "and then predicts the loss of those.")
    if check.within_fitted:
        text += (f" The held-out runs lie at the compute the refit already reached ({check.train_max_compute:.3g} "
                 "FLOPs: the top budget's other runs stay in it), so this checks the law among its own budgets, "
                 "not beyond them; how far beyond its data it predicts is the backtest's question (below).")
    elif check.rows:
        reach = max(r.compute for r in check.rows) / check.train_max_compute
        text += (f" The held-out runs reach up to {reach:.3g}x the largest compute the refit saw "
                 f"({check.train_max_compute:.3g} FLOPs). Their error is a fair guess of the error of a prediction "
                 "that far beyond a sweep; further out, expect more.")
    return text


def approach_note(e: dict) -> str:
    """What stands behind one approach's a: its reason when there is none, else its method's basis."""
    if e.get("reason"):
        return e["reason"]
    method = e.get("method")
    if method == "isoflop":
        return f"{e.get('n_budgets_used')} budgets; {e.get('grouping')}"
    if method == "envelope":
        extra = "; ".join(e.get("notes") or [])
        return f"{e.get('n_winning_sizes')} winning sizes, no interval" + (f"; {extra}" if extra else "")
    if method == "parametric":
        return "the fitted law; bootstrap interval" if e.get("a_ci") else "the fitted law"
    return ""


def more_evidence(check: Holdout | None) -> list[str]:
    if check is None or check.mean_abs_rel_error is None:
        return []
    return [f"hold-out check: refitted on the {check.n_train} lowest-compute points, the law predicts the "
            f"{len(check.rows)} highest-compute ones with mean absolute relative error "
            f"{pct(check.mean_abs_rel_error)} (largest {pct(max(r.abs_rel_error for r in check.rows))})"]


def more_limitations(inputs: Inputs, check: Holdout | None, budgets: Sequence[float] = ()) -> list[str]:
    """What the report knows beyond fit.json: model sizes, corpus, context, epochs, extrapolation."""
    out = []
    data, fit = inputs.data, inputs.fit
    if data is not None and (nmax := float(data.n.max())) < 1e8:
        out.append(f"fitted on tiny models: the largest has {human(nmax)} {n_label(data.param_convention)}, "
                   f"{math.log10(CHINCHILLA_70B / nmax):.1f} orders of magnitude below Chinchilla (70B); "
                   "the exponents of models this small need not hold for large ones")
    law = fit.law
    if data is not None and law.E < 0.05 * float(data.loss.min()):
        out.append(f"E = {law.E:.3g} is pinned near zero: these runs are far from the irreducible loss, so E is "
                   f"not determined and A/N^alpha absorbs it; read alpha = {law.alpha:.3g} as the local slope "
                   "over the measured sizes, not as the exponent of the reducible loss")
    out += _setup_limitations(inputs)
    if c_range := fit.data.c_range:
        top = float(c_range[1])
        if (far := max(budgets, default=top)) > top:
            out.append(f"the plan and the frontiers extrapolate: their largest budget, {far:.3g} FLOPs "
                       f"({fit.law.flops.name}), is {beyond_runs(far, top)} the largest run ({top:.3g})")
    if check is not None and check.mean_abs_rel_error is None and check.reason:
        out.append(f"no hold-out check: {check.reason}")
    return out


def _setup_limitations(inputs: Inputs) -> list[str]:
    """The one corpus, tokenizer and context of a sweep (or the origin of a dataset), and repeated epochs."""
    out = []
    settings = (inputs.settings or {}).get("common") or {}
    if settings:
        corpus = settings.get("corpus.source")
        detail = {"builtin": "the builtin State of the Union corpus", "files": f"files {settings.get('corpus.paths')}",
                  "hf": f"the dataset {settings.get('corpus.dataset')}"}.get(str(corpus), str(corpus))
        out.append(f"one corpus ({detail}), one tokenizer (byte-level BPE, {settings.get('tokenizer.vocab_size')} "
                   "tokens), one architecture and one learning-rate rule: E, A and B, and possibly the exponents, "
                   "change with any of them")
        if ctx := settings.get("model.context_length"):
            out.append(f"context length {ctx} tokens: loss per token at a short context is higher than at a long "
                       "one, and the gap need not scale the same way")
    elif inputs.fit.data.provenance == Provenance("dataset", "chinchilla"):
        out.append("the points were read off a figure of Hoffmann et al. (Besiroglu et al.'s extraction): their "
                   "precision is that of the plot, and Hoffmann et al.'s runs are not all in it")
    runs = inputs.runs
    if runs is not None and "epochs" in runs:
        ep = pd.to_numeric(runs.epochs, errors="coerce")
        if multi := int((ep > 1.0).sum()):
            out.append(f"{multi} run(s) trained for more than one epoch (up to {float(ep.max()):.3g}): repeated "
                       "tokens are worth less than fresh ones, so their losses are higher than the law's D assumes")
    return out


def provenance(inputs: Inputs, check: Holdout | None, fraction: float | None) -> list[str]:
    """Where each part of the report comes from: the fit, its bootstrap, its hold-out check."""
    fit = inputs.fit
    out = [f"fitted here; `{inputs.fit_command}` writes the same fit.json" if inputs.fitted_here
           else f"fit read from `{inputs.fit_path}`: its numbers are the file's"]
    if fit.resampled is not None:
        where = "this fit's" if inputs.fit_path is None else f"`{samples_path(inputs.fit_path).name}`'s"
        out.append(f"bootstrap distributions: {where} {len(fit.resampled)} resamples (seed {fit.seed})")
    if check is not None:
        top = f"the top {100 * check.fraction:g}% of points by compute (at least one)"
        out.append(f"hold-out: the fit's own, the refit its verdict judged: {top}, refitted from the full fit's "
                   "end points" if check is fit.holdout else
                   f"hold-out: {top} (--holdout-fraction {fraction:g}), refitted here from Hoffmann's 4,500 starts")
    out.append("figures: PNG and SVG beside this report in figures/; the same inputs give byte-identical files")
    return out
