"""The plain-language lines a fit carries: what it rests on (`evidence`) and what it must not be
used for (`limitations`). Pure functions of the data, the fit and the bootstrap; fit.json stores
their output verbatim.
"""

from __future__ import annotations

from scaling.laws.fitting import fit as fitting
from scaling.laws.fitting.bootstrap import BootstrapResult
from scaling.laws.fitting.fitdata import FitData


def evidence(data: FitData, result: fitting.FitResult, boot: BootstrapResult | None) -> list[str]:
    r = data.ranges()
    tpp = r["tokens_per_param_range"]
    conv = f" ({data.param_convention} parameters)" if data.param_convention else ""
    out = [
        f"{len(data)} points fitted from {data.source}; {len(data.dropped)} left out (listed in data.dropped)",
        f"{data.n_sizes} distinct model sizes, N from {r['n_range'][0]:.4g} to {r['n_range'][1]:.4g}{conv}",
        f"D from {r['d_range'][0]:.4g} to {r['d_range'][1]:.4g} tokens; D/N from {tpp[0]:.3g} to {tpp[1]:.3g}",
        f"{data.flops.quantity} from {r['c_range'][0]:.4g} to {r['c_range'][1]:.4g} FLOPs",
        f"residual RMS {result.residual_rms:.4g} in log loss (about {100 * result.residual_rms:.2g}% of the loss)",
        f"{result.n_starts_at_optimum} of {result.n_starts} starts ended at the optimum (objective within "
        f"{fitting.OPTIMUM_FUN_RTOL:g} relative or {fitting.SCIPY_FTOL:.2g} absolute, all constants within "
        f"{100 * fitting.OPTIMUM_PARAM_RTOL:g}%); "
        f"{result.n_starts_converged} of {result.n_starts} met the stopping rule",
        f"optimum polished by scipy L-BFGS-B: {result.message or 'no message'}"
        + ("" if result.converged else " (NOT converged)"),
        f"Huber delta {result.delta:g} on log residuals, summed over points",
    ]
    if boot is not None:
        out.append(f"{boot.n_resamples} bootstrap resamples (the points reweighted by the Bayesian bootstrap, seed "
                   f"{boot.seed}), each refitted from {boot.n_starts_per_resample} starts (the optimum and "
                   f"the grid's best other end point); {boot.n_converged} met the stopping rule")
        undefined = {k: v for k, v in boot.n_undefined.items() if v}
        if undefined:
            out.append("no interval for " + ", ".join(f"{k} (undefined in {v} resamples)"
                                                       for k, v in undefined.items())
                       + ": alpha or beta <= 0 there, so there is no compute-optimal allocation")
    return out


def limitations(data: FitData, result: fitting.FitResult, boot: BootstrapResult | None,
                reference_compute: float) -> list[str]:
    r = data.ranges()
    out = [
        f"the law describes {data.flops.quantity} from {r['c_range'][0]:.3g} to {r['c_range'][1]:.3g} FLOPs and N from "
        f"{r['n_range'][0]:.3g} to {r['n_range'][1]:.3g}; anything beyond (including compute-optimal "
        "allocations at larger budgets) is an extrapolation of the fitted form, not a measurement",
        "E, A and B depend on the tokenizer, data and loss definition: compare only alpha, beta, a, b "
        "(and tokens per parameter, with care) with other setups",
        "A, B, alpha and beta trade off along a shallow valley of the objective: the intervals of A and B "
        "are wide, and single constants should not be quoted without them",
    ]
    if reference_compute > r["c_range"][1] * (1 + 1e-12) or reference_compute < r["c_range"][0] * (1 - 1e-12):
        out.append(f"tokens_per_param_at_reference is at C = {reference_compute:.3g} FLOPs, outside the data's "
                   "compute range: an extrapolation")
    if not result.law.has_optimum:
        out.append(f"alpha = {result.law.alpha:.4g}, beta = {result.law.beta:.4g}: loss does not fall with both "
                   "N and D in this data, so the law gives no compute-optimal allocation (a, b, G and tokens "
                   "per parameter are null); check the data before using the fit")
    if data.n_sizes < 5:
        out.append(f"only {data.n_sizes} distinct model sizes: alpha and A are weakly determined")
    if data.param_convention is not None:
        other = "total" if data.param_convention == "non_embedding" else "non_embedding"
        out.append(f"N counts {data.param_convention} parameters; fits that count {other} parameters "
                   "(Kaplan et al. counted non-embedding, Hoffmann et al. total) give different alpha and a")
    else:
        out.append("the parameter convention of N (total or non-embedding) is not recorded for this table")
    epochs = data.epochs
    if data.repeats and epochs is not None:
        out.append(f"{int((epochs > 1).sum())} of {len(data)} runs repeat data (up to {epochs.max():.2f} epochs of "
                   "their unique tokens): the law above counts a repeated token as a fresh one; the "
                   "data-constrained fit (Muennighoff et al. 2023) discounts them")
    if result.fixed_E is not None:
        out.append(f"E was fixed at {result.fixed_E:g}, not fitted: the other constants and their intervals "
                   "are conditional on that value")
    if boot is None:
        out.append("no bootstrap was run: there are no intervals, so agreement with published values "
                   "cannot be judged")
    else:
        widened = (f", widened {boot.widened_by:.2f}x for the errors the lack-of-fit tests find shared within "
                   "sizes or budgets" if boot.widened_by > 1 else "")
        out.append("the intervals are percentile bootstrap intervals over points treated as independent"
                   f"{widened}; they do not cover systematic choices (Huber delta, learning-rate schedule, data "
                   "filters)")
    return out
