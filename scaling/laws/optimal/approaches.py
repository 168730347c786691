"""Hoffmann et al.'s Approaches 1 and 2: compute-optimal allocation without a parametric law.

Pure functions of arrays and DataFrames; the training curves Approach 1 needs are read from a run
store by `scaling.laws.curves.store`.

Approach 2, IsoFLOP profiles (`isoflop`): group runs by compute budget C = 6 N D; along each
budget loss is a valley in log N, so fit a parabola of loss in log N and take its minimum as
N_opt(C); then fit N_opt = k C^a and D_opt = C / (6 N_opt) = k' C^b across budgets by least
squares on logs. Hoffmann et al. (2022, Section 3.2) found a = 0.49 on 9 budgets, 6e18 to 3e21.

Approach 1, the envelope of training curves (`envelope`): every intermediate evaluation of a run
is a (N, tokens, loss) point at FLOPs 6 N tokens. At each of many log-spaced FLOP values take
the lowest loss reached by any run (each run's curve interpolated linearly in log FLOPs) and
record which N reached it; fit N_opt = k C^a across those values. Hoffmann et al. (Section 3.1)
found a = 0.50. Their runs used a cosine schedule per training horizon, and the intermediate
loss of a run whose schedule is longer than the point read off is higher than a run stopped
there would reach: with one schedule per size the envelope favours larger models.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from scaling.errors import UsageError
from scaling.laws.fitting.fitdata import SAME_BUDGET
from scaling.laws.fitting.quantiles import student_quantile
from scaling.train.compute import FlopsPerToken

CI_LEVEL = 0.95
# Approach 2's window: each budget's parabola is fitted to the sizes within this many decades of N
# of the budget's lowest observed loss (at least the 3 nearest). A parabola in log N is the valley's
# shape near its bottom only; points 100x away, far up its walls, bend it and bias its minimum
# (Open-Athena 2026 measured the bias against grid width and off-centre sampling).
WINDOW_DECADES = 1.0


# ----------------------------------------------------------------------------- power laws

@dataclass(frozen=True)
class PowerLaw:
    """y = coefficient * x^exponent from least squares on ln y vs ln x."""

    exponent: float
    coefficient: float
    stderr: float | None         # standard error of the exponent (None with 2 points)
    ci: tuple[float, float] | None
    n_points: int

    def __call__(self, x: npt.ArrayLike) -> np.ndarray:
        return self.coefficient * np.asarray(x, dtype=float) ** self.exponent


def fit_power_law(x: npt.ArrayLike, y: npt.ArrayLike | Sequence[float | None], level: float = CI_LEVEL) -> PowerLaw:
    """Ordinary least squares of ln y on ln x; a Student-t interval (n - 2 dof) for the slope.

    The interval treats the points as independent with equal scatter about the line; it says
    nothing about errors in the points themselves beyond that scatter.
    """
    lx, ly = np.log(np.asarray(x, dtype=float)), np.log(np.asarray(y, dtype=float))
    n = len(lx)
    if n < 2 or np.ptp(lx) < math.log(SAME_BUDGET):     # x 1e-9 apart (one budget rounded) fit no slope
        raise ValueError(f"a power law needs at least 2 points at distinct x (more than {SAME_BUDGET:g}x apart)")
    slope, intercept = np.polyfit(lx, ly, 1)
    stderr = ci = None
    if n > 2:
        resid = ly - (slope * lx + intercept)
        s2 = float(resid @ resid) / (n - 2)
        stderr = math.sqrt(s2 / float(((lx - lx.mean()) ** 2).sum()))
        half = student_quantile(0.5 + level / 2, n - 2) * stderr
        ci = (float(slope - half), float(slope + half))
    return PowerLaw(float(slope), float(math.exp(intercept)), stderr, ci, n)


# ----------------------------------------------------------------------------- Approach 2

@dataclass(frozen=True)
class BudgetMinimum:
    """One IsoFLOP profile and where its parabola bottoms out."""

    compute: float                   # the budget (exact value, or geometric mean of the group)
    n_runs: int
    n_sizes: int                     # distinct N in the group
    n_range: tuple[float, float]     # sampled N
    status: str                      # "ok", or why this budget is left out
    n_opt: float | None = None
    d_opt: float | None = None
    loss_opt: float | None = None    # the parabola's value at its minimum

    @property
    def usable(self) -> bool:
        return self.status == "ok"


@dataclass(frozen=True)
class Profile:
    """The points of one budget, as indices into `isoflop`'s inputs by ascending N, and the parabola
    fitted to them (None with fewer than 3 sizes): loss = p2 u^2 + p1 u + p0, u = ln N - centre."""

    index: np.ndarray
    parabola: tuple[float, float, float, float] | None = None     # (centre, p2, p1, p0)


@dataclass(frozen=True)
class IsoFLOPResult:
    """Approach 2. `a` is None when fewer than 2 budgets gave a minimum; `reason` says why."""

    a: float | None
    b: float | None
    a_ci: tuple[float, float] | None
    b_ci: tuple[float, float] | None
    n_fit: PowerLaw | None           # N_opt = k C^a
    d_fit: PowerLaw | None           # D_opt = k' C^b
    budgets: list[BudgetMinimum]
    grouping: str                    # how runs were grouped into budgets
    reason: str | None = None
    interval: str = ("95% Student-t interval from the least-squares standard error of the slope "
                     "across budgets (n_budgets - 2 dof); ignores each minimum's own uncertainty")
    n_left_out_runs: int = 0         # runs not assigned to any budget
    window: str | None = None        # which sizes of each budget its parabola sees (None: all)
    profiles: tuple = field(default=(), repr=False, compare=False)   # a Profile per budget, for figures

    @property
    def usable(self) -> list[BudgetMinimum]:
        return [m for m in self.budgets if m.usable]

    @property
    def excluded(self) -> list[BudgetMinimum]:
        return [m for m in self.budgets if not m.usable]

    def to_dict(self) -> dict:
        """The entry `approaches.approach_2` of a fit.json (read by `scaling compare`)."""
        return {
            "method": "isoflop", "a": self.a, "b": self.b,
            "a_ci": list(self.a_ci) if self.a_ci else None,
            "b_ci": list(self.b_ci) if self.b_ci else None,
            "interval": self.interval, "grouping": self.grouping, "window": self.window, "reason": self.reason,
            "n_budgets_used": len(self.usable), "n_left_out_runs": self.n_left_out_runs,
            "budgets": [asdict(m) for m in self.budgets],
        }


def _positive_arrays(**arrays: npt.ArrayLike) -> list[np.ndarray]:
    out = []
    length = None
    for name, values in arrays.items():
        arr = np.asarray(values, dtype=float).ravel()
        if length is None:
            length = len(arr)
        elif len(arr) != length:
            raise UsageError(f"{name} has {len(arr)} values, expected {length}")
        if not np.all(np.isfinite(arr)) or np.any(arr <= 0):
            raise UsageError(f"{name} must be positive and finite everywhere")
        out.append(arr)
    return out


def group_by_exact_budget(compute: npt.ArrayLike, rtol: float = 1e-3) -> np.ndarray:
    """Labels grouping values equal within `rtol` of the smallest value of their group."""
    c = np.asarray(compute, dtype=float)
    order = np.argsort(c)
    labels = np.empty(len(c), dtype=int)
    label, start = -1, None
    for i in order:
        if start is None or c[i] > start * (1 + rtol):
            label, start = label + 1, c[i]
        labels[i] = label
    return labels


def _distinct(values: np.ndarray, rtol: float = 1e-9) -> int:
    return int(np.unique(np.round(np.log(values) / rtol)).size) if len(values) else 0


def _parabola_minimum(n: np.ndarray, loss: np.ndarray, compute: float, flops: FlopsPerToken) -> tuple[BudgetMinimum,
                      tuple | None]:
    """The budget's minimum, and its parabola (centre, p2, p1, p0) when there are 3 sizes or more."""
    x = np.log(n)
    n_range = (float(n.min()), float(n.max()))
    sizes = _distinct(n)
    common: dict[str, Any] = dict(compute=float(compute), n_runs=len(n), n_sizes=sizes, n_range=n_range)
    if sizes < 3:
        return BudgetMinimum(**common, status=f"only {sizes} distinct model sizes (need 3)"), None
    centre = x.mean()  # fit in x - centre: better conditioned than in ln N ~ 20
    p2, p1, p0 = np.polyfit(x - centre, loss, 2)
    parabola = (float(centre), float(p2), float(p1), float(p0))
    if p2 <= 0:
        return BudgetMinimum(**common, status="loss is not convex in log N here (no minimum)"), parabola
    u_opt = -p1 / (2 * p2)
    x_opt = centre + u_opt
    if not x.min() <= x_opt <= x.max():
        # Written as a power of ten: a nearly flat parabola can put it past what a float holds.
        side = "below the smallest" if x_opt < x.min() else "above the largest"
        status = f"minimum at N=1e{x_opt / math.log(10):.1f}, {side} sampled N"
        return BudgetMinimum(**common, status=status), parabola
    n_opt = math.exp(x_opt)
    return BudgetMinimum(**common, status="ok", n_opt=n_opt, d_opt=float(flops.tokens(compute, n_opt)),
                         loss_opt=float(p0 + p1 * u_opt + p2 * u_opt**2)), parabola


