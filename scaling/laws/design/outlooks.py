"""`scaling.design(configs)`: what `scaling design` does, as one call (docs/api.md).

    d = scaling.design(["configs/a.yaml", "configs/b.yaml"], law="chinchilla", noise=0.005)
    d.outlooks[0].tpp_ratio, d.outlooks[1].tpp_ratio     # each design's tokens-per-parameter hi / lo
    d.to_json()                                          # what `scaling design --json` prints

Each config's planned runs (N counted as the prior counts it, D their tokens) are simulated under
the prior law, refitted and diagnosed (`sweep.expected_precision`), or with `curves` simulated as
training curves and fitted both from every evaluation and from the final losses
(`curves.curve_outlook`). The prior: a fit's Chinchilla-form law (`simulated_prior`) or a
published law (`scaling.laws.results.law_choice`). Pure but for reading the configs and the fit.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from scaling.config import load_config
from scaling.errors import UsageError
from scaling.formats import positive, whole_number
from scaling.laws.curves.law import DECAY, RunSchedule
from scaling.laws.curves.simulate import PlannedCurve
from scaling.laws.design.curves import CurveOutlook, curve_outlook
from scaling.laws.design.simulate import MAX_NOISE, MAX_SIMS
from scaling.laws.design.sweep import Outlook, expected_precision, measured_scatter
from scaling.laws.fitting.bootstrap import MAX_RESAMPLES, MIN_RESAMPLES
from scaling.laws.results.law_choice import LawChoice, choose_law
from scaling.sweeps.plan import plan

if TYPE_CHECKING:
    from scaling.laws.results.lawfit import LawFit


def evaluation_noise(noise: float, run_noise: float) -> float:
    """The part of a final loss's scatter `noise` each evaluation adds, where `run_noise` is shared by
    a whole curve (the two add in quadrature)."""
    return math.sqrt(noise**2 - run_noise**2)


@dataclass(frozen=True)
class Designs:
    """The designs set side by side under one prior: `outlooks[i]` is `configs[i]`'s (`Outlook`s,
    or `CurveOutlook`s with `curves`), simulated `n_sims` times with `bootstrap` resamples each."""

    prior: str                              # the prior law, as its label says it
    noise: float                            # the relative scatter of a final loss
    noise_df: int | None                    # the degrees of freedom it was measured on (None: taken as exact)
    param_convention: str                   # what N counts, as the prior's fit counted it
    n_sims: int
    bootstrap: int
    configs: tuple[str, ...]
    outlooks: tuple[Outlook | CurveOutlook, ...]
    run_noise: float | None = None          # curves: the part of the scatter shared by a whole curve
    anneal: float | None = None             # curves: the loss drop per unit of annealing area
    decay: float | None = None              # curves: the annealing momentum

    @property
    def eval_noise(self) -> float | None:
        """curves: the part of the scatter each evaluation adds (None without curves)."""
        return None if self.run_noise is None else evaluation_noise(self.noise, self.run_noise)

    def to_json(self) -> dict:
        """What `scaling design --json` prints."""
        curves = {} if self.run_noise is None else {"run_noise": self.run_noise, "anneal": self.anneal,
                                                    "decay": self.decay}
        return {"prior": self.prior, "noise": self.noise, **curves, "param_convention": self.param_convention,
                "designs": [{"config": c, **o.to_dict()} for c, o in zip(self.configs, self.outlooks)]}


def planned_points(config: str | Path, param_convention: str) -> np.ndarray:
    """(N, D) of the runs a config would fit: every run but WSD's stable runs (their branches are the points)."""
    runs = [r for r in plan(load_config(config)) if r.kind != "stable"]
    column = "n_params_total" if param_convention == "total" else "n_params_non_embedding"
    return np.array([(getattr(r, column), r.spec.tokens) for r in runs], dtype=float)


