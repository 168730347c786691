"""What `scaling fit`, `plan`, `compare` and the report print of a LawFit: the constants with their
intervals, the plan's rows with theirs, and the verdict with its reasons.

The functions take a `Summarised`: what they read of a fit, as a protocol. A `LawFit` is one, and
`LawFit.summary()` is `format_summary`, so `results.lawfit` imports this module and this module
does not import it back.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Protocol

from scaling.formats import plain_table, sci
from scaling.laws.checks.backtest import Backtest
from scaling.laws.checks.backtest_text import format_backtest, summary_line
from scaling.laws.checks.combined import NAME as MEDIAN
from scaling.laws.checks.cross_forms import Forms, fitted_form, format_forms
from scaling.laws.checks.verdict import PASS, Diagnostics
from scaling.laws.curves.law import DECAY
from scaling.laws.forms.law import PARAM_NAMES, Law
from scaling.laws.optimal.allocation import Allocation, OptimumIntervals, Plan, kaplan_allocation, rule_of_thumb
from scaling.laws.repeated import Repeated, RepeatedPlan

FORMATS = {"E": ".4f", "A": ".4g", "B": ".4g", "alpha": ".4f", "beta": ".4f", "a": ".4f", "b": ".4f",
           "G": ".4g", "tokens_per_param": ".4g"}
SHOWN_DROPPED = 10  # left-out points listed by the summary; fit.json lists them all


class _Points(Protocol):
    """Which points were fitted (`LawFit.data`, a `DataSummary`)."""

    @property
    def source(self) -> str | None: ...
    @property
    def n_points(self) -> int | None: ...
    @property
    def param_convention(self) -> str | None: ...
    @property
    def dropped(self) -> tuple: ...
    @property
    def c_range(self) -> list | None: ...
    @property
    def loss_range(self) -> list | None: ...


class _Intervals(Protocol):
    """How the intervals were drawn (`LawFit.ci`, an `Intervals`)."""

    @property
    def level(self) -> float: ...
    @property
    def n_resamples(self) -> int | None: ...
    @property
    def widened_by(self) -> float: ...


class _Options(Protocol):
    @property
    def n_starts(self) -> int | None: ...
    @property
    def E_prior(self) -> dict | None: ...
    @property
    def fixed_E(self) -> float | None: ...


class Summarised(Protocol):
    """What the summary reads of a fit: the fields of a `LawFit` (scaling.laws.results.lawfit)."""

    @property
    def law(self) -> Law: ...
    @property
    def data(self) -> _Points: ...
    @property
    def options(self) -> _Options: ...
    @property
    def ci(self) -> _Intervals | None: ...
    @property
    def a(self) -> float | None: ...
    @property
    def reference_compute(self) -> float | None: ...
    @property
    def tokens_per_param(self) -> float | None: ...
    @property
    def n_starts_at_optimum(self) -> int | None: ...
    @property
    def residual_rms(self) -> float | None: ...
    @property
    def lack_of_fit(self) -> dict | None: ...
    @property
    def param_conventions(self) -> dict | None: ...
    @property
    def repeated(self) -> Repeated | None: ...
    @property
    def curves(self) -> dict | None: ...
    @property
    def diagnostics(self) -> Diagnostics | None: ...
    @property
    def backtest(self) -> Backtest | None: ...
    @property
    def median_backtest(self) -> Backtest | None: ...
    @property
    def form(self) -> str: ...
    @property
    def forms(self) -> Forms | None: ...

    def interval(self, name: str) -> tuple[float, float] | None: ...


def format_summary(fit: Summarised) -> str:
    """Everything the fit found (`scaling fit --verbose`): the constants with intervals, a, b,
    tokens/param, starts at the optimum, the backtests, the forms, the verdict with every reason."""
    def line(name: str, value: float | None) -> str:
        f = FORMATS[name]
        text = f"  {name:<6} = " + ("undefined" if value is None else f"{value:{f}}")
        if (bounds := fit.interval(name)) is not None:
            text += f"   [{bounds[0]:{f}}, {bounds[1]:{f}}]"
        return text

    d, ci = fit.data, fit.ci
    out = [f"fit of L = E + A/N^alpha + B/D^beta to {d.n_points} points ({d.source}; {len(d.dropped)} left out)"]
    out += [f"  left out {x['id']}: {x['reason']}" for x in d.dropped[:SHOWN_DROPPED]]
    if len(d.dropped) > SHOWN_DROPPED:
        out.append(f"  ... and {len(d.dropped) - SHOWN_DROPPED} more (data.dropped in fit.json)")
    out.append(f"N counts {d.param_convention or 'what the source counts as'} parameters; {fit.law.flops.describe()}")
    widened = f", widened {ci.widened_by:.2f}x by the lack of fit" if ci is not None and ci.widened_by > 1 else ""
    out.append("constants" + (f" with {100 * ci.level:g}% bootstrap intervals ({ci.n_resamples} resamples{widened})"
                               if ci is not None else " (no bootstrap)") + ":")
    for name in PARAM_NAMES:
        out.append(line(name, getattr(fit.law, name)))
    if (prior := fit.options.E_prior) is not None:
        out.append(f"  E under a Gaussian prior, mean {prior['mean']:.4g}, sd {prior['sd']:.3g}"
                   + (f" ({prior['source']})" if prior.get("source") else "") + ", held in every interval")
    out.append("allocation, N_opt ~ C^a and D_opt ~ C^b:")
    for name in ("a", "b"):
        out.append(line(name, getattr(fit, name)))
    # A law written by hand ({"params": ...} alone) has no reference compute, starts or residuals.
    if fit.reference_compute is not None:
        out.append(f"tokens per parameter at C = {fit.reference_compute:.3g} FLOPs:")
        out.append(line("tokens_per_param", fit.tokens_per_param))
    if fit.residual_rms is not None:
        out.append(f"starts at the optimum: {fit.n_starts_at_optimum or 'not recorded'} of "
                   f"{fit.options.n_starts}; residual RMS {fit.residual_rms:.4g} (log loss)")
    if fit.lack_of_fit is not None:
        out.append(format_lack_of_fit(fit.lack_of_fit))
    out += format_conventions(fit)
    out += format_repeated(fit)
    out += format_curves(fit)
    out += format_backtests(fit)
    out += format_form(fit)
    out += format_verdict(fit)
    return "\n".join(out)


def format_backtests(fit: Summarised) -> list[str]:
    """The backtest's lines (`format_backtest`); where the median of the forms predicts (the default),
    its own line first, what the verdict judges, then the fitted law's cuts, labelled as its."""
    if fit.backtest is None:
        return []
    lines = format_backtest(fit.backtest)
    if (median := fit.median_backtest) is None:
        return lines
    own = summary_line(median).removeprefix("backtest: ") + (" (under its own rule, learned from these cuts)"
                                                              if median.made else "")
    return [f"backtest of the median of the forms (which predicts): {own}", f"backtest of the "
            f"{fitted_form(fit.options.fixed_E)} form's law (the constants and allocation above): "
            f"{lines[0].removeprefix('backtest: ')}", *lines[1:]]


