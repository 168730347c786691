"""`scaling design CONFIG [CONFIG ...]`: what a sweep would determine, before any training.

    scaling design configs/tiny.yaml --fit fits/tiny        # the fit's Chinchilla-form law and scatter
    scaling design configs/a.yaml configs/b.yaml --law chinchilla --noise 0.005

Each config's planned runs (N counted as the prior counts it, D their tokens) are simulated under
the prior law with log-normal scatter, refitted and diagnosed `--sims` times
(`scaling.laws.design.sweep.expected_precision`); the table sets the designs side by side with their
total compute, so two designs of equal compute can be compared by what they would measure.

    scaling design configs/tiny_wsd.yaml --fit fits/tiny --curves   # every evaluation vs final losses

--curves: each config's runs (a WSD plan's stable runs and branches too) are simulated as training
curves under the prior law and a schedule effect (the prior's curve laws, from `scaling fit
--curves`, or --anneal), and fitted both from every evaluation and from the final losses only, at
the same compute (`scaling.laws.design.curves.curve_outlook`); both tokens-per-parameter intervals
are printed side by side.
"""

from __future__ import annotations

import argparse
import json
import math
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from scaling.cli.law_choice import LawChoice, add_fit_option, choose_law
from scaling.config import load_config
from scaling.errors import UsageError
from scaling.formats import json_safe, plain_table, positive, sci

if TYPE_CHECKING:
    from scaling.laws.results.lawfit import LawFit


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "design", help="the intervals a planned sweep would give, before training",
        description="For each config: simulate its planned runs under a prior law (your fit, or a "
                    "published law) with the given scatter, refit them as `scaling fit` does, and print "
                    "the expected 95% interval widths of alpha, a and tokens per parameter, and how often "
                    "the diagnostics would call the result not identified.")
    p.add_argument("configs", nargs="+", type=Path, metavar="CONFIG", help="sweep YAML(s) to compare")
    add_fit_option(p, "your fit, whose Chinchilla-form law is the prior (a fit folder or its fit.json)",
                   aliases=("--prior",))
    p.add_argument("--law", help="a published law as the prior instead (chinchilla, besiroglu; default chinchilla "
                                 "when --fit is not given)")
    p.add_argument("--noise", help="scatter of final losses, relative (default: the prior fit's residual "
                                   "RMS, or 0.01)")
    p.add_argument("--sims", type=int, default=20, metavar="N", help="simulated sweeps per design (default 20)")
    p.add_argument("--bootstrap", type=int, default=100, metavar="K",
                   help="bootstrap resamples per simulated fit (default 100)")
    p.add_argument("--seed", type=int, default=0, help="seed of the simulations (default 0)")
    p.add_argument("--curves", action="store_true",
                   help="simulate the runs' whole training curves and set the curve-based fit (scaling fit "
                        "--curves) beside the final-loss fit of the same runs, at equal FLOPs")
    p.add_argument("--anneal", type=float, metavar="C",
                   help="--curves: the loss drop per unit of annealing area S2 (default: the median C of the "
                        "prior's curve laws; needed when the prior was not fitted with --curves)")
    p.add_argument("--run-noise", type=float, metavar="S",
                   help="--curves: the part of the scatter shared by a whole curve (a run's seed), relative; "
                        "the rest scatters each evaluation, so a final loss scatters by the scatter (default: "
                        "an equal split, scatter / sqrt(2))")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=cmd_design)


def planned_points(config: Path, param_convention: str) -> np.ndarray:
    """(N, D) of the runs a config would fit: every run but WSD's stable runs (their branches are the points)."""
    from scaling.sweeps.plan import plan

    runs = [r for r in plan(load_config(config)) if r.kind != "stable"]
    column = "n_params_total" if param_convention == "total" else "n_params_non_embedding"
    return np.array([(getattr(r, column), r.spec.tokens) for r in runs], dtype=float)