def planned_curves(config: str | Path, param_convention: str) -> list[PlannedCurve]:
    """Every run a config would train (WSD stable runs too), as `PlannedCurve`s; a branch logs
    from its branch step, before which its curve is its stable run's."""
    column = "n_params_total" if param_convention == "total" else "n_params_non_embedding"
    return [PlannedCurve(n=getattr(r, column), start=r.spec.branch_step or 0,
                         schedule=RunSchedule(steps=-(-r.spec.tokens // r.spec.train.batch_tokens), lr=r.spec.lr,
                                              train=r.spec.train, warmup=r.spec.warmup, constant=r.kind == "stable"))
            for r in plan(load_config(config))]


def schedule_effect(anneal: float | None, fit: LawFit | None) -> tuple[float, float]:
    """(anneal C, decay) of the simulated curves: `anneal`, or the prior's curve laws' median C."""
    curves = (fit.curves if fit is not None else None) or {}
    decay = float(curves.get("decay", DECAY))
    if anneal is not None:
        if not (math.isfinite(anneal) and anneal >= 0):
            raise UsageError(f"--anneal must be a finite number >= 0; got {anneal!r}")
        return anneal, decay
    if not curves.get("sizes"):
        raise UsageError("--curves needs the schedule effect: a --fit fitted with `scaling fit --curves`, "
                         "or --anneal C")
    return max(float(np.median([s["law"]["C"] for s in curves["sizes"]])), 0.0), decay


def simulated_prior(choice: LawChoice, curves: bool = False) -> LawChoice:
    """The prior as design simulates it, said in its label: a fit's Chinchilla-form law (its constants
    and bootstrap laws), refitted in that form, whose alpha, a, tokens per parameter and verdict the
    outlook reads. That is the law whose allocation the default (the median of the forms) plans by;
    a fit made with `--form kaplan` (tied, farseer) plans and predicts with another law, which design
    does not simulate: the label says so rather than let its widths pass for that form's."""
    fit = choice.fit
    if fit is None:
        return choice
    what = "its Chinchilla-form law, simulated and refitted in that form" + refitted_E(fit, curves)
    if fit.median is not None:
        what += ": the law whose allocation the median of the forms (the default) plans by"
    elif fit.form_entry is not None:
        what += (f"; not the {fit.form} form the fit predicts and plans with (`scaling fit --form {fit.form}`), "
                 "which design does not simulate: these widths are the Chinchilla form's")
    return replace(choice, label=f"{choice.label}: {what}")


def refitted_E(fit: LawFit, curves: bool = False) -> str:
    """How the simulated sweeps treat E, said where the prior fit did not leave it free: pinned, or
    under its prior, as the fit was made (`E_refit`); --curves cannot (the curve fit frees E)."""
    pinned, prior = fit.options.fixed_E, fit.options.E_prior
    if pinned is not None:
        how = f"E pinned at {pinned:.4g}"
    elif prior is not None:
        how = f"the prior on E (mean {prior['mean']:.4g}, sd {prior['sd']:.3g})"
    else:
        return ""
    if curves:
        return f", but with E free: the curve fits cannot hold {how} as the fit did, and the widths are of E free"
    return f", with {how} as the fit was made"


def E_refit(fit: LawFit | None) -> dict:
    """expected_precision's fixed_E and E_prior: the prior fit's own, so its sweeps are refitted as it was."""
    if fit is None:
        return {"fixed_E": None, "E_prior": None}
    prior = fit.options.E_prior
    return {"fixed_E": fit.options.fixed_E, "E_prior": None if prior is None else (prior["mean"], prior["sd"])}


def final_outlooks(configs: Sequence[str | Path], choice: LawChoice, noise: float, noise_df: int | None,
                   convention: str, *, sims: int, bootstrap: int, seed: int) -> list[Outlook | CurveOutlook]:
    """`design` of the final losses: each config's runs simulated, refitted and diagnosed."""
    assert choice.law is not None, "choose_law(parametric=True) refuses a law without L(N, D)"
    outlooks: list[Outlook | CurveOutlook] = []
    for config in configs:
        points = planned_points(config, convention)
        try:
            outlooks.append(expected_precision(points, choice.law, noise=noise, n_sims=sims, bootstrap=bootstrap,
                                               seed=seed, laws=None if choice.fit is None else choice.fit.resampled,
                                               noise_df=noise_df, **E_refit(choice.fit)))
        except UsageError as exc:
            raise UsageError(f"{config}: {exc}") from None
    return outlooks


def curve_outlooks(configs: Sequence[str | Path], choice: LawChoice, noise: float, convention: str, *,
                   anneal: float | None, run_noise: float | None, sims: int, bootstrap: int,
                   seed: int) -> tuple[list[Outlook | CurveOutlook], float, float, float]:
    """`design` with curves: each config fitted from its curves and from its final losses; with the
    scatter shared by a curve, the annealing C and decay simulated."""
    assert choice.law is not None, "choose_law(parametric=True) refuses a law without L(N, D)"
    anneal, decay = schedule_effect(anneal, choice.fit)
    run_noise = noise / math.sqrt(2) if run_noise is None else run_noise
    if not (math.isfinite(run_noise) and 0 <= run_noise <= noise):
        raise UsageError(f"--run-noise must be from 0 to the scatter ({noise:.3g}); got {run_noise!r}")
    outlooks: list[Outlook | CurveOutlook] = []
    for config in configs:
        planned = planned_curves(config, convention)
        try:
            outlooks.append(curve_outlook(choice.law, planned, anneal=anneal, decay=decay,
                                          noise=evaluation_noise(noise, run_noise), run_noise=run_noise,
                                          eval_interval=planned[0].schedule.train.eval_interval,
                                          n_sims=sims, resamples=bootstrap, seed=seed))
        except UsageError as exc:
            raise UsageError(f"{config}: {exc}") from None
    return outlooks, run_noise, anneal, decay


def design(configs: str | Path | Sequence[str | Path], *, fit: LawFit | str | Path | None = None,
           law: str | None = None, noise: float | str | None = None, sims: int = 20, bootstrap: int = 100,
           seed: int = 0, curves: bool = False, anneal: float | None = None,
           run_noise: float | None = None) -> Designs:
    """What each sweep config would determine, before any training, as `scaling design` gives it:
    its runs simulated `sims` times under a prior law, refitted with `bootstrap` resamples each.

        d = scaling.design("configs/tiny.yaml", fit="fits/tiny", sims=5)
        d.outlooks[0].tpp_ratio, d.outlooks[0].not_identified_share

    fit: a LawFit or a fit directory, whose Chinchilla-form law and bootstrap laws are the prior;
    law: a published law instead ("chinchilla", the default, or "besiroglu"). noise: the relative
    scatter of a final loss (default: the fit's, as measured, or 0.01). curves: simulate whole
    training curves and set the curve-based fit beside the final-loss fit (anneal: the loss drop
    per unit of annealing area, default the fit's curve laws'; run_noise: the scatter shared by a
    curve, default scatter / sqrt(2)). A `Designs`; bad input raises UsageError before simulating."""
    choice = simulated_prior(choose_law(fit, law, parametric=True), curves=curves)
    assert choice.law is not None, "choose_law(parametric=True) refuses a law without L(N, D)"
    scatter, scatter_df = measured_scatter(choice.fit)
    if noise is not None:
        scatter, scatter_df = positive(noise, "--noise"), None
        if scatter > MAX_NOISE:
            raise UsageError(f"--noise is a final loss's relative scatter (0.01: 1%), at most {MAX_NOISE:g}; "
                             f"got {noise}")
    limits = (("--sims", sims, 1, MAX_SIMS), ("--bootstrap", bootstrap, MIN_RESAMPLES, MAX_RESAMPLES),
              ("--seed", seed, 0, None))
    for flag, value, least, most in limits:
        whole_number(value, flag, least, most)
    configs = [configs] if isinstance(configs, (str, Path)) else list(configs)
    convention = (choice.fit.data.param_convention if choice.fit is not None else None) or "non_embedding"
    decay: float | None = None
    if curves:
        outlooks, run_noise, anneal, decay = curve_outlooks(configs, choice, scatter, convention, anneal=anneal,
                                                            run_noise=run_noise, sims=sims, bootstrap=bootstrap,
                                                            seed=seed)
        scatter_df = None
    elif anneal is not None or run_noise is not None:
        raise UsageError("--anneal and --run-noise apply to --curves")
    else:
        outlooks = final_outlooks(configs, choice, scatter, scatter_df, convention, sims=sims, bootstrap=bootstrap,
                                  seed=seed)
    return Designs(choice.label, scatter, scatter_df, convention, sims, bootstrap, tuple(str(c) for c in configs),
                   tuple(outlooks), run_noise, anneal, decay)
