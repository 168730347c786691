"""`scaling design CONFIG [CONFIG ...]`: what a sweep would determine, before any training.

    scaling design configs/tiny.yaml --prior fits/tiny        # the prior's law and residual scatter
    scaling design configs/a.yaml configs/b.yaml --law chinchilla --noise 0.005

Each config's planned runs (N counted as the prior counts it, D their tokens) are simulated under
the prior law with log-normal scatter, refitted and diagnosed `--sims` times
(`scaling.laws.design.expected_precision`); the table sets the designs side by side with their
total compute, so two designs of equal compute can be compared by what they would measure.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from scaling.cli.law_choice import choose_law
from scaling.config import load_config
from scaling.errors import UsageError
from scaling.formats import json_safe, plain_table, positive, sci


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "design", help="simulate a sweep under a prior law: the intervals it would give, before training",
        description="For each config: simulate its planned runs under a prior law (your fit.json, or a "
                    "published law) with the given scatter, refit them as `scaling fit` does, and print "
                    "the expected 95% interval widths of alpha, a and tokens per parameter, and how often "
                    "the diagnostics would call the result not identified.")
    p.add_argument("configs", nargs="+", type=Path, metavar="CONFIG", help="sweep YAML(s) to compare")
    p.add_argument("--prior", type=Path, metavar="FIT_JSON", help="a fit.json whose law is the prior")
    p.add_argument("--law", help="a published law as the prior instead (chinchilla, besiroglu)")
    p.add_argument("--noise", help="scatter of final losses, relative (default: the prior fit's residual "
                                   "RMS, or 0.01)")
    p.add_argument("--sims", type=int, default=20, help="simulated sweeps per design (default 20)")
    p.add_argument("--bootstrap", type=int, default=100, help="bootstrap resamples per simulated fit (default 100)")
    p.add_argument("--seed", type=int, default=0, help="seed of the simulations (default 0)")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=cmd_design)


def planned_points(config: Path, param_convention: str) -> np.ndarray:
    """(N, D) of the runs a config would fit: every run but WSD's stable runs (their branches are the points)."""
    from scaling.sweep.plan import plan

    runs = [r for r in plan(load_config(config)) if r.kind != "stable"]
    column = "n_params_total" if param_convention == "total" else "n_params_non_embedding"
    return np.array([(getattr(r, column), r.spec.tokens) for r in runs], dtype=float)


def cmd_design(args) -> int:
    from scaling.laws.design import expected_precision, measured_scatter  # the fitter: after the arguments

    choice = choose_law(args.prior, args.law, parametric=True, fit_flag="--prior")
    fit = choice.fit
    noise, noise_df = measured_scatter(fit)
    if args.noise is not None:
        noise, noise_df = positive(args.noise, "--noise"), None
    for flag, value, least in (("--sims", args.sims, 1), ("--bootstrap", args.bootstrap, 10), ("--seed", args.seed, 0)):
        if value < least:
            raise UsageError(f"{flag} must be a whole number >= {least}; got {value}")
    convention = (fit.data.param_convention if fit is not None else None) or "non_embedding"
    rows = []
    for config in args.configs:
        points = planned_points(config, convention)
        try:
            outlook = expected_precision(points, choice.law, noise=noise, n_sims=args.sims,
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
