"""The figures of the report's decisions (`scaling.report.decisions`): the validation's runs beside
their predictions, and the data-constrained law's loss against epochs. Drawn from data objects, in the
report's style, as `scaling.report.figures` draws the fit's.
"""

from __future__ import annotations

import math

import numpy as np
from matplotlib.figure import Figure

from scaling.formats import sci
from scaling.laws.forms.allocating import AllocatingLaw
from scaling.laws.repeated import Repeated
from scaling.report.style import human, log_axis, new_figure, with_rc
from scaling.validation.result import Validation

# ----------------------------------------------------------------------------- the validation

@with_rc
def validation(v: Validation, law: AllocatingLaw, band: tuple[np.ndarray, np.ndarray, np.ndarray] | None, *,
               n_label: str = "parameters") -> Figure:
    """The IsoFLOP profile at the validation's compute: the law's loss along C = c(N) D with its
    prediction band (band: (n grid, lo, hi), or None), and the three runs trained there, each
    observed loss beside its prediction interval."""
    fig, axes = new_figure(size=(7.5, 4.8))
    ax, c = axes[0, 0], v.compute
    grid = np.geomspace(min(r.n for r in v.runs) / 1.6, max(r.n for r in v.runs) * 1.6, 120)
    if band is not None:
        ax.fill_between(band[0], band[1], band[2], color="#9ecae1", alpha=0.45, lw=0,
                        label=f"{100 * v.level:g}% prediction interval")
    ax.plot(grid, law.loss(grid, law.flops.tokens(c, grid)), color="#3182bd", lw=1.6,
            label=f"fitted law along C = {law.flops.name}")
    ax.axvline(v.n_opt, color="#3182bd", ls=":", lw=1.0, label=f"law's N_opt = {human(v.n_opt)}")
    for run in v.runs:
        if run.interval is not None:
            below, above = run.predicted - run.interval[0], run.interval[1] - run.predicted
            ax.errorbar(run.n, run.predicted, yerr=[[below], [above]], fmt="none", ecolor="#08519c", elinewidth=1.0,
                        capsize=4)
        if run.observed is not None:
            ax.plot(run.n, run.observed, "o", color="#d62728" if run.position == "optimum" else "#ff9896",
                    mec="black", mew=0.6, ms=8, zorder=5)
            ax.annotate(f"{run.position}\n{run.shape}", (run.n, run.observed), textcoords="offset points",
                        xytext=(8, 6), fontsize=8)
    ax.plot([], [], "o", color="#d62728", mec="black", label="observed (the recommended model darkest)")
    ax.set_xlabel(f"parameters N ({n_label}, log scale)")
    ax.set_ylabel("final validation loss (nats/token)")
    ax.set_title(f"Validation at C = {sci(c, 2)} FLOPs ({v.kind})")
    log_axis(ax, "x")
    ax.legend(loc="upper center", fontsize=8, framealpha=0.85)
    return fig


# ----------------------------------------------------------------------------- repeated data

@with_rc
def repeated_data(r: Repeated, compute: float, unique: float) -> Figure:
    """Left: the loss along C = 6ND against epochs D/U with U unique tokens, under the data-constrained
    law and as if every token were fresh (the base law), with the bootstrap's band. Right: the fitted
    decay, the worth of a token seen for the k-th time against a fresh one, exp(-(k-1)/R_D*)."""
    fig, axes = new_figure(1, 2, size=(12.0, 4.6))
    left, right = axes[0, 0], axes[0, 1]
    epochs = np.geomspace(0.1, max(100.0, 3 * r.max_epochs), 200)
    d = epochs * unique
    n = compute / (6 * d)
    laws = r.laws()
    if laws:
        band = np.percentile([law.loss(n, d, unique) for law in laws], [2.5, 97.5], axis=0)
        left.fill_between(epochs, band[0], band[1], color="#9ecae1", alpha=0.45, lw=0, label="95% over the bootstrap")
    left.plot(epochs, r.law.loss(n, d, unique), color="#3182bd", lw=1.6, label="data-constrained law")
    left.plot(epochs, r.law.base.loss(n, d), color="grey", ls="--", lw=1.2, label="if every token were fresh")
    left.axvline(1.0, color="black", lw=0.8, ls=":")
    left.set_xlabel(f"epochs of {human(unique)} unique tokens (log scale)")
    left.set_ylabel("predicted loss (nats/token)")
    left.set_title(f"Loss along C = {sci(compute, 2)} FLOPs: fewer parameters, more epochs")
    left.legend(loc="upper center", fontsize=8)
    log_axis(left, "x", counts=False)
    k = np.linspace(1.0, epochs.max(), 300)
    if laws:
        worth = np.percentile([np.exp(-(k - 1) / law.r_d_star) for law in laws], [2.5, 97.5], axis=0)
        right.fill_between(k, worth[0], worth[1], color="#9ecae1", alpha=0.45, lw=0)
    right.plot(k, np.exp(-(k - 1) / r.law.r_d_star), color="#3182bd", lw=1.6,
               label=f"exp(-(k-1)/R_D*), R_D* = {r.law.r_d_star:.3g}")
    right.axvspan(1.0, r.max_epochs, color="#fdae6b", alpha=0.25,
                  label=f"epochs the runs reached (<= {r.max_epochs:.3g})")
    right.axhline(1 / math.e, color="grey", lw=0.8, ls=":", label="1/e: more epochs stop paying")
    right.set_xlabel("epoch k")
    right.set_ylabel("worth of a repeated token (fresh = 1)")
    right.set_title("The fitted decay of repeated tokens")
    right.set_ylim(0, 1.05)
    right.legend(loc="upper right", fontsize=8)
    return fig