def planned_curves(config: Path, param_convention: str) -> list:
    """Every run a config would train (WSD stable runs too), as `curve_simulate.PlannedCurve`s;
    a branch logs from its branch step, before which its curve is its stable run's."""
    from scaling.laws.curves.law import RunSchedule
    from scaling.laws.curves.simulate import PlannedCurve
    from scaling.sweeps.plan import plan

    column = "n_params_total" if param_convention == "total" else "n_params_non_embedding"
    return [PlannedCurve(n=getattr(r, column), start=r.spec.branch_step or 0,
                         schedule=RunSchedule(steps=-(-r.spec.tokens // r.spec.train.batch_tokens), lr=r.spec.lr,
                                              train=r.spec.train, warmup=r.spec.warmup, constant=r.kind == "stable"))
            for r in plan(load_config(config))]


def schedule_effect(args: argparse.Namespace, fit: LawFit | None) -> tuple[float, float]:
    """(anneal C, decay) of the simulated curves: --anneal, or the prior's curve laws' median C."""
    from scaling.laws.curves.law import DECAY

    curves = (fit.curves if fit is not None else None) or {}
    decay = float(curves.get("decay", DECAY))
    if args.anneal is not None:
        if not (math.isfinite(args.anneal) and args.anneal >= 0):
            raise UsageError(f"--anneal must be a finite number >= 0; got {args.anneal!r}")
        return args.anneal, decay
    if not curves.get("sizes"):
        raise UsageError("--curves needs the schedule effect: a --fit fitted with `scaling fit --curves`, "
                         "or --anneal C")
    return max(float(np.median([s["law"]["C"] for s in curves["sizes"]])), 0.0), decay


def cmd_curve_design(args: argparse.Namespace, choice: LawChoice, noise: float, convention: str) -> int:
    """--curves: each config fitted from its curves and from its final losses (see module doc)."""
    from scaling.laws.design.curves import curve_outlook

    assert choice.law is not None, "choose_law(parametric=True) refuses a law without L(N, D)"
    anneal, decay = schedule_effect(args, choice.fit)
    run_noise = noise / math.sqrt(2) if args.run_noise is None else args.run_noise
    if not (math.isfinite(run_noise) and 0 <= run_noise <= noise):
        raise UsageError(f"--run-noise must be from 0 to the scatter ({noise:.3g}); got {run_noise!r}")
    eval_noise = math.sqrt(noise**2 - run_noise**2)
    rows = []
    for config in args.configs:
        planned = planned_curves(config, convention)
        try:
            outlook = curve_outlook(choice.law, planned, anneal=anneal, decay=decay, noise=eval_noise,
                                    run_noise=run_noise, eval_interval=planned[0].schedule.train.eval_interval,
                                    n_sims=args.sims, resamples=args.bootstrap, seed=args.seed)
        except UsageError as exc:
            raise UsageError(f"{config}: {exc}") from None
        compute = sum(6.0 * p.n * (p.schedule.steps - p.start) * p.schedule.train.batch_tokens for p in planned)
        rows.append((str(config), compute, outlook))
    if args.json:
        print(json.dumps(json_safe({"prior": choice.label, "noise": noise, "run_noise": run_noise, "anneal": anneal,
                                    "decay": decay, "param_convention": convention,
                                    "designs": [{"config": c, "compute": f, **o.to_dict()} for c, f, o in rows]}),
                         indent=2))
        return 0
    print(f"prior: {choice.label}; scatter {noise:.3g} of a final loss ({run_noise:.3g} shared by each curve, "
          f"{eval_noise:.3g} each evaluation); annealing C {anneal:.3g}, decay {decay:g}; N counted as {convention}; "
          f"{args.sims} simulated sweeps per design, {args.bootstrap} resamples each")
    header = ["design", "runs", "fit points", "compute", "D/N hi/lo curves", "D/N hi/lo final", "a covered"]
    print(plain_table(header, [[c, str(o.n_runs), str(o.n_points), sci(f), f"{o.tpp_ratio['curves']:.3g}",
                                f"{o.tpp_ratio['final']:.3g}",
                                f"{100 * o.a_coverage['curves']:.0f}% / {100 * o.a_coverage['final']:.0f}%"]
                               for c, f, o in rows]))
    print("the same runs fitted from every evaluation of their curves (curves) and from their final losses "
          "(final): medians of the 95% intervals over the simulated sweeps, D/N at each design's largest run; "
          "'a covered' (curves / final): how often a's interval holds the prior's a")
    return 0


def simulated_prior(choice: LawChoice) -> LawChoice:
    """The prior as design simulates it, said in its label: a fit's Chinchilla-form law (its constants
    and bootstrap laws), refitted in that form, whose alpha, a, tokens per parameter and verdict the
    outlook reads. That is the law whose allocation the default (the median of the forms) plans by;
    a fit made with `--form kaplan` (tied, farseer) plans and predicts with another law, which design
    does not simulate: the label says so rather than let its widths pass for that form's."""
    fit = choice.fit
    if fit is None:
        return choice
    what = "its Chinchilla-form law, simulated and refitted in that form"
    if fit.median is not None:
        what += ": the law whose allocation the median of the forms (the default) plans by"
    elif fit.form_entry is not None:
        what += (f"; not the {fit.form} form the fit predicts and plans with (`scaling fit --form {fit.form}`), "
                 "which design does not simulate: these widths are the Chinchilla form's")
    return replace(choice, label=f"{choice.label}: {what}")


def cmd_design(args: argparse.Namespace) -> int:
    from scaling.laws.design.sweep import expected_precision, measured_scatter  # the fitter: after the arguments

    choice = simulated_prior(choose_law(args.fit, args.law, parametric=True))
    law = choice.law
    assert law is not None, "choose_law(parametric=True) refuses a law without L(N, D)"
    fit = choice.fit
    noise, noise_df = measured_scatter(fit)
    if args.noise is not None:
        noise, noise_df = positive(args.noise, "--noise"), None
    for flag, value, least in (("--sims", args.sims, 1), ("--bootstrap", args.bootstrap, 10), ("--seed", args.seed, 0)):
        if value < least:
            raise UsageError(f"{flag} must be a whole number >= {least}; got {value}")
    convention = (fit.data.param_convention if fit is not None else None) or "non_embedding"
    if args.curves:
        return cmd_curve_design(args, choice, noise, convention)
    if args.anneal is not None or args.run_noise is not None:
        raise UsageError("--anneal and --run-noise apply to --curves")
    rows = []
    for config in args.configs:
        points = planned_points(config, convention)
        try:
            outlook = expected_precision(points, law, noise=noise, n_sims=args.sims,
                                         bootstrap=args.bootstrap, seed=args.seed,
                                         laws=None if fit is None else fit.resampled, noise_df=noise_df)
        except UsageError as exc:
            raise UsageError(f"{config}: {exc}") from None
        rows.append((str(config), outlook))
    if args.json:
        print(json.dumps(json_safe({"prior": choice.label, "noise": noise, "param_convention": convention,
                                    "designs": [{"config": c, **o.to_dict()} for c, o in rows]}), indent=2))
        return 0
    drawn = rows[0][1].prior_laws if rows else 0
    print(f"prior: {choice.label}" + (f" (each truth drawn from its {drawn} bootstrap laws)" if drawn else "")
          + f"; scatter {noise:.3g} (log-normal" + (f", drawn as measured on {noise_df} degrees of freedom"
                                                    if noise_df else "") + f"); N counted as {convention}; "
          f"{args.sims} simulated sweeps per design, {args.bootstrap} bootstrap resamples each")
    header = ["design", "runs", "compute", "alpha (hi-lo)/alpha", "a hi-lo", "D/N hi/lo", "not identified",
              "D/N covered"]
    print(plain_table(header, [[c, str(o.n_runs), sci(o.compute), f"{o.alpha_rel_width:.2f}", f"{o.a_width:.3f}",
                                f"{o.tpp_ratio:.3g}", f"{100 * o.not_identified_share:.0f}%",
                                f"{100 * o.tpp_coverage:.0f}%"] for c, o in rows]))
    print("medians of the 95% intervals over the simulated sweeps; D/N (tokens per parameter) at each design's "
          "largest run; 'covered': how often its interval holds the prior's value")
    return 0