def format_form(fit: Summarised) -> list[str]:
    """The forms side by side (`cross_forms.format_forms`) and, where `--form` chose one other than the
    fitted law's, what predict and plan use."""
    if fit.forms is None:
        return []
    out = format_forms(fit.forms)
    fitted = fitted_form(fit.options.fixed_E)
    if fit.form == MEDIAN:
        out.append(f"form: median (--form): predict and plan use the geometric median of the forms' losses, one "
                   "surface: its backtest's interval (beyond the data never narrower than the "
                   f"{fitted} law's own estimation error), and plans by its own optimum; the constants above and the "
                   f"diagnostics are the {fitted} form's, but for the verdict's backtest check, the median's own")
    elif fit.form != fitted:
        out.append(f"form: {fit.form} (--form): predict and plan use its law; the constants above, the diagnostics "
                   f"and the verdict are the {fitted} form's")
    return out


def format_lack_of_fit(lof: dict) -> str:
    """One line: the lack-of-fit F-tests' p-values and, with replicates, their scatter (pure error)
    beside the residual RMS."""
    tests = ", ".join(f"by {t['by']} p = {t['p_value']:.2g}" for t in lof["tests"] if t.get("p_value") is not None)
    line = f"lack of fit: {tests or 'no grouping of two points or more to test'}"
    if lof.get("interval_factor", 1.0) > 1.0:
        line += f"; intervals widened {lof['interval_factor']:.2f}x for the errors shared within groups"
    if lof.get("pure_error_rms") is not None:
        line += (f"; scatter between replicates {lof['pure_error_rms']:.4g} at {lof['replicated_cells']} (N, D) "
                 f"points trained more than once, against the residual RMS {lof['residual_rms']:.4g}")
    return line