def in_window(n: np.ndarray, loss: np.ndarray, decades: float | None) -> np.ndarray:
    """Indices of the points of one budget within `decades` of log10 N of its lowest loss (all
    points for None), at least the 3 sizes nearest to it."""
    index = np.arange(len(n))
    if decades is None:
        return index
    distance = np.abs(np.log10(n) - math.log10(n[np.argmin(loss)]))
    nearest_sizes = np.sort(np.unique(np.round(distance, 12)))
    reach = max(decades, nearest_sizes[min(2, nearest_sizes.size - 1)])
    return index[distance <= reach + 1e-12]


def _budget_groups(c: np.ndarray, n: np.ndarray, bins_per_decade: float | None,
                   budget_rtol: float) -> tuple[np.ndarray, str]:
    """Labels of the runs' budgets, and how they were grouped: by exact budget when no bins are asked
    for and at least two budgets have 3 sizes or more, else in log-spaced bins of C (4 per decade
    unless `bins_per_decade`)."""
    if bins_per_decade is None:
        exact = group_by_exact_budget(c, budget_rtol)
        if sum(_distinct(n[exact == k]) >= 3 for k in np.unique(exact)) >= 2:
            return exact, f"exact budgets (C equal within {budget_rtol:g} relative)"
        bins_per_decade = 4.0
    if not bins_per_decade > 0:
        raise UsageError(f"bins_per_decade must be positive, got {bins_per_decade!r}")
    return (np.floor(np.log10(c) * bins_per_decade + 1e-9).astype(int),
            f"log-spaced bins of C, {bins_per_decade:g} per decade")


