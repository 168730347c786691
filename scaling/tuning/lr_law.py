"""The learning-rate law of a tuning sweep, lr_opt = c N^k.

    tuning = scaling.tuning.shapes.tune_shapes(cfg, lrs, tokens, "runs")   # each shape's rate, chosen
    law = lr_law(tuning.shapes)                                   # fitted over the inside optima
    print(format_table(tuning.shapes)); print(law.describe())

A shape whose best rate lies at the edge of its grid gives only a bound on its optimum, so the law
is fitted over the shapes whose optimum lies inside (`scaling.tuning.shapes.choose`), by least
squares in log-log (`approaches.fit_power_law`, with a 95% interval from 3 shapes on). The same
fit gives a validation's family its rates (`scaling.validation.family`). Pure, no I/O; the files are
`scaling.tuning.files`, the figure the report's (`scaling.report.tuning`).
"""

from __future__ import annotations

from dataclasses import dataclass

from scaling.formats import plain_table, sci
from scaling.laws.optimal.approaches import PowerLaw, fit_power_law
from scaling.tuning.shapes import ShapeTuning

INSIDE = ("parabola", "grid point")   # choices that place the optimum inside the grid


@dataclass(frozen=True)
class LRLaw:
    """lr_opt = c N^k (`power`, None when it could not be fitted, and `why` not), and the shapes
    it was fitted over."""

    power: PowerLaw | None
    inside: tuple
    why: str | None = None

    def describe(self) -> str:
        if self.power is None:
            return f"lr_opt(N): not fitted ({self.why})"
        law = self.power
        ci = f" [{law.ci[0]:.3f}, {law.ci[1]:.3f}] (95%)" if law.ci else " (no interval from 2 points)"
        return (f"lr_opt = {sci(law.coefficient)} * N^{law.exponent:.3f}; exponent {law.exponent:.3f}{ci}, "
                f"from {law.n_points} shapes ({', '.join(s.name for s in self.inside)})")

    def to_json(self) -> dict | None:
        law = self.power
        if law is None:
            return None
        return {"exponent": law.exponent, "coefficient": law.coefficient, "exponent_ci95": law.ci,
                "exponent_stderr": law.stderr, "n_points": law.n_points, "shapes": [s.name for s in self.inside]}


def lr_law(shapes: list[ShapeTuning]) -> LRLaw:
    """lr_opt = c N^k over the shapes whose optimum is inside their grid (an edge is only a bound)."""
    inside = tuple(s for s in shapes if s.choice.method in INSIDE)
    if len({s.n_params for s in inside}) < 2:
        return LRLaw(None, inside, f"{len(inside)} shape(s) with an optimum inside the grid; a law needs 2 sizes")
    return LRLaw(fit_power_law([s.n_params for s in inside], [s.choice.lr for s in inside]), inside)


def format_table(shapes: list[ShapeTuning]) -> str:
    """One row per shape, one column per rate tried (every shape tries the same rates)."""
    rows = []
    for s in shapes:
        losses = [f"{v:.3f}" if st == "finished" else st for v, st in zip(s.losses, s.statuses)]
        note = {"edge": f"at the {s.choice.edge} rate: widen the grid", "none": "no run finished"}
        rows.append([s.name, sci(s.n_params), *losses, sci(s.config_lr), sci(s.choice.lr),
                     note.get(s.choice.method, s.choice.method)])
    header = ["shape", "N", *(f"lr {sci(x)}" for x in shapes[0].lrs), "config lr", "chosen", "how"]
    return "final validation loss at each learning rate tried:\n" + plain_table(header, rows)