def format_repeated(fit: Summarised) -> list[str]:
    """The data-constrained fit, where runs repeat data: R_D* and the base constants."""
    r = fit.repeated
    if r is None:
        return []
    out = [f"data-constrained law (Muennighoff et al. 2023; {r.n_repeated} runs repeat data, up to "
           f"{r.max_epochs:.2f} epochs of {sci(r.unique_range[0])}"
           + (f" to {sci(r.unique_range[1])}" if r.unique_range[1] != r.unique_range[0] else "")
           + " unique tokens):"]
    if r.law.r_d_star is None:
        return out + [f"  {r.message}"]
    base = r.law.base
    out.append(f"  R_D*   = {with_interval(r.law.r_d_star, r.interval('r_d_star'), '.3g')}   (a token seen for the "
               "k-th time is worth exp(-(k-1)/R_D*) of a fresh one)")
    out.append("  base   " + ", ".join(f"{k} {with_interval(getattr(base, k), r.interval(k), FORMATS[k])}"
                                       for k in ("alpha", "beta")) + f"; residual RMS {r.residual_rms:.4g}")
    if r.message:
        out.append(f"  note: {r.message}")
    return out


def format_curves(fit: Summarised) -> list[str]:
    """The law fitted to the training curves (`scaling fit --curves`) beside the final-loss fit, and
    the curve law's leave-one-run-out error of final losses."""
    c = fit.curves
    if c is None:
        return []
    ci = c["ci"] or {}
    out = [f"fitted to the training curves (Tissue et al.'s curve law per size, {len(c['sizes'])} sizes; "
           + (f"{100 * ci['level']:g}% intervals from {ci['n_resamples']} resamples of whole runs):"
              if ci else "no resamples):")]
    for name, key, f in (("a", "a", ".4f"), ("tokens per parameter", "tokens_per_param", ".4g")):
        mine = c["allocation"]["a"] if key == "a" else c["tokens_per_param_at_reference"]
        final = fit.a if key == "a" else fit.tokens_per_param
        out.append(f"  {name:<20} curves {with_interval(mine, ci.get(key), f)}   "
                   f"final losses {with_interval(final, fit.interval(key), f)}")
    rms = [size["law"]["rms"] for size in c["sizes"]]
    out.append(f"  curve laws: {sum(size['law']['n_points'] for size in c['sizes'])} evaluations past the warmup, "
               f"residual RMS {min(rms):.3g} to {max(rms):.3g} (loss) by size; L(N, D) to their final losses "
               f"residual RMS {c['residual_rms']:.4g} (log loss)")
    out.append(f"  annealing momentum lambda {c['decay']:g}" + _decay_profile(c.get("decay_profile")))
    differ = [s for s in c["sizes"] if s.get("warmup_steps") and s["warmup_steps"][0] != s["warmup_steps"][1]]
    if differ:
        out.append(f"  warning: {len(differ)} of {len(c['sizes'])} sizes' runs warm up over different numbers of steps "
                   f"(" + ", ".join(f"{s['warmup_steps'][0]}-{s['warmup_steps'][1]}" for s in differ)
                   + "); the curve law assumes a size's runs share their early training (one warmup, as WSD's)")
    loo = c["leave_one_run_out"]
    if loo["n_runs"]:
        out.append(f"  leave one run out: final loss predicted from its size's other runs within "
                   f"{100 * loo['mean_abs_error']:.2f}% on average (median {100 * loo['median_abs_error']:.2f}%, "
                   f"bias {100 * loo['mean_error']:+.2f}%, "
                   f"worst {100 * loo['max_abs_error']:.2f}%, {loo['n_runs']} runs)")
        out.append("  " + "; ".join(f"{part['n_runs']} runs {where} their size's other runs' reach: "
                                    + ("-" if part["mean_abs_error"] is None else
                                       f"{100 * part['mean_abs_error']:.2f}% on average")
                                    for where, part in loo["by_reach"].items()))
    else:
        out.append("  leave one run out: no size has two runs with curves")
    return out


