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

This module parses, calls `scaling.design` (`scaling.laws.design.outlooks.design`) and prints.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING, cast

from scaling.cli.law_choice import add_fit_option
from scaling.formats import json_safe, plain_table, sci

if TYPE_CHECKING:
    from scaling.laws.design.curves import CurveOutlook
    from scaling.laws.design.outlooks import Designs
    from scaling.laws.design.sweep import Outlook


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "design", help="the intervals a planned sweep would give, before training",
        description="For each config: simulate its planned runs under a prior law (your fit, or a "
                    "published law) with the given scatter, refit them as `scaling fit` does, and print "
                    "the expected 95% interval widths of alpha, a and tokens per parameter, and how often "
                    "the diagnostics would call the result not identified.",
        epilog="examples:\n"
               "  scaling design configs/tiny.yaml configs/tiny_grid.yaml   # two designs side by side\n"
               "  scaling design configs/tiny.yaml --fit fits/tiny          # under your own fit's law\n"
               "  scaling design configs/tiny.yaml --sims 5 --bootstrap 20  # a quick look (coarser medians)")
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


def show_curve_designs(result: Designs) -> None:
    """--curves: the table of each config fitted from its curves and from its final losses."""
    print(f"prior: {result.prior}; scatter {result.noise:.3g} of a final loss ({result.run_noise:.3g} shared by "
          f"each curve, {result.eval_noise:.3g} each evaluation); annealing C {result.anneal:.3g}, decay "
          f"{result.decay:g}; N counted as {result.param_convention}; {result.n_sims} simulated sweeps per design, "
          f"{result.bootstrap} resamples each")
    outlooks = cast("list[CurveOutlook]", list(result.outlooks))     # with curves, each is a CurveOutlook
    header = ["design", "runs", "fit points", "compute", "D/N hi/lo curves", "D/N hi/lo final", "a covered"]
    print(plain_table(header, [[c, str(o.n_runs), str(o.n_points), sci(o.compute), f"{o.tpp_ratio['curves']:.3g}",
                                f"{o.tpp_ratio['final']:.3g}",
                                f"{100 * o.a_coverage['curves']:.0f}% / {100 * o.a_coverage['final']:.0f}%"]
                               for c, o in zip(result.configs, outlooks)]))
    print("the same runs fitted from every evaluation of their curves (curves) and from their final losses "
          "(final): medians of the 95% intervals over the simulated sweeps, D/N at each design's largest run; "
          "'a covered' (curves / final): how often a's interval holds the prior's a")


def show_designs(result: Designs) -> None:
    """The table of each config's outlook from its final losses."""
    rows = list(zip(result.configs, cast("list[Outlook]", list(result.outlooks))))    # without curves: Outlooks
    drawn = rows[0][1].prior_laws if rows else 0
    noise_df = result.noise_df
    print(f"prior: {result.prior}" + (f" (each truth drawn from its {drawn} bootstrap laws)" if drawn else "")
          + f"; scatter {result.noise:.3g} (log-normal" + (f", drawn as measured on {noise_df} degrees of freedom"
                                                           if noise_df else "")
          + f"); N counted as {result.param_convention}; "
          f"{result.n_sims} simulated sweeps per design, {result.bootstrap} bootstrap resamples each")
    header = ["design", "runs", "compute", "alpha (hi-lo)/alpha", "a hi-lo", "D/N hi/lo", "not identified",
              "D/N covered"]
    print(plain_table(header, [[c, str(o.n_runs), sci(o.compute), f"{o.alpha_rel_width:.2f}", f"{o.a_width:.3f}",
                                f"{o.tpp_ratio:.3g}", f"{100 * o.not_identified_share:.0f}%",
                                f"{100 * o.tpp_coverage:.0f}%"] for c, o in rows]))
    print("medians of the 95% intervals over the simulated sweeps; D/N (tokens per parameter) at each design's "
          "largest run; 'covered': how often its interval holds the prior's value")


def cmd_design(args: argparse.Namespace) -> int:
    from scaling.laws.design.outlooks import design  # the fitter: after the arguments

    result = design(args.configs, fit=args.fit, law=args.law, noise=args.noise, sims=args.sims,
                    bootstrap=args.bootstrap, seed=args.seed, curves=args.curves, anneal=args.anneal,
                    run_noise=args.run_noise)
    if args.json:
        print(json.dumps(json_safe(result.to_json()), indent=2))
    elif args.curves:
        show_curve_designs(result)
    else:
        show_designs(result)
    return 0
