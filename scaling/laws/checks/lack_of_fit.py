"""Lack of fit: do the residuals have structure the law does not explain?

A law can fit its points to 1% and still be wrong in a way the bootstrap cannot see. A mistuned
learning rate offsets every run of one model size by the same amount; the bootstrap resamples
points as if each were independent, so it takes the offset for noise and its intervals come out too
narrow (simulated: 12% of `trustworthy` fits missed the true allocation with 0.5-1% offsets per
size). Such errors show as residuals that agree within a group: the runs of one size, or of one
budget (or token count), sit above or below the law together.

Two tests, both one-way analyses of variance of the log residuals r = log L_obs - log L_law:

* By group (size, budget, token count): F = [between-group mean square] / [within-group mean
  square], over the groups holding at least two points. Without replicates this is the only test; it
  is conservative, because the fitted law has already absorbed part of any structure.
* Pure error, with replicates (repeated (N, D) points: runs that differ only in their training seed):
  the classical lack-of-fit F-test. The residual sum of squares splits into pure error, the scatter
  between replicates, which no law can explain, and lack of fit, the rest:
  F = [SS_lof / (cells - parameters)] / [SS_pe / (points - cells)].

A small p-value says the law's form (or the runs) err systematically: the intervals, which assume
independent scatter, are then too narrow. By how much is the design effect of clustered data (Kish
1965; Moulton 1990): m points to a group whose errors have intra-class correlation rho carry the
information of m / (1 + (m - 1) rho) independent points, so an estimate that rests on the groups
(a size's runs all at one N) has its variance multiplied by deff = 1 + (m - 1) rho. The one-way ANOVA estimates
rho = (F - 1) / (F + m - 1), so deff = m F / (F + m - 1): 1 at F <= 1, m as F grows. The fit's
bootstrap resamples points as if independent; `LackOfFit.interval_factor`, sqrt(deff) of the test
that asks most, is what its intervals are widened by (`scaling.laws.fitting.bootstrap.spread`).
Pure functions, no I/O.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from scaling.formats import json_safe
from scaling.laws.fitting.quantiles import f_tail

SAME = 1e-3      # values within 0.1% (relative) are one group: a size, a budget, a token count


@dataclass(frozen=True)
class GroupTest:
    """One F-test of residual structure. `offenders`: (group value, points, mean residual in %)
    for the groups whose mean residual is beyond 2 standard errors of zero, largest first."""

    by: str
    statistic: float
    df: tuple[int, int]
    p_value: float
    group_size: float            # mean points per group (per replicated cell for "replicates")
    offenders: tuple = ()

    @property
    def design_effect(self) -> float:
        """m F / (F + m - 1), m the mean points per group (1 at F <= 1): the factor by which the
        shared errors this test measures multiply the variance of an estimate from these points."""
        f, m = self.statistic, self.group_size
        if math.isnan(f) or f <= 1.0:
            return 1.0
        return m if math.isinf(f) else m * f / (f + m - 1.0)

    def to_json(self) -> dict:
        return json_safe({"by": self.by, "F": self.statistic, "df": self.df, "p_value": self.p_value,
                          "design_effect": self.design_effect,
                          "offenders": [{"value": v, "points": k, "mean_residual_pct": m}
                                        for v, k, m in self.offenders]})


@dataclass(frozen=True)
class LackOfFit:
    """The tests that could be made, and the scatter they measure: `pure_error_rms` (between
    replicates; None without them) beside the residual RMS, both of log losses."""

    tests: tuple
    residual_rms: float
    pure_error_rms: float | None
    replicated_cells: int

    @property
    def worst(self) -> GroupTest | None:
        return min(self.tests, key=lambda t: t.p_value, default=None)

    @property
    def interval_factor(self) -> float:
        """sqrt of the largest design effect: how much wider the intervals of a fit that treats
        these points as independent must be (1 without structure)."""
        return math.sqrt(max((t.design_effect for t in self.tests), default=1.0))

    def to_json(self) -> dict:
        return {"tests": [t.to_json() for t in self.tests],
                **json_safe({"residual_rms": self.residual_rms, "pure_error_rms": self.pure_error_rms,
                             "replicated_cells": self.replicated_cells,
                             "interval_factor": self.interval_factor})}


def group_labels(values: np.ndarray) -> np.ndarray:
    """An integer label per value: sorted values closer than SAME (relative) share a label."""
    values = np.asarray(values, dtype=float)
    order = np.argsort(values, kind="stable")
    step = np.diff(np.log(values[order])) > SAME
    labels = np.empty(values.size, dtype=int)
    labels[order] = np.concatenate([[0], np.cumsum(step)])
    return labels


def grouped_test(residuals: np.ndarray, values: np.ndarray, by: str) -> GroupTest | None:
    """One-way ANOVA of the residuals grouped by `values` (groups of >= 2 points); None where
    fewer than two such groups, or no within-group degrees of freedom."""
    labels = group_labels(values)
    _, inverse, counts = np.unique(labels, return_inverse=True, return_counts=True)
    keep = counts[inverse] >= 2
    if np.unique(labels[keep]).size < 2:
        return None
    r, lab, v = residuals[keep], labels[keep], np.asarray(values, dtype=float)[keep]
    groups = np.unique(lab)
    n, k = r.size, groups.size
    if n - k < 1:
        return None
    means = np.array([r[lab == g].mean() for g in groups])
    sizes = np.array([(lab == g).sum() for g in groups])
    between = float(np.sum(sizes * (means - r.mean()) ** 2))
    within = float(sum(np.sum((r[lab == g] - m) ** 2) for g, m in zip(groups, means)))
    f, p = _f_test(between, k - 1, within, n - k)
    sigma = math.sqrt(within / (n - k))
    z = means / (sigma / np.sqrt(sizes)) if sigma > 0 else np.zeros_like(means)
    value = [float(np.exp(np.log(v[lab == g]).mean())) for g in groups]
    offenders = tuple((value[i], int(sizes[i]), 100.0 * float(means[i]))
                      for i in np.argsort(-np.abs(z)) if abs(z[i]) > 2.0)
    return GroupTest(by, f, (k - 1, n - k), p, n / k, offenders)


def replicate_cells(n: np.ndarray, d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(cell of each point, points per cell): points at the same (N, D) share a cell."""
    cells = group_labels(n) * (int(group_labels(d).max()) + 1) + group_labels(d)
    _, inverse, counts = np.unique(cells, return_inverse=True, return_counts=True)
    return inverse, counts


