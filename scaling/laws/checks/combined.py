"""The median of the forms: one prediction beyond the data from every law form that predicts.

    median = combine(forms.entries)                       # from the forms already fitted (no refit)
    center, lo, hi = median.predict(forms.entries, n, d, far, floor=fit.backtest)

Why: no one form wins across the public tables, and the form the data favour inside them is not the
one that predicts best beyond them (choosing the form by an inner backtest picked the outer winner
in 12 of 32 splits, docs/fitting.md). Where each form errs its own way, the middle of their
predictions errs less than most of them: on the public tables the geometric median of the four
predicting forms' predictions erred less than the Chinchilla form alone in 8 of 9 (half, factor)
cells, the unseen tables included (docs/fitting.md, "The median of the forms").

The prediction for a run `far` decades beyond the fitted compute is the geometric median of the
predictions each member form makes there (`FormEntry.predict`'s center: its law moved by the bias
its own backtest measured): chinchilla, tied, kaplan and farseer where they could be fitted (MEMBERS;
fixed-E only where the user pinned E, never the oracle at the table's own E). Its interval is its
own: the forms' backtest cuts predict the same top runs, so each cut gives the median's prediction
of every run (the geometric median of the forms' predictions, each moved by its bias as it predicts
beyond the data), and the rule beyond the data is learned from those cuts by the Chinchilla fit's
machinery (`extrapolation.learn_extrapolation`: the growth shrunk towards the public tables', the
calibration by the cuts' own errors), with its own floor (MEDIAN_FLOOR: the median's errors grow
slower than the Chinchilla fit's), the runs' scatter the members' median residual RMS. The members'
biases are already in their predictions: the median's is none (NO_BIAS).
Where the fitted form's E sits far below its runs (`extrapolation.rule_beyond`: its bias unknown),
the median's bias is unknown too, as far as its own cuts' slopes (`unknown_bias`) or the fitted
form's unknown bias say, whichever is larger: without it, on sweeps whose data exponent grows with N,
its intervals held 48% and 0% of the runs 10x and 30x beyond (docs/fitting.md).
Beyond the data its interval is never narrower than the estimation error of the law the default
predicts by (the fit's backtest law: its covariance and degrees of freedom, `extrapolation.at_least`),
as the default's is: its cuts' growth is learned from refits of 20-170 runs, and a table of few
runs errs far out by more (the OLMo ladder's 30x split, 8 runs at 3 sizes; docs/backtests.md,
"Cuts of the minimum size"). Under leave-one-source-out without it its 30x intervals held 93% of
the runs (Gemstones 20 of 23), with it 97% ("Candidate C").
Pure: fitted forms in, numbers out.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt

from scaling.laws.checks import backtest as bt
from scaling.laws.checks import extrapolation as xp

NAME = "median"
MEMBERS = ("chinchilla", "tied", "kaplan", "farseer", "fixed-E")   # fixed-E: only where the user pinned E
FACTORS = (3.0, 10.0, 30.0)                                          # the forms' cuts (cross_forms.FACTORS)
# The members' biases are in their predictions, so the median's bias is none: neither the public
# tables' pessimism (it would count twice) nor a bias learned from its own cuts (whose members' biases
# were learned on those same cuts; moved by it, the median erred 0.88 / 2.43 / 3.43% at 3x / 10x /
# 30x on the dev half in place of 0.74 / 1.55 / 3.00%, docs/fitting.md). The growth's fallback and the
# calibration are the Chinchilla fit's, the growth measured about no bias; its floor is its own (below).
NO_BIAS = replace(xp.PRIOR, bias=0.0, source="the public tables' development halves (no bias: the forms' own "
                                             "biases are in their predictions)")
# A table's own cuts can show that the median's errors grow faster than on the public tables, not that
# they grow slower: its growth is not let below that of the median's own cut errors on the dev half's
# tables, pooled (24 cuts, 1 sd at one decade; `bench_backtest.py --learn --form median`), as the
# Chinchilla fit's is not let below GROWTH_FLOOR (1.75%), which the median's interval sat on in 12 of
# the 24 dev splits while erring less (docs/backtests.md, "The median of the forms: its interval").
MEDIAN_FLOOR = 0.0158


@dataclass(frozen=True)
class Combined:
    """The median of the forms: `members` the forms it combines, `cuts` its backtest (each run's
    prediction the geometric median of the members' cut predictions), `extrapolation` the rule
    learned from them, `prediction` {"loss", "lo", "hi"} for the target run (None without one)."""

    members: tuple
    cuts: tuple
    extrapolation: xp.Extrapolation
    prediction: dict | None = None

    def predict(self, entries: Iterable, n: npt.ArrayLike, d: npt.ArrayLike, far: npt.ArrayLike, *,
                floor: bt.Backtest | None, level: float = xp.LEVEL, noise: bool = True) -> tuple:
        """(center, lo, hi) for runs N, D `far` decades beyond the fitted compute (broadcasts): the
        geometric median of the members' predictions, its interval the median's own rule's (with a
        run's scatter where `noise`, else the expected loss's), beyond the data never narrower than
        the estimation error of the law `floor` predicts by (the fit's backtest, `LawFit.backtest`:
        its covariance and degrees of freedom, `extrapolation.at_least`, as the default's interval
        is; None: no floor, a fit without a backtest)."""
        chosen = [e for e in entries if e.name in self.members]
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            logs = np.log([np.asarray(e.predict(n, d, far, level=level, noise=False)[0], dtype=float)
                           for e in chosen])
        center = np.exp(np.median(logs, axis=0))
        rule = self.extrapolation if noise else replace(self.extrapolation, noise=0.0)
        if floor is None:
            out = rule.widen(center, far, level)
        else:
            out = rule.widen(center, far, level, estimation=floor.estimation_sd(n, d), dof=floor.dof)
        return tuple(np.asarray(v, dtype=float) for v in out) if np.ndim(center) else tuple(float(v) for v in out)

    def raw_cuts(self, entries: Iterable) -> tuple:
        """Its cuts as every form's are shown (`cross_forms.format_forms`, the report's forms table and
        figure): each run's error the geometric median of the members' refits' own errors, unmoved by
        their biases, as each other form's is its refit's own; `cuts`, its interval's basis, are moved."""
        chosen = [e for e in entries if e.name in self.members]
        return tuple(_cuts(chosen, [0.0] * len(chosen), sorted({c.factor for c in self.cuts})))

    def as_backtest(self, fitted: bt.Backtest) -> bt.Backtest:
        """Its cuts and rule as a Backtest, for what judges and reports one (`backtest_verdict.
        backtest_check`, `backtest_text.summary_line`): `fitted` the fitted law's, whose cuts that could
        not be made say why where the median has none."""
        cuts = self.cuts or tuple(c for c in fitted.cuts if not c.made)
        return bt.Backtest(cuts, self.extrapolation, fitted.level, fitted.by)

    def to_json(self) -> dict:
        return {"name": NAME, "members": list(self.members), "cuts": [c.to_json() for c in self.cuts],
                "extrapolation": self.extrapolation.to_json(), "prediction": self.prediction}

    @classmethod
    def from_json(cls, obj: dict) -> Combined:
        return cls(tuple(str(m) for m in obj["members"]), tuple(bt.Cut.from_json(c) for c in obj.get("cuts") or ()),
                   xp.Extrapolation.from_json(obj["extrapolation"]), obj.get("prediction"))