def _decay_profile(profile: Iterable[tuple[float, float]] | None) -> str:
    """How the curve laws' lambda was chosen: fixed, or fitted against Tissue et al.'s."""
    if not profile:
        return " (fixed)"
    rms = dict(profile)
    best = min(rms, key=rms.__getitem__)
    return (f", fitted: the curve laws' residual RMS {rms[best]:.4g} (loss), "
            f"{rms.get(DECAY, math.nan):.4g} at Tissue et al.'s {DECAY:g}")


def with_interval(value: float | None, bounds: Sequence[float | None] | None, f: str) -> str:
    text = "undefined" if value is None else format(value, f)
    if not bounds or None in bounds:
        return text
    if not all(math.isfinite(b) for b in bounds if b is not None):
        return text + " [not determined]"
    return text + f" [{bounds[0]:{f}}, {bounds[1]:{f}}]"


def format_conventions(fit: Summarised) -> list[str]:
    """The allocation with N counted each way (total and non-embedding), where both were fitted."""
    if not fit.param_conventions:
        return []
    out = ["N counted each way (the fit above counts " + f"{fit.data.param_convention}):"]
    for name, c in sorted(fit.param_conventions.items()):
        if "reason" in c:
            out.append(f"  {name:<13} no fit: {c['reason']}")
            continue
        out.append(f"  {name:<13} a = {with_interval(c['a'], c['a_ci'], '.3f')}, tokens per parameter "
                   f"{with_interval(c['tokens_per_param'], c['tokens_per_param_ci'], '.3g')} "
                   f"({c['n_resamples']} resamples)")
    return out


CLOSE_MARGIN = 0.2     # a passing check within 20% of its caution threshold is named as close


def _how_far_tested(fit: Summarised) -> str:
    """The verdict line's end: how far beyond its data the law that predicts was tested. The
    median of the forms (the default) cuts at 3x and more; where it could make no cut, the fitted
    law's own backtest may still have tested it nearer (2x), and the line says both (the demo's:
    "the median of the forms (which predicts) not tested beyond its data; the chinchilla form's law
    alone tested 2x beyond its fitted compute")."""
    check = next((c for c in fit.diagnostics.checks if c.name == "backtest"), None) if fit.diagnostics else None
    if check is not None and check.value is not None:
        return f"; {check.reason.split(':')[0]}"
    if fit.backtest is None:
        return ""
    law = fit.backtest.farthest
    if fit.median_backtest is None or law is None:
        return "; not tested beyond its data"
    return (f"; the median of the forms (which predicts) not tested beyond its data; the "
            f"{fitted_form(fit.options.fixed_E)} form's law alone tested {law.factor:g}x beyond its fitted compute")


def format_verdict(fit: Summarised) -> list[str]:
    """'verdict: ...' and its reasons, one line each; for a fit.json written before the
    diagnostics, a line saying there is none."""
    if fit.diagnostics is None:
        return ["verdict: none recorded (this fit.json predates the diagnostics; refit it for one)"]
    d = fit.diagnostics
    n_fail = len(d.failing())
    out = [f"verdict: {d.verdict.upper()} ({n_fail} of {len(d.checks)} checks did not pass"
           + (")" if n_fail else "; see 'diagnostics' in fit.json)") + _how_far_tested(fit)]
    out += [f"  {reason}" for reason in d.reasons]
    close = [c for c in d.checks if c.status == PASS and c.margin is not None and c.margin < CLOSE_MARGIN]
    if close:
        out.append("  close to a threshold (another seed or a few more runs could move the verdict): "
                   + "; ".join(f"{c.reason} ({c.threshold.split(' (')[0]}, margin {c.margin:.0%})"
                               for c in sorted(close, key=lambda c: c.margin)))
    return out


def verdict_line(fit: Summarised) -> str:
    """The verdict in one line, for a command that prints numbers drawn from a fit (`format_verdict`
    and `scaling fit`'s summary give the reasons)."""
    if fit.diagnostics is None:
        return "verdict: none recorded (this fit.json predates the diagnostics; refit it for one)"
    d = fit.diagnostics
    n_fail = len(d.failing())
    return (f"verdict: {d.verdict.upper()}"
            + (f" ({n_fail} of {len(d.checks)} checks did not pass; the fit's summary gives the reasons)"
               if n_fail else ""))


