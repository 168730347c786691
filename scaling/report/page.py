"""A report being built: its document, its figures and the hold-out check the sections share
(`Report`), and the titles of the figures it can draw, in one place."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from scaling.laws.checks.holdout import Holdout, holdout
from scaling.laws.fitting import fit as fitting
from scaling.laws.fitting.objective import EPrior
from scaling.laws.results import lawfit as results
from scaling.report import prose
from scaling.report.document import Doc
from scaling.report.inputs import Inputs
from scaling.report.style import SizeColours

if TYPE_CHECKING:
    from matplotlib.figure import Figure


FIGURE_TITLES = {
    "loss_curves": "Validation loss against tokens for every run",
    "context_curves": "Context use against tokens for every run",
    "final_loss": "Final loss against N at each D and against D at each N, with the fitted law",
    "isoflop": "IsoFLOP profiles (Approach 2) and the law's optimum (Approach 3)",
    "frontiers": "Iso-loss contours of the fitted law and compute-optimal frontiers to 1e24 FLOPs",
    "residuals": "Residuals of the fit",
    "bootstrap": "Bootstrap distributions of alpha, beta, a and tokens per parameter",
    "backtest": "The backtest: each cut's predictions of the top budget's runs, with their intervals",
    "forms": "The law's forms side by side along compute, with their prediction intervals and backtests",
    "validation": "The validation: the recommended model and its neighbours against the law's prediction",
    "repeated": "Repeated data: the loss against epochs at fixed compute, and the fitted decay",
    "task_metrics": "Beyond the loss: smooth and exact-match metrics against compute, and predicted from the loss",
    "curve_laws": "Each size's training curves with its fitted curve law (Tissue et al. 2024)",
    "two_fits": "The law fitted to final losses beside the law fitted to the training curves",
}


@dataclass
class Report:
    """A report being built, then built: the document, its figures and the hold-out check."""

    inputs: Inputs
    title: str
    doc: Doc
    colours: SizeColours                 # one colour per model size, the same in every figure
    n_label: str                         # what N counts, in words
    holdout: Holdout | None
    holdout_fraction: float | None       # asked for; None: the fit's own check
    budgets: tuple = ()                  # the plan's budgets (`prose.plan_budgets`), ascending
    figures: dict = field(default_factory=dict)           # name -> matplotlib Figure
    missing_figures: dict = field(default_factory=dict)   # name -> why it is not drawn
    left_out: list = field(default_factory=list)          # (run or point, why), one row each

    @property
    def fit(self) -> results.LawFit:
        return self.inputs.fit

    @classmethod
    def start(cls, inputs: Inputs, holdout_fraction: float | None = None, compute: Sequence[float] = ()) -> Report:
        """An empty document, the colours, the hold-out check (first: the summary quotes it) and the
        plan's budgets: 1x-30x the largest fitted run and `compute`, the user's own."""
        fit, data = inputs.fit, inputs.data
        all_n = []
        if inputs.curves is not None:
            all_n += list(inputs.curves.n)
        if data is not None:
            all_n += list(data.n)
        n_label = prose.n_label(fit.data.param_convention or (data.param_convention if data is not None else None))
        return cls(inputs=inputs, title=f"Scaling-law report: {inputs.name}", doc=Doc(),
                   colours=SizeColours(all_n, f"N ({n_label})"), n_label=n_label,
                   holdout=_holdout(inputs, holdout_fraction), holdout_fraction=holdout_fraction,
                   budgets=prose.plan_budgets(_largest_compute(fit), compute))

    def figure(self, name: str, fig: Figure, caption: str) -> None:
        self.figures[name] = fig
        self.doc.figure(name, len(self.figures), FIGURE_TITLES[name], caption)


def _largest_compute(fit: results.LawFit) -> float | None:
    """The largest fitted run's compute, else (a fit.json without its range) the reference compute."""
    return float(fit.data.c_range[1]) if fit.data.c_range else fit.reference_compute


def _holdout(inputs: Inputs, fraction: float | None) -> Holdout | None:
    """The fit's own hold-out check (the refit its verdict judged); at another fraction, asked
    for, a refit here from Hoffmann's grid (a fit read from fit.json keeps no end points to start
    from, so both paths start alike), on the points found now, with the fit's fixed E or prior on E."""
    fit, data = inputs.fit, inputs.data
    if fraction is None or (fit.holdout is not None and fraction == fit.holdout.fraction):
        return fit.holdout
    if data is None:
        return None
    prior = fit.options.E_prior            # the fit's prior on E, carried as into its own refits
    return holdout(data, fit.law, fraction=fraction, fixed_E=fit.options.fixed_E,
                   delta=float(fit.options.delta or fitting.DEFAULT_DELTA),
                   E_prior=None if prior is None else EPrior(**prior))