def members(entries: Iterable) -> list:
    """The forms that predict: fitted, among MEMBERS, and not the oracle (fixed-E at the table's E)."""
    return [e for e in entries if e.name in MEMBERS and e.params is not None and not e.oracle]


def combined_cut(cuts: Sequence[bt.Cut], biases: Sequence[float]) -> bt.Cut | None:
    """The median's cut from the members' cuts at one factor (the same top runs, the same runs
    below): each run's prediction the geometric median of the members' raw predictions, each moved
    by its member's bias per decade (`biases`) at the run's distance, as the member predicts beyond
    the data. None where fewer than two members made the cut on the same runs."""
    made = [(c, b) for c, b in zip(cuts, biases) if c.made and c.errors]
    runs = [(len(c.errors), c.n_train, c.test_compute) for c, _ in made]
    if not runs:
        return None
    common = max(runs, key=runs.count)             # the runs most members' cuts were made on
    same = [pair for pair, key in zip(made, runs) if key == common]
    if len(same) < 2:
        return None
    first = same[0][0]
    x = np.maximum(np.asarray(first.distances, dtype=float), 0.0)
    logs = [np.log1p(np.asarray(c.raw_errors or c.errors, dtype=float)) + b * x for c, b in same]
    errors = np.expm1(np.median(logs, axis=0))
    return replace(first, errors=tuple(float(v) for v in errors), raw_errors=(), half_widths=(), covered=None,
                   law=None, prediction_sd=())


def judged(cut: bt.Cut, rule: xp.Extrapolation, level: float = xp.LEVEL) -> bt.Cut:
    """`cut` with its runs' intervals under the median's `rule` at their distances: how many held
    (`covered`) and their half-widths. The rule was learned from these cuts (the Chinchilla fit's
    cuts are judged by rules learned below each, `backtest._interval_cut`): in-sample, as far as
    their calibration goes (`extrapolation.calibration`, each cut against the others' rule)."""
    ratio = 1.0 + np.asarray(cut.errors, dtype=float)            # predicted / observed
    center, lo, hi = rule.widen(ratio, np.asarray(cut.distances, dtype=float), level)
    return replace(cut, covered=int(np.sum((lo <= 1.0) & (1.0 <= hi))),
                   half_widths=tuple(float(v) for v in (hi - lo) / 2 / center))


def _cuts(chosen: Sequence, biases: Sequence[float], factors: Iterable[float]) -> list[bt.Cut]:
    """The median's cuts at `factors` from the members `chosen`, each moved by its bias in `biases`."""
    cuts = []
    for f in factors:
        at = [(next((c for c in e.cuts if c.factor == f), None), b) for e, b in zip(chosen, biases)]
        made = [(c, b) for c, b in at if c is not None]
        cut = combined_cut([c for c, _ in made], [b for _, b in made])
        if cut is not None:
            cuts.append(cut)
    return cuts


def combine(entries: Iterable, *, factors: Sequence[float] = FACTORS) -> Combined | None:
    """The median of the fitted forms `entries` (`cross_forms.FormEntry`s with their cuts): its
    cuts at `factors` and the rule beyond the data learned from them (see the module's docstring).
    None where fewer than two forms could be fitted."""
    chosen = members(entries)
    if len(chosen) < 2:
        return None
    rules = [e.extrapolation or xp.PRIOR for e in chosen]
    cuts = _cuts(chosen, [r.bias for r in rules], factors)
    noise = float(np.median([e.residual_rms for e in chosen]))
    rule = xp.learn_extrapolation(cuts, prior=NO_BIAS, noise=noise, floor=MEDIAN_FLOOR, bias=0.0)
    unknown = max(r.bias_sd for r in rules)
    if unknown > 0:          # the fitted form's E far below its runs: the median's bias unknown, at least as far
        rule = xp.unknown_bias(rule, cuts)
        rule = replace(rule, bias_sd=max(rule.bias_sd, unknown))
    return Combined(tuple(e.name for e in chosen), tuple(judged(c, rule) for c in cuts), rule)