def isoflop(n: npt.ArrayLike, d: npt.ArrayLike, loss: npt.ArrayLike, *, compute: npt.ArrayLike | None = None,
            flops: FlopsPerToken = FlopsPerToken(), budgets: npt.ArrayLike | None = None,
            groups: npt.ArrayLike | None = None, bins_per_decade: float | None = None, budget_rtol: float = 1e-3,
            max_budget_ratio: float = 2.0, window: float | None = WINDOW_DECADES) -> IsoFLOPResult:
    """Approach 2 on runs (N_i, D_i, loss_i) of compute C_i (`compute`; 6 N_i D_i by default; `flops`
    gives the tokens D_opt = C / c(N_opt) of each budget's minimum).

    Grouping, in order of precedence:
      * `groups` given: one label per run (a budget planned in another measure than C's): each
        label is a budget, its C the geometric mean of its runs' C.
      * `budgets` given: each run joins the budget nearest in log C, unless its C is more than
        `max_budget_ratio` times off (then it is left out and counted). The budget's own value
        is used as C. Use this for sweeps laid out on known budgets whose recorded C scatter
        (e.g. points read off a figure).
      * `bins_per_decade` given: log-spaced bins of C with edges at 10^(k / bins_per_decade);
        C of a bin is the geometric mean of its runs' C.
      * neither: if the runs sit on exact budgets (values equal within `budget_rtol`, and at
        least two such groups have 3 or more model sizes), group by those; else 4 bins per decade.

    The minimum of each budget's parabola is kept only when the parabola opens upward and the
    minimum lies inside the sampled N range; other budgets are reported in `budgets` with why.

    Grouping matters when C scatters: on Hoffmann et al.'s extracted points, their 9 budgets
    give a = 0.512, while 3, 4 and 5 bins per decade give 0.44, 0.46 and 0.51, because bins
    cut across budgets and mix runs of different C in one parabola.

    window: each budget's parabola sees only the sizes within `window` decades of its lowest loss
    (`in_window`; None: every size).
    """
    n, d, loss = _positive_arrays(n=n, d=d, loss=loss)
    c = 6.0 * n * d if compute is None else _positive_arrays(compute=compute)[0]
    labels, values, grouping, left_out = _grouped(c, n, groups=groups, budgets=budgets, bins_per_decade=bins_per_decade,
                                                  budget_rtol=budget_rtol, max_budget_ratio=max_budget_ratio)
    found = []
    for k in sorted(set(labels.tolist()) - {-1}):
        index = np.flatnonzero(labels == k)
        if index.size:
            index = index[in_window(n[index], loss[index], window)]
            minimum, parabola = _parabola_minimum(n[index], loss[index], values[k], flops)
            found.append((minimum, Profile(index[np.argsort(n[index], kind="stable")], parabola)))
    found.sort(key=lambda pair: pair[0].compute)
    minima = [m for m, _ in found]
    common: dict[str, Any] = dict(
        budgets=minima, grouping=grouping, n_left_out_runs=left_out, profiles=tuple(p for _, p in found),
        window=None if window is None else f"each parabola on the sizes within {window:g} decade(s) of N "
                                           "of its budget's lowest loss (at least 3)")
    usable = [b for b in minima if b.usable]
    cs = np.array([b.compute for b in usable])
    if len(usable) < 2 or np.ptp(np.log(cs)) < math.log(SAME_BUDGET):   # near-equal budgets are one
        apart = "" if len(usable) < 2 else f", all within {SAME_BUDGET:g}x of each other (one budget)"
        return IsoFLOPResult(None, None, None, None, None, None, **common,
                             reason=f"{len(usable)} budget(s) with a minimum inside the sampled range{apart}; "
                                    f"need at least 2 budgets apart (of {len(minima)})")
    n_fit = fit_power_law(cs, [b.n_opt for b in usable])
    d_fit = fit_power_law(cs, [b.d_opt for b in usable])
    return IsoFLOPResult(n_fit.exponent, d_fit.exponent, n_fit.ci, d_fit.ci, n_fit, d_fit, **common)


