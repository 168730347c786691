"""The few distribution functions the laws' intervals and tests need, from scipy.special.

scipy.stats computes these with the same special functions (`norm.ppf` is `ndtri`, `t.ppf` is
`stdtrit`, `f.sf` is `fdtrc`), but importing it costs about a second, a third of a fit's whole
answer (`scaling fit --dataset chinchilla`); scipy.special comes with scipy.optimize, which every
fit imports anyway. tests/laws/test_quantiles.py checks them against scipy.stats.
"""

from __future__ import annotations

import numpy.typing as npt
from scipy.special import fdtrc, ndtri, stdtrit


def normal_quantile(q: npt.ArrayLike) -> float:
    """The standard normal's q-quantile (scipy.stats.norm.ppf)."""
    return float(ndtri(q))


def student_quantile(q: float, dof: float) -> float:
    """Student's t's q-quantile with `dof` degrees of freedom (scipy.stats.t.ppf(q, dof))."""
    return float(stdtrit(dof, q))


def f_tail(f: float, dof_num: float, dof_den: float) -> float:
    """P(F > f) for Fisher's F with (dof_num, dof_den) degrees of freedom (scipy.stats.f.sf)."""
    return float(fdtrc(dof_num, dof_den, f))
