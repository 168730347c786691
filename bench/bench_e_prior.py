"""Does a prior on E (`--E-prior MEAN,SD`) act as its standard deviation says? Simulated sweeps.

    python bench/bench_e_prior.py [--seeds 5] [--resamples 200]

For each seed, an IsoFLOP sweep (6 budgets from 1e17 to 3.2e18 FLOPs, 6 sizes each, 1% log-normal
scatter) of a known law is fitted without a prior and with a prior on E of standard deviation
r x sd_data (sd_data: the spread of E over the bootstrap without a prior), centred one sd_data
below the fitted E. For a Gaussian likelihood the posterior's mean is the precision-weighted mean
of the fit and the prior, and its sd 1 / sqrt(1/sd_data^2 + 1/sd^2); printed: the fitted E's shift
towards the prior and the bootstrap's sd of E (each resample drawing its prior's mean), each over
what that Gaussian posterior says (1.00: as the SD says).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scaling.laws.design.simulate import isoflop_grid, simulate  # noqa: E402
from scaling.laws.fitting import bootstrap as resampling  # noqa: E402
from scaling.laws.fitting import fit as fitting  # noqa: E402
from scaling.laws.fitting.objective import EPrior, quasi_likelihood_scale  # noqa: E402
from scaling.laws.fitting.prior import prior_scale  # noqa: E402
from scaling.laws.forms.law import Law  # noqa: E402

TRUTH = Law(E=1.9, A=400.0, B=1500.0, alpha=0.33, beta=0.30)
BUDGETS = 1e17 * 2.0 ** np.arange(6)
RATIOS = (0.01, 0.3, 1.0, 3.0, 100.0)


def one(seed: int, resamples: int, scale_by: str) -> list[tuple[float, float, float]]:
    """(ratio, shift / posterior shift, sd / posterior sd) for each prior width in RATIOS, the
    prior's scale by `prior_scale` ("profile") or `quasi_likelihood_scale` ("laplace")."""
    runs = isoflop_grid(BUDGETS, tokens_per_param=20.0, per_budget=6, span=6.0)
    data = replace(simulate(TRUTH, runs, noise=0.01, seed=seed), budgets=np.repeat(BUDGETS, 6))
    free = fitting.fit_law(data.n, data.d, data.loss)
    scale = (prior_scale(data.n, data.d, data.loss, free, seed) if scale_by == "profile" else
             quasi_likelihood_scale(np.log(free.law.loss(data.n, data.d) / data.loss), free.delta))
    sd_data = float(np.std(resampling.bootstrap(data.n, data.d, data.loss, n_resamples=resamples, seed=seed,
                                                full_fit=free).samples["E"]))
    out = []
    for ratio in RATIOS:
        prior = EPrior(free.law.E - sd_data, ratio * sd_data, scale)
        fit = fitting.fit_law(data.n, data.d, data.loss, E_prior=prior)
        boot = resampling.bootstrap(data.n, data.d, data.loss, n_resamples=resamples, seed=seed, full_fit=fit,
                                    E_prior=prior)
        w = 1.0 / (1.0 + ratio ** 2)                    # the prior's share of the posterior precision
        shift = (free.law.E - fit.law.E) / (w * sd_data)
        post_sd = sd_data / np.sqrt(1.0 + 1.0 / ratio ** 2)
        out.append((ratio, shift, float(np.std(boot.samples["E"])) / post_sd))
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--resamples", type=int, default=200)
    p.add_argument("--scale", choices=("profile", "laplace"), default="profile",
                   help="the prior's scale: prior_scale (the fit's) or the Laplace fallback")
    args = p.parse_args()
    rows = np.array([one(seed, args.resamples, args.scale) for seed in range(args.seeds)])     # (seeds, ratios, 3)
    print(f"{args.seeds} sweeps, {args.resamples} resamples, scale {args.scale}: median (min-max) over the sweeps")
    print("| prior sd / data sd | E's shift towards the prior / the posterior's | sd of E / the posterior's |")
    print("| --- | --- | --- |")
    for j, ratio in enumerate(RATIOS):
        shift, sd = rows[:, j, 1], rows[:, j, 2]
        print(f"| {ratio:g} | {np.median(shift):.2f} ({shift.min():.2f}-{shift.max():.2f}) | "
              f"{np.median(sd):.2f} ({sd.min():.2f}-{sd.max():.2f}) |")


if __name__ == "__main__":
    main()