def _grouped(c: np.ndarray, n: np.ndarray, *, groups: npt.ArrayLike | None, budgets: npt.ArrayLike | None,
             bins_per_decade: float | None, budget_rtol: float, max_budget_ratio: float
             ) -> tuple[np.ndarray, dict[int, float], str, int]:
    """(each run's budget label, -1 for a run left out; label -> the budget's C; how the runs were
    grouped; the number left out), by `isoflop`'s order of precedence."""
    if groups is not None:
        _, labels = np.unique(np.asarray(groups), return_inverse=True)
        values = {k: float(np.exp(np.log(c[labels == k]).mean())) for k in np.unique(labels)}
        return labels, values, f"planned budgets ({len(values)}), C the mean of each budget's runs", 0
    if budgets is not None:
        centres = np.sort(np.asarray(budgets, dtype=float).ravel())
        if centres.size == 0 or not np.all(np.isfinite(centres)) or np.any(centres <= 0):
            raise UsageError("budgets must be positive, finite FLOP values")
        dist = np.abs(np.log(c[:, None] / centres[None, :]))
        labels = dist.argmin(axis=1)
        labels[dist.min(axis=1) > math.log(max_budget_ratio)] = -1
        values = {k: float(centres[k]) for k in range(len(centres))}
        return (labels, values, f"given budgets ({len(centres)}), runs within a factor {max_budget_ratio:g}",
                int((labels < 0).sum()))
    labels, grouping = _budget_groups(c, n, bins_per_decade, budget_rtol)
    return labels, {k: float(np.exp(np.log(c[labels == k]).mean())) for k in np.unique(labels)}, grouping, 0


# ----------------------------------------------------------------------------- Approach 1

CURVE_COLUMNS = ("run_id", "n", "tokens", "loss")


@dataclass(frozen=True)
class EnvelopeResult:
    """Approach 1. `frontier` has one row per FLOP value kept: compute, n, d, loss, run_id."""

    a: float | None
    b: float | None
    n_fit: PowerLaw | None
    d_fit: PowerLaw | None
    frontier: pd.DataFrame
    n_grid: int                       # FLOP values examined
    n_unbracketed: int                # left out: no covering run smaller or larger than the winner
    n_winning_sizes: int              # distinct N on the kept frontier
    reason: str | None = None
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        """The entry `approaches.approach_1` of a fit.json (read by `scaling compare`)."""
        return {"method": "envelope", "a": self.a, "b": self.b, "a_ci": None, "b_ci": None,
                "interval": None, "n_grid": self.n_grid, "n_kept": int(len(self.frontier)),
                "n_unbracketed": self.n_unbracketed, "n_winning_sizes": self.n_winning_sizes,
                "reason": self.reason, "notes": list(self.notes)}


