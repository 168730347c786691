"""Other law forms beside the fitted one: each fitted, bootstrapped and backtested the same way, their
predictions at the target compute set side by side, and a caution where they disagree beyond their
intervals.

    forms = cross_check(data, result, samples, future, headline="chinchilla", target_compute=C)
    forms.entry("kaplan").prediction["loss"], forms_check(forms), format_forms(forms)

Why: no one form wins across the public tables (docs/fitting.md: the forms' leave-future-out errors
on the development half), so a prediction far beyond the data is only as good as the form is right,
and the fit cannot tell from its own runs which is. Where forms that all describe the runs predict
different losses for the target run, beyond what each one's interval allows, the form is a choice
the data do not make: the summary says so (a CAUTION, never a FAIL).

Each form (`scaling.laws.forms.catalog`) is fitted by `scaling.laws.fitting.forms` (Huber on log
residuals, multistart L-BFGS) to the runs the fit's backtest predicts beyond the data with (at least
`backtest.UNDERTRAINED_TPP` tokens per parameter, where enough are), bootstrapped with
CROSS_CHECK_RESAMPLES Bayesian-bootstrap resamples (fewer than the fit's own, to bound the cost),
and backtested by `backtest.cut_with` at 3x, 10x and 30x (FACTORS), each cut's refit starting from
the form's end points and every CUT_STARTS-th start of its grid. A form's prediction at a run `x` decades of
compute beyond the fitted runs is its law moved by the bias its own cuts measured, with an interval
of its resamples' spread and the error's growth with distance (`extrapolation.learn_extrapolation`).
The fitted form's own entry is the fit's: its constants, its bootstrap and its backtest (the refits'
raw errors, as every form's are shown). The fixed-E form pins E at the full table's Chinchilla fit's:
its backtest is then an oracle (that E saw the runs its cuts predict), said in its description.
Pure: points in, numbers out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt

from scaling.errors import UsageError
from scaling.laws.checks import backtest as bt
from scaling.laws.checks import combined as cb
from scaling.laws.checks import extrapolation as xp
from scaling.laws.checks.backtest_text import pct
from scaling.laws.checks.verdict import CAUTION, PASS, Check
from scaling.laws.fitting import fit as fitting
from scaling.laws.fitting.fitdata import FitData
from scaling.laws.fitting.forms import FormFit, bootstrap_form, fit_form
from scaling.laws.fitting.quantiles import normal_quantile
from scaling.laws.forms import catalog
from scaling.laws.forms.fixed_e import FROM_TABLE, FROM_USER
from scaling.laws.forms.form import Form, FormLaw, optimum
from scaling.laws.forms.law import PARAM_NAMES
from scaling.laws.optimal import allocation
from scaling.train.compute import FlopsPerToken

CROSS_CHECK_RESAMPLES = 100    # per cross-check form; the fitted form keeps the fit's own bootstrap
HEADLINE_RESAMPLES = 400       # a form chosen by --form other than the default's (its plan's intervals)
# A form is compared only where it describes the runs about as well as the fitted form: its residual
# RMS at most this many times the fitted form's. A form that misfits the runs (Kaplan's, without E,
# on a sweep that flattens) differs from it already inside the data: its backtest says so, and its
# difference beyond them is no evidence that the form is a choice the data leave open.
DESCRIBES_RATIO = 1.5
CUT_STARTS = 24                # a cut's refit starts from the form's end points and every 24th start of its grid
# A form's cuts: the factors the public tables' figures are given at (docs/fitting.md), not the 2x the
# fit's own backtest adds; a cut's refit polishes its best end point only. Both bound the cost.
FACTORS = (3.0, 10.0, 30.0)


@dataclass(frozen=True)
class FormEntry:
    """One form beside the others: its constants (`params`, None where it could not be fitted, then
    `reason`), residual RMS, backtest cuts (each refit's own errors) and the extrapolation rule they
    give, its prediction {"loss", "lo", "hi"} for the target run and its own optimum {"n", "d",
    "loss"} (or {"reason"}) at the target compute. `samples`: resampled constants (columns named by
    `sample_names`), kept for every form but the fitted one (whose resamples are the fit's own bootstrap,
    `LawFit.resampled`): `predict` and `plan` draw the intervals of the form `--form` chose from them,
    the report each form's prediction interval along compute."""

    name: str
    description: str
    params: dict | None = None
    residual_rms: float = 0.0
    n_resamples: int = 0
    cuts: tuple = ()
    extrapolation: xp.Extrapolation | None = None
    prediction: dict | None = None
    optimum: dict | None = None
    samples: tuple = ()
    sample_names: tuple = ()
    reason: str | None = None

    @property
    def law(self) -> FormLaw:
        if self.params is None:
            raise UsageError(f"the {self.name} form could not be fitted ({self.reason}), so it has no law to predict "
                             "or plan with: refit with another --form")
        return catalog.law_of(self.name, self.params)

    @property
    def oracle(self) -> bool:
        """The fixed-E form at the full table's E: not a rival prediction (its E is the fit's own), a
        measure of what knowing E is worth; the caution leaves it out."""
        return FROM_TABLE in self.description

    @property
    def farthest(self) -> bt.Cut | None:
        return bt.farthest(self.cuts)

    def sample_laws(self) -> list[FormLaw]:
        return [catalog.law_of(self.name, dict(zip(self.sample_names, row))) for row in self.samples]

    def predict(self, n: npt.ArrayLike, d: npt.ArrayLike, far: npt.ArrayLike, *, level: float, noise: bool,
                laws: list[FormLaw] | None = None, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(center, lo, hi) for runs N, D lying `far` decades beyond the fitted compute: the law moved
        by its backtest's bias, the interval the resamples' spread (`laws`, default `sample_laws`)
        and, with `noise`, a run's scatter (the residual RMS), widened by the error's growth with
        distance: a prediction interval, as `LawFit.predict`'s. Without `noise`, the expected loss's."""
        rule = self.extrapolation or xp.PRIOR
        x = np.maximum(np.asarray(far, dtype=float), 0.0)
        center = np.asarray(self.law.loss(n, d), dtype=float) * np.exp(rule.bias * x)
        laws = self.sample_laws() if laws is None else laws
        z = normal_quantile(0.5 + level / 2.0)
        spread = z * self.residual_rms if noise else 0.0
        if laws:
            jitter = np.exp(self.residual_rms * np.random.default_rng(seed).standard_normal(len(laws))) if noise \
                else np.ones(len(laws))
            with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
                logs = np.log([np.asarray(law.loss(n, d), dtype=float) * j for law, j in zip(laws, jitter)])
            lo, hi = np.nanpercentile(logs, (50 * (1 - level), 50 * (1 + level)), axis=0)
            spread = (hi - lo) / 2.0
        half = np.hypot(spread, z * rule.growth * x)
        return center, center * np.exp(-half), center * np.exp(half)

    def to_json(self) -> dict:
        return {"name": self.name, "description": self.description, "params": self.params,
                "residual_rms": self.residual_rms, "n_resamples": self.n_resamples,
                "cuts": [c.to_json() for c in self.cuts],
                "extrapolation": None if self.extrapolation is None else self.extrapolation.to_json(),
                "prediction": self.prediction, "optimum": self.optimum,
                "samples": [list(row) for row in self.samples], "sample_names": list(self.sample_names),
                "reason": self.reason}

    @classmethod
    def from_json(cls, obj: dict) -> FormEntry:
        rule = obj.get("extrapolation")
        return cls(str(obj["name"]), str(obj.get("description", "")), obj.get("params"),
                   float(obj.get("residual_rms") or 0.0), int(obj.get("n_resamples") or 0),
                   tuple(bt.Cut.from_json(c) for c in obj.get("cuts") or ()),
                   None if rule is None else xp.Extrapolation.from_json(rule), obj.get("prediction"),
                   obj.get("optimum"), tuple(tuple(float(v) for v in row) for row in obj.get("samples") or ()),
                   tuple(str(k) for k in obj.get("sample_names") or ()), obj.get("reason"))


@dataclass(frozen=True)
class Forms:
    """The forms side by side: `headline` the one the fit reports (`--form`), the target run (N, D)
    the optimum at `target_compute` of `planner` (the headline form, or under `median` the fitted
    form), `beyond` decades of compute past the largest fitted run; `combined` the median of the
    forms (`checks.combined`), None where fewer than two forms could be fitted."""

    headline: str
    target_compute: float
    target: dict | None            # {"n", "d"}, or None where the planning form has no optimum there
    beyond: float
    level: float
    entries: tuple
    combined: cb.Combined | None = None
    planner: str = ""              # "": the headline

    def entry(self, name: str) -> FormEntry | None:
        return next((e for e in self.entries if e.name == name), None)

    @property
    def planning(self) -> str:
        """The form whose optimum the target run is: the headline's, or the fitted form's under `median`."""
        return self.planner or self.headline

    def to_json(self) -> dict:
        return {"headline": self.headline, "target_compute": self.target_compute, "target": self.target,
                "beyond": self.beyond, "level": self.level, "entries": [e.to_json() for e in self.entries],
                "combined": None if self.combined is None else self.combined.to_json(), "planner": self.planner}

    @classmethod
    def from_json(cls, obj: dict) -> Forms:
        combined = obj.get("combined")
        return cls(str(obj["headline"]), float(obj["target_compute"]), obj.get("target"), float(obj["beyond"]),
                   float(obj["level"]), tuple(FormEntry.from_json(e) for e in obj["entries"]),
                   None if combined is None else cb.Combined.from_json(combined), str(obj.get("planner") or ""))


def _cut_starts(form: Form, fit: FormFit) -> np.ndarray:
    """A cut's refit starts: the full fit's distinct end points and every CUT_STARTS-th start of the grid
    (a cut's optimum can lie far from the full fit's: E moves)."""
    return np.vstack([fit.end_points, form.starts()[::CUT_STARTS]])


def _raw(cut: bt.Cut) -> bt.Cut:
    """A backtest cut as every form's is shown: the refit's own errors, no interval."""
    return replace(cut, errors=cut.raw_errors or cut.errors, raw_errors=(), covered=None, half_widths=())


def fitted_entry(form: Form, base: FitData, *, resamples: int, seed: int,
                 prior: xp.Extrapolation = xp.PRIOR) -> FormEntry:
    """`form` fitted to `base`, bootstrapped (`resamples`, kept in `samples`) and backtested at
    FACTORS, its rule beyond the data learned with the fallback `prior` (`xp.fallback`: the
    table's, as the Chinchilla fit's); an entry with `reason` where the points do not determine it."""
    entry = FormEntry(form.name, form.describe())
    try:
        fit = fit_form(form, base.n, base.d, base.loss)
    except UsageError as exc:
        return replace(entry, reason=str(exc))
    law = fit.law
    if not all(math.isfinite(v) for v in law.to_dict().values()):
        return replace(entry, reason="the fit runs off to constants beyond a float: the points do not bound it")
    starts = _cut_starts(form, fit)
    cuts = tuple(_finite(bt.cut_with(base, f, lambda n, d, loss: fit_form(form, n, d, loss, starts=starts,
                                                                          n_polish=1))[0]) for f in FACTORS)
    thetas = bootstrap_form(fit, base.n, base.d, base.loss, n_resamples=resamples, seed=seed) if resamples else ()
    names = list(law.to_dict())
    rows = (tuple(float(form.law(t).to_dict()[k]) for k in names) for t in thetas)
    samples = tuple(row for row in rows if all(map(math.isfinite, row)))    # an overflowed resample predicts nothing
    return replace(entry, params=law.to_dict(), residual_rms=fit.residual_rms, n_resamples=len(samples),
                   cuts=cuts, extrapolation=xp.learn_extrapolation(cuts, prior, noise=fit.residual_rms),
                   samples=samples, sample_names=tuple(names))


def fitted_form(fixed_E: float | None) -> str:
    """The form a Chinchilla fit is of: fixed-E where its E was pinned (`fixed_E`), else chinchilla."""
    return "fixed-E" if fixed_E is not None else catalog.DEFAULT


def _finite(cut: bt.Cut) -> bt.Cut:
    """A cut whose refit predicts a loss that is not a float (a constant run off) as one not made."""
    if cut.made and not np.all(np.isfinite(cut.errors)):
        return replace(cut, reason="the refit below the cut predicts no finite loss", errors=(), distances=())
    return cut


def main_entry(result: fitting.FitResult, resampled: np.ndarray | None, future: bt.Backtest | None) -> FormEntry:
    """The fitted form's own entry (Chinchilla's, or fixed-E's where E was given): the fit's constants,
    its backtest's law and rule (the cuts' raw errors), its bootstrap's resamples."""
    form = catalog.get(fitted_form(result.fixed_E), E=result.fixed_E)
    law = result.law if future is None or future.law is None else future.law
    rows = () if resampled is None else tuple(tuple(float(v) for v in row) for row in resampled)
    return FormEntry(form.name, form.describe(), {k: float(v) for k, v in law.to_dict().items()},
                     result.residual_rms if future is None else future.extrapolation.noise, len(rows),
                     () if future is None else tuple(_raw(c) for c in future.cuts),
                     None if future is None else future.extrapolation, samples=rows, sample_names=PARAM_NAMES)


def trained_base(data: FitData) -> FitData:
    """The runs the backtest predicts beyond the data with: at least UNDERTRAINED_TPP tokens per
    parameter, where enough runs have that many (`backtest.backtest`'s rule)."""
    runs = bt.trained(data, np.arange(len(data)))
    return data if runs.size == len(data) or bt.too_small(data, runs) else data.take(runs)


def _own_optimum(entry: FormEntry, compute: float) -> dict:
    try:
        n, d, loss = optimum(entry.law, compute)
    except ValueError as exc:
        return {"reason": str(exc)}
    return {"n": n, "d": d, "loss": loss}


def cross_check(data: FitData, result: fitting.FitResult, resampled: np.ndarray | None, future: bt.Backtest | None,
                *, headline: str = catalog.DEFAULT, target_compute: float, seed: int = 0, level: float = xp.LEVEL,
                resamples: int = CROSS_CHECK_RESAMPLES, headline_resamples: int = HEADLINE_RESAMPLES) -> Forms:
    """Every form fitted beside the fit (`result`, its bootstrap's constants `resampled` (R, 5) and
    its backtest `future`), and their predictions for the headline form's optimal run at
    `target_compute` (see the module's docstring). `headline`: the form `--form` chose (`median`:
    the median of the forms, `checks.combined`, for the fitted form's optimal run)."""
    mine = main_entry(result, resampled, future)
    planner = mine.name if headline == cb.NAME else headline
    base = trained_base(data)
    prior = xp.fallback(bt.median_tpp(data, np.arange(len(data))))     # the Chinchilla fit's fallback
    entries = []
    for name in catalog.FORMS:
        if name == mine.name:
            entries.append(mine)
            continue
        if name == "fixed-E" and not (math.isfinite(result.law.E) and result.law.E > 0):
            entries.append(FormEntry(name, "E pinned at the full table's fit",
                                     reason=f"the fit's E is {result.law.E:.3g}: nothing to pin E at"))
            continue
        form = catalog.get(name, E=result.law.E, source=FROM_TABLE) if name == "fixed-E" else catalog.get(name)
        entry = fitted_entry(form, base, resamples=headline_resamples if name == headline else resamples, seed=seed,
                             prior=prior)
        entries.append(entry)
    own: dict[str, dict] = {e.name: _own_optimum(e, target_compute) if e.params is not None else {"reason": e.reason}
                            for e in entries}
    target = own[planner] if "n" in own[planner] else None
    far = xp.distance(target_compute, float(data.compute.max()))
    done = []
    for e in entries:
        prediction = None
        if target is not None and e.params is not None:
            center, lo, hi = e.predict(target["n"], target["d"], far, level=level, noise=True, seed=seed)
            prediction = {"loss": float(center), "lo": float(lo), "hi": float(hi)}
        keep = e.name != mine.name          # the fitted form's resamples are the fit's bootstrap, kept beside it
        done.append(replace(e, prediction=prediction, optimum=own[e.name], samples=e.samples if keep else (),
                            sample_names=e.sample_names if keep else ()))
    combined = cb.combine(done)
    if combined is not None and target is not None:
        loss, lo, hi = combined.predict(done, target["n"], target["d"], far, floor=future, level=level)
        combined = replace(combined, prediction={"loss": loss, "lo": lo, "hi": hi})
    return Forms(headline, float(target_compute), None if target is None else {"n": target["n"], "d": target["d"]},
                 far, level, tuple(done), combined, planner if planner != headline else "")


def forms_check(forms: Forms) -> Check:
    """CAUTION where another form's prediction for the target run lies outside the headline form's
    prediction interval, or the headline's outside the other's: forms that describe the same runs
    about as well (residual RMS within DESCRIBES_RATIO of the headline's; the fixed-E oracle aside)
    disagree about the run by more than either one's interval allows, and the prediction depends on
    the form. Never a FAIL: either may be the right one (each form's backtest, beside it, is the
    evidence). Where every form's interval grows with the distance as its own backtest says, forms
    far beyond the data mostly stay within each other's; the caution marks where they do not."""
    threshold = (f"every form describing the runs (residual RMS <= {DESCRIBES_RATIO:g}x the fitted form's): its "
                 f"prediction for the target run inside the fitted form's {100 * forms.level:g}% prediction interval, "
                 "and the fitted form's inside its")
    head = forms.entry(forms.planning)
    mine = None if head is None else head.prediction
    others = [e for e in forms.entries if e.name != forms.planning and e.prediction is not None and not e.oracle
              and head is not None and e.residual_rms <= DESCRIBES_RATIO * head.residual_rms]
    if mine is None or not others:
        return Check("forms_agree", None, threshold, PASS, "not compared (no target run, or no other form that "
                     f"describes the runs within {DESCRIBES_RATIO:g}x the fitted form's residual RMS)")
    gap = max(abs(e.prediction["loss"] / mine["loss"] - 1.0) for e in others)
    apart = [e for e in others if not (mine["lo"] <= e.prediction["loss"] <= mine["hi"]
                                       and e.prediction["lo"] <= mine["loss"] <= e.prediction["hi"])]
    where = f"at C = {forms.target_compute:.3g} FLOPs" + (f", {10 ** forms.beyond:.3g}x beyond the fitted runs"
                                                          if forms.beyond > 0 else "")
    if apart:
        return Check("forms_agree", gap, threshold, CAUTION,
                     f"the law's forms disagree {where}: {forms.planning} predicts {mine['loss']:.4f} "
                     f"[{mine['lo']:.4f}, {mine['hi']:.4f}], "
                     + ", ".join(f"{e.name} {e.prediction['loss']:.4f} [{e.prediction['lo']:.4f}, "
                                 f"{e.prediction['hi']:.4f}]" for e in apart)
                     + ": the prediction depends on the form (each form's backtest is in the summary's forms table)")
    return Check("forms_agree", gap, threshold, PASS,
                 f"the {len(others) + 1} forms describing the runs agree {where} within their intervals "
                 f"(largest gap {gap:.1%})")


def format_forms(forms: Forms) -> list[str]:
    """The forms side by side: each one's prediction for the target run with its prediction interval,
    its own optimum at the target compute, and its backtest's median error at its farthest cut."""
    if forms.target is None:
        head = f"forms at C = {forms.target_compute:.3g} FLOPs ({forms.planning} has no optimum there):"
    else:
        head = (f"forms at C = {forms.target_compute:.3g} FLOPs"
                + (f" ({10 ** forms.beyond:.3g}x beyond the fitted runs)" if forms.beyond > 0 else "")
                + f": each one's loss for the {forms.planning} form's optimal run N = {forms.target['n']:.3g}, "
                f"D = {forms.target['d']:.3g} ({100 * forms.level:g}% prediction interval), its own optimum, and its "
                "backtest (the refit's own median error at its farthest cut); every row, the fitted form's "
                f"included, is fitted as the law beyond the data is, to the runs of at least {bt.UNDERTRAINED_TPP:g} "
                "tokens per parameter where enough have as many, so its optimum can differ from the fit's above:")
    out = [head]
    for e in forms.entries:
        mark = "*" if e.name == forms.headline else " "
        if e.params is None:
            out.append(f" {mark}{e.name:<10} not fitted: {e.reason}")
            continue
        p = e.prediction
        loss = "-" if p is None else f"{p['loss']:.4f} [{p['lo']:.4f}, {p['hi']:.4f}]"
        o = e.optimum or {}
        best = (f"N {o['n']:.3g}, D/N {o['d'] / o['n']:.3g}" if "n" in o
                else f"no optimum ({o.get('reason', '-')})")
        cut = e.farthest
        tested = "untested" if cut is None else f"{pct(cut.median_abs_error)} at {cut.factor:g}x"
        out.append(f" {mark}{e.name:<10} {loss}; own optimum {best}; backtest {tested}; "
                   f"residual RMS {e.residual_rms:.3g}")
    if (median := forms.combined) is not None:
        out.append(_combined_row(median, forms))
    fixed = forms.entry("fixed-E")
    if fixed is not None and FROM_USER not in fixed.description:
        out.append("  (fixed-E pins E at the full table's fit: its backtest is an oracle, E having seen the runs "
                   "its cuts predict)")
    return out


def _combined_row(median: cb.Combined, forms: Forms) -> str:
    """The median of the forms as a row of `format_forms`: its prediction, and its backtest as the
    forms' rows show theirs (its members' refits' own errors, `Combined.raw_cuts`)."""
    p = median.prediction
    loss = "-" if p is None else f"{p['loss']:.4f} [{p['lo']:.4f}, {p['hi']:.4f}]"
    cut = bt.farthest(median.raw_cuts(forms.entries))
    tested = "untested" if cut is None else f"{pct(cut.median_abs_error)} at {cut.factor:g}x"
    return (f" {'*' if forms.headline == cb.NAME else ' '}{cb.NAME:<10} {loss}; the geometric median of "
            f"{', '.join(median.members)}; backtest {tested}")


def form_plan(entry: FormEntry, compute: float, far: float, *, level: float, seed: int = 0,
              flops: FlopsPerToken | None = None) -> allocation.Plan:
    """The plan of a form chosen by `--form` at one budget: its optimum N, D at `compute` FLOPs along
    the fit's compute curve (`flops`; `optimum`: closed form or numeric; its bias beyond the data is
    one factor all along the curve, so this is the minimum of what it predicts there), the loss it
    predicts `far` decades beyond the data (`FormEntry.predict`, with a run's scatter), and intervals
    of N, D and tokens per parameter over its resamples' optima (none where a resample has no
    optimum, as the Chinchilla form's plan). UsageError where the form has no optimum there."""
    try:
        n, d, _ = optimum(entry.law, compute, flops)
    except ValueError as exc:
        raise UsageError(f"the {entry.name} form: {exc}") from None
    center, lo, hi = entry.predict(n, d, far, level=level, noise=True, seed=seed)
    intervals = None
    laws = entry.sample_laws()
    if laws:
        optima, undefined = [], 0
        for law in laws:
            try:
                optima.append(optimum(law, compute, flops)[:2])
            except ValueError:
                undefined += 1
        ns, ds = np.array(optima, dtype=float).reshape(-1, 2).T
        tails = (50 * (1 - level), 50 * (1 + level))

        def bounds(v: np.ndarray) -> tuple:
            return (math.nan, math.nan) if undefined or not v.size else tuple(float(x) for x in np.percentile(v, tails))

        intervals = allocation.OptimumIntervals(compute, level, bounds(ns), bounds(ds), bounds(ds / ns),
                                                (float(lo), float(hi)), undefined, len(laws))
    return allocation.Plan(compute, n, d, float(center), intervals, law=f"the {entry.name} form's law")
