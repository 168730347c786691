"""Any fitted form seen as a Chinchilla-form `Law` is seen by what draws an allocation: its loss and
its compute-optimal N_opt, D_opt and loss along C = 6 N D, at one budget or an array of them.

    law = allocating(catalog.law_of("kaplan", params), reference=1e21)
    law.n_opt(c_grid), law.optimal_loss(1e21), law.a          # as Law's, found numerically

Why: the report draws the law a fit predicts and plans with; under `scaling fit --form kaplan` (or
farseer) that law has no closed-form optimum, and a figure that drew the Chinchilla form's beside a
plan of another form's would show one law and recommend another. A Chinchilla-form law (chinchilla,
tied, fixed-E) is returned as it is; any other is wrapped in `NumericAllocation`, whose optima are
`scaling.laws.forms.form.optimum`'s, the same numbers `LawFit.plan` gives under that form.
Pure functions, no I/O.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
import numpy.typing as npt

from scaling.laws.forms.form import FormLaw, optimum
from scaling.laws.forms.law import Law
from scaling.train.compute import FlopsPerToken

A_SPAN = 10.0      # the local exponent a of a numeric optimum: the slope of ln N_opt over [C/10, 10 C]


class AllocatingLaw(Protocol):
    """What a figure of the allocation needs of a law: `Law` has it in closed form."""

    @property
    def flops(self) -> FlopsPerToken: ...
    @property
    def a(self) -> float: ...
    @property
    def has_optimum(self) -> bool: ...
    def loss(self, n: npt.ArrayLike, d: npt.ArrayLike) -> np.ndarray: ...
    def n_opt(self, compute: npt.ArrayLike) -> np.ndarray: ...
    def d_opt(self, compute: npt.ArrayLike) -> np.ndarray: ...
    def optimal_loss(self, compute: npt.ArrayLike) -> np.ndarray: ...


@dataclass(frozen=True)
class NumericAllocation:
    """A law of a form with no closed-form optimum, its allocation along C = 6 N D found by
    `optimum` at each budget; `a` the local exponent of N_opt at `reference` FLOPs (it moves with C)."""

    law: FormLaw
    reference: float
    flops: FlopsPerToken = field(default_factory=FlopsPerToken)

    def loss(self, n: npt.ArrayLike, d: npt.ArrayLike) -> np.ndarray:
        return np.asarray(self.law.loss(n, d), dtype=float)

    @property
    def has_optimum(self) -> bool:
        return self.law.has_optimum

    def _optima(self, compute: npt.ArrayLike, k: int) -> np.ndarray:
        """Entry k (0: N, 1: D, 2: loss) of `optimum` at each budget, shaped as `compute`."""
        c = np.asarray(compute, dtype=float)
        return np.reshape([optimum(self.law, float(v))[k] for v in c.ravel()], c.shape)

    def n_opt(self, compute: npt.ArrayLike) -> np.ndarray:
        return self._optima(compute, 0)

    def d_opt(self, compute: npt.ArrayLike) -> np.ndarray:
        return self._optima(compute, 1)

    def optimal_loss(self, compute: npt.ArrayLike) -> np.ndarray:
        return self._optima(compute, 2)

    @property
    def a(self) -> float:
        lo, hi = self.n_opt([self.reference / A_SPAN, self.reference * A_SPAN])
        return math.log(hi / lo) / math.log(A_SPAN**2)


def allocating(law: FormLaw, reference: float) -> AllocatingLaw:
    """`law` with an allocation: itself where it is of the Chinchilla form, else `NumericAllocation`."""
    return law if isinstance(law, Law) else NumericAllocation(law, reference)