def envelope(curves: pd.DataFrame, *, n_grid: int = 1500, flops: FlopsPerToken = FlopsPerToken()) -> EnvelopeResult:
    """Approach 1 on training curves: columns run_id, n, tokens, loss (one row per evaluation).

    At each of `n_grid` log-spaced FLOP values between the smallest and largest 6 N tokens
    observed, each run whose curve spans that value contributes its loss interpolated linearly
    in log FLOPs; the lowest wins. A winner is kept only when it is bracketed: some run with
    smaller N and some with larger N also span that FLOP value. Without that, the optimum may
    lie at a size that was not trained (or not trained that far), and the envelope would put
    it at the edge of the sizes, biasing a.

    No interval is given for a: neighbouring FLOP values share winners, so the grid points are
    far from independent and a least-squares standard error would be too small. The number of
    distinct winning sizes is the honest count of information.
    """
    runs = _curve_runs(curves, flops)
    empty = pd.DataFrame(columns=["compute", "n", "d", "loss", "run_id"])
    if len(runs) < 3:
        return EnvelopeResult(None, None, None, None, empty, 0, 0, 0,
                              reason=f"{len(runs)} runs with 2 or more evaluations; need at least 3")

    lo = min(r[2][0] for r in runs)
    hi = max(r[2][-1] for r in runs)
    grid = np.linspace(lo, hi, n_grid)
    sizes = np.array([r[1] for r in runs])
    table = np.full((len(runs), n_grid), np.inf)
    for i, (_, _, logf, ls) in enumerate(runs):
        covers = (grid >= logf[0]) & (grid <= logf[-1])
        table[i, covers] = np.interp(grid[covers], logf, ls)
    winner = table.argmin(axis=0)
    covered = np.isfinite(table)
    rows, unbracketed = [], 0
    for j in range(n_grid):
        w = winner[j]
        if not covered[w, j]:
            continue
        smaller = np.any(covered[:, j] & (sizes < sizes[w]))
        larger = np.any(covered[:, j] & (sizes > sizes[w]))
        if not (smaller and larger):
            unbracketed += 1
            continue
        cflop = math.exp(grid[j])
        rows.append({"compute": cflop, "n": sizes[w], "d": float(flops.tokens(cflop, sizes[w])),
                     "loss": float(table[w, j]), "run_id": runs[w][0]})
    frontier = pd.DataFrame(rows, columns=list(empty.columns))
    winning = int(frontier.n.nunique()) if len(frontier) else 0
    notes = []
    if winning < 3:
        return EnvelopeResult(None, None, None, None, frontier, n_grid, unbracketed, winning,
                              reason=f"{winning} distinct model sizes win somewhere on the bracketed "
                                     "frontier; need at least 3 to fit a slope")
    if winning < 5:
        notes.append(f"only {winning} model sizes win on the frontier: a is coarse")
    n_fit = fit_power_law(frontier.compute, frontier.n)
    d_fit = fit_power_law(frontier.compute, frontier.d)
    return EnvelopeResult(n_fit.exponent, d_fit.exponent, n_fit, d_fit, frontier, n_grid,
                          unbracketed, winning, notes=notes)


def _curve_runs(curves: pd.DataFrame, flops: FlopsPerToken) -> list[tuple]:
    """(run_id, N, log FLOPs, loss) of each run with 2 or more evaluations of positive, finite
    N, tokens and loss, its evaluations in token order (the last of equal tokens kept)."""
    missing = [col for col in CURVE_COLUMNS if col not in curves.columns]
    if missing:
        raise UsageError(f"curves lack column(s) {', '.join(missing)}; need {', '.join(CURVE_COLUMNS)}")
    df = curves.loc[:, list(CURVE_COLUMNS)].copy()
    for col in ("n", "tokens", "loss"):
        df[col] = pd.to_numeric(df[col], errors="coerce")
    df = df[np.isfinite(df[["n", "tokens", "loss"]]).all(axis=1) & (df.n > 0) & (df.tokens > 0)]
    runs = []
    for run_id, g in df.groupby("run_id", sort=True):
        if g.n.nunique() != 1:
            raise UsageError(f"run {run_id!r} has more than one N in its curve")
        g = g.sort_values("tokens").drop_duplicates("tokens", keep="last")
        if len(g) < 2:
            continue
        logf = np.log(flops.per_token(g.n.iloc[0]) * g.tokens.to_numpy())
        runs.append((run_id, float(g.n.iloc[0]), logf, g.loss.to_numpy()))
    return runs