def verdict_preamble(fit: Summarised) -> list[str]:
    """What a command prints before any number drawn from a fit: its verdict in one line (the
    reasons are the fit's summary's, not repeated atop every command), and for a law the data do
    not determine, that the numbers are not a recommendation."""
    out = [verdict_line(fit)]
    if fit.diagnostics is not None and fit.diagnostics.verdict == "not identified":
        out.append("The data do not determine this law: the numbers below are what it says, not a recommendation.")
    return out


class _Predicting(Protocol):
    """What `plan_rows` reads of a fit: its law (the compute count) and the loss it predicts."""

    @property
    def law(self) -> Law: ...

    def expected_loss(self, n: float, d: float) -> float: ...


def plan_rows(fit: _Predicting, plan: Plan) -> list[Allocation]:
    """A fit's plan at one budget as the rows `scaling plan` and the report print: its optimum (N, D
    and loss from `LawFit.plan`), then the 20-tokens rule and Kaplan's split in the fit's compute
    count, each loss as the fit predicts it."""
    c = float(plan.compute)
    rules = (rule_of_thumb(c, law=fit.law), kaplan_allocation(c, law=fit.law))
    best = Allocation("law", c, float(plan.n), float(plan.d), float(plan.loss))
    return [best, *(replace(a, loss=float(fit.expected_loss(a.n, a.d))) for a in rules)]


def allocation_row(a: Allocation, iv: OptimumIntervals | None) -> list[str]:
    """A plan's table row (C, allocation, N, D, D/N, loss); the law's optimum carries its 95%
    intervals when there are any (`LawFit.optimum_at`)."""
    own = iv if a.method == "law" else None    # only the law's own optimum has intervals

    def cell(value: float | None, fmt: str, bounds_of: str, bounds_fmt: str = ".3g") -> str:
        text = "-" if value is None else format(value, fmt)
        if own is not None:
            lo, hi = getattr(own, bounds_of)
            text += f" [{lo:{bounds_fmt}}, {hi:{bounds_fmt}}]" if math.isfinite(lo) else \
                f" [no interval: {own.n_undefined} of {own.n_resamples} resamples have no allocation]"
        return text

    return [sci(a.compute), "law optimum" if a.method == "law" else a.method,
            cell(a.n, ".4g", "n"), cell(a.d, ".4g", "d"), cell(a.tokens_per_param, ".3g", "tokens_per_param"),
            cell(a.loss, ".4f", "loss", ".4f")]


def _cell(value: float | None, intervals: dict | None, key: str, fmt: str = ".3g") -> str:
    """A value, and its interval `intervals[key]` where there is one."""
    bounds = "" if intervals is None else f" [{intervals[key][0]:{fmt}}, {intervals[key][1]:{fmt}}]"
    return format(value, fmt) + bounds


def format_repeated_plan(plan: RepeatedPlan) -> list[str]:
    """The plan with only U unique tokens: N, D, epochs and the loss it costs, per budget."""
    out = [f"with {sci(plan.unique)} unique tokens (data-constrained law, R_D* = {plan.law.r_d_star:.3g}"
           + (f", R_N* = {plan.law.r_n_star:.3g}" if plan.law.r_n_star is not None else "") + f": {plan.source}):"]
    rows = [[sci(a.compute), _cell(a.n, iv, "n", ".4g"), _cell(a.d, iv, "d", ".4g"), _cell(a.epochs, iv, "epochs"),
             _cell(a.loss, iv, "loss", ".4f"), _cell(a.loss_lost, iv, "loss_lost", ".4f"),
             f"{a.unconstrained.n:.4g} on {a.unconstrained.d:.4g}"] for a, iv in zip(plan.allocations, plan.intervals)]
    out.append(plain_table(["C (FLOPs)", "N (params)", "D (tokens)", "epochs", "loss", "loss lost",
                            "unlimited data: N on D"], rows, n_left=1))
    out.append("loss lost: above the same law's optimum with unlimited unique data" +
               ("; [lo, hi]: 95% over the bootstrap's laws (the loss's without the runs' scatter)"
                if any(plan.intervals) else "; no intervals: a published R_D*, no bootstrap"))
    iv = plan.intervals[0] if plan.intervals else None
    bounds = "" if iv is None else " [{:.3g}, {:.3g}]".format(*iv["diminishing_epochs"])
    out.append(f"more epochs stop paying beyond {plan.diminishing_epochs:.3g}{bounds} epochs: a token seen more "
               "often is worth less than 1/e of a fresh one (1 + R_D*)")
    return out
