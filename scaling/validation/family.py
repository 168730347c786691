"""A sweep's model family, extended to any size: the shape nearest a target N, and its learning rate.

A validation trains the law's compute-optimal N, which need not be one of the sweep's shapes, so
the family is extended in the sweep's own proportions (the aspect-ratio rule):

    head width h   the median d_model / n_heads of the sweep's shapes
    aspect r       the median d_model / n_layers of the sweep's shapes
    candidates     d_model = h, 2h, 3h, ..., n_heads = d_model / h, n_layers = floor or ceil of
                   d_model / r (at least 1)

and the shape is the candidate whose N (counted as the fit counts it) is nearest the target in
log N. Two depths per width make the steps in N finer than widths alone (x1.3 to x1.6 apart at
the tiny demo's sizes instead of x2 to x2.7). A sweep whose shapes all share one depth is a family
of widths at that depth, and is extended so: at these sizes depth moves the loss at a given N by
more than the runs' scatter (docs/study.md: a two-layer shape beat the three-layer one of the same
width, and one of twice its parameters, at every budget), so a validation in deeper shapes would
test another family than the law was fitted to.

Its learning rate follows the sweep's own rule. Shapes that carry their own rate (tuned per
shape, as the demo's are) give the power law lr = c N^k fitted through them by least squares in
log-log, evaluated at the new N (for the demo that is `scaling tune`'s law); without per-shape
rates, the config's rule (`scaling.config.run_lr`: constant, or inverse width).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from pydantic import ValidationError

from scaling.config import Shape, SweepConfig, run_lr
from scaling.errors import UsageError
from scaling.laws.optimal.approaches import fit_power_law
from scaling.train import counts
from scaling.train.counts import PARAM_CONVENTIONS


@dataclass(frozen=True)
class Family:
    cfg: SweepConfig
    head_width: int
    aspect: float
    param_convention: str = "non_embedding"
    lr_law: tuple[float, float] | None = None   # (c, k) of lr = c N^k; None: the config's rule
    depth: int | None = None                    # the sweep's one depth, if all its shapes share it

    def n_params(self, shape: Shape) -> int:
        """N of `shape` as the fit counts it."""
        model = self.cfg.model
        total, non_embedding = counts.param_counts(shape.n_layers, shape.d_model, model.context_length,
                                                   self.cfg.tokenizer.vocab_size, model.mlp_ratio,
                                                   model.tied_embeddings)
        return non_embedding if self.param_convention == "non_embedding" else total

    def flops_per_token(self, shape: Shape, measure: str) -> float:
        """Training FLOPs a token of `shape` costs in `measure` (a COMPUTE_MEASURE, or a table's "6N":
        6 N as the fit counts it)."""
        if measure not in counts.COMPUTE_MEASURES:
            return 6.0 * self.n_params(shape)
        model = self.cfg.model
        return float(counts.flops_by_measure(shape.n_layers, shape.d_model, model.context_length,
                                             self.cfg.tokenizer.vocab_size, model.mlp_ratio,
                                             model.tied_embeddings)[measure])

    def candidates(self, largest_n: float) -> list[Shape]:
        """Every shape of the family up to the first whose N passes `largest_n`."""
        shapes: list[Shape] = []
        width = self.head_width
        while not shapes or self.n_params(shapes[-1]) <= largest_n:
            depth = width / self.aspect if self.depth is None else self.depth
            for layers in sorted({max(1, math.floor(depth)), max(1, math.ceil(depth))}):
                try:
                    shapes.append(Shape(d_model=width, n_layers=layers, n_heads=width // self.head_width))
                except ValidationError as exc:      # past a shape limit (d_model, n_layers, n_heads)
                    problem = exc.errors()[0]
                    raise UsageError(f"the family has no model up to {largest_n:.3g} parameters: its shapes stop "
                                     f"below d_model {width}, {layers} layers ({problem['loc'][0]} "
                                     f"{problem['msg'].removeprefix('Value error, ')}); choose a smaller "
                                     "compute") from None
            width += self.head_width
        return shapes

    def shape_near(self, n: float) -> Shape:
        """The family's shape whose N is nearest `n` in log N, with its learning rate."""
        if not (math.isfinite(n) and n > 0):
            raise UsageError(f"no model of {n!r} parameters: the target size must be positive and finite")
        shape = min(self.candidates(2 * n), key=lambda s: abs(math.log(self.n_params(s) / n)))
        return shape.model_copy(update={"lr": self.lr(shape)})

    def lr(self, shape: Shape) -> float:
        if self.lr_law is None:
            return run_lr(self.cfg.train, shape)
        c, k = self.lr_law
        return float(f"{c * self.n_params(shape) ** k:.3g}")


def family_of(cfg: SweepConfig, param_convention: str = "non_embedding") -> Family:
    """The family of `cfg`'s shapes (see the module doc)."""
    if param_convention not in PARAM_CONVENTIONS:
        raise UsageError(f"the parameter convention must be one of {', '.join(PARAM_CONVENTIONS)}; "
                         f"got {param_convention!r}")
    shapes = cfg.grid.models
    head_width = int(np.median([s.d_model // s.n_heads for s in shapes]))
    aspect = float(np.median([s.d_model / s.n_layers for s in shapes]))
    depths = {s.n_layers for s in shapes}
    depth = depths.pop() if len(depths) == 1 else None
    family = Family(cfg, head_width, aspect, param_convention, depth=depth)
    tuned = [(family.n_params(s), s.lr) for s in shapes if s.lr is not None]
    if len({n for n, _ in tuned}) < 2:
        return family
    law = fit_power_law([n for n, _ in tuned], [lr for _, lr in tuned])   # as `scaling tune`'s lr_opt = c N^k
    return Family(cfg, head_width, aspect, param_convention, (law.coefficient, law.exponent), depth)