def pure_error(residuals: np.ndarray, inverse: np.ndarray, counts: np.ndarray) -> float:
    """The sum of squares of the residuals about their cell means: scatter no law can explain."""
    means = np.bincount(inverse, weights=residuals) / counts
    return float(np.sum((residuals - means[inverse]) ** 2))


def pure_error_test(residuals: np.ndarray, n: np.ndarray, d: np.ndarray, n_params: int) -> GroupTest | None:
    """The classical lack-of-fit F-test against the scatter between replicates (points at the
    same (N, D)); None without replicates or without cells to spare beyond the law's parameters."""
    inverse, counts = replicate_cells(n, d)
    m = counts.size
    if counts.max() < 2 or m - n_params < 1:
        return None
    pure = pure_error(residuals, inverse, counts)
    f, p = _f_test(float(np.sum(residuals ** 2)) - pure, m - n_params, pure, residuals.size - m)
    return GroupTest("replicates", f, (m - n_params, residuals.size - m), p, residuals.size / m)


def _f_test(ss_num: float, df_num: int, ss_den: float, df_den: int) -> tuple[float, float]:
    if ss_den <= 0:
        return (math.inf, 0.0) if ss_num > 0 else (math.nan, 1.0)
    f = (ss_num / df_num) / (ss_den / df_den)
    return float(f), f_tail(f, df_num, df_den)


def lack_of_fit(n: npt.ArrayLike, d: npt.ArrayLike, loss: npt.ArrayLike, predicted: npt.ArrayLike, *,
                compute: npt.ArrayLike, budgets: npt.ArrayLike | None = None, n_params: int = 5) -> LackOfFit:
    """The tests on log residuals of `loss` against the law's `predicted` losses: by model size,
    by budget (the planned budgets where known, else the runs' compute), by token count, and
    against pure error where points repeat. A grouping with fewer than two groups of two points
    (a token count per run in an IsoFLOP design) is not tested."""
    n, d, loss = (np.asarray(x, dtype=float) for x in (n, d, loss))
    residuals = np.log(loss) - np.log(np.asarray(predicted, dtype=float))
    found = [grouped_test(residuals, n, "size"),
             grouped_test(residuals, np.asarray(compute if budgets is None else budgets, float), "budget"),
             grouped_test(residuals, d, "tokens"),
             pure_error_test(residuals, n, d, n_params)]
    tests = tuple(t for t in found if t is not None)
    inverse, counts = replicate_cells(n, d)
    pure_df = residuals.size - counts.size
    pure_rms = math.sqrt(pure_error(residuals, inverse, counts) / pure_df) if counts.max() >= 2 else None
    return LackOfFit(tests, float(np.sqrt(np.mean(residuals ** 2))), pure_rms, int((counts >= 2).sum()))
