"""The extrapolation rule: how a prediction's error grows beyond the fitted compute, learned from a
table's own leave-future-out cuts (`scaling.laws.checks.backtest`) and the public tables' fallback.

    rule = learn_extrapolation(check.cuts, noise=fit.residual_rms)
    center, lo, hi = rule.widen(law.loss(n, d), distance(c, fitted_max))

A law refitted on the runs below a cut errs on the runs above by an amount that grows with the
distance in decades of compute: a bias (the public tables' laws over-predict) and a spread. Each
distinct cut gives one observation of both; they are shrunk towards the fallback (`fallback`: the
public tables' pessimism for a table of under-trained runs, no bias for one trained at least
WELL_TRAINED_TPP tokens per parameter) as far as the cuts measured them (`table_bias`), the growth
kept above `GROWTH_FLOOR` and widened where the table's own cuts erred more than its other cuts
allowed (`calibration`); where the law's E sits far below its runs (E_FAR), its bias is unknown
and widens the interval too (`unknown_bias`). `rule_beyond` is the whole rule. Beyond the data
the interval is never narrower than the law's own estimation error there (`at_least`: binding
where a law is fitted on few runs far beneath what it predicts). Pure: cuts in, a frozen rule out.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, overload

import numpy as np
import numpy.typing as npt

from scaling.laws.fitting.quantiles import normal_quantile, student_quantile

if TYPE_CHECKING:
    from scaling.laws.checks.backtest import Cut

LEVEL = 0.95


@dataclass(frozen=True)
class Extrapolation:
    """How a prediction's error grows beyond the fitted compute: its log error at a distance of x
    decades is taken as normal with mean `bias` * x and standard deviation sqrt(noise^2 +
    (growth * x^power)^2 + (bias_sd * x)^2), noise the runs' own scatter (the residual RMS of the
    law that predicts).

    bias: per decade of compute, in log loss; growth: the standard deviation at one decade, in log
    loss. power: 1/2 (the rule since the fresh tables: the error's variance grows in proportion to
    the distance, as the public tables' errors do, `learn_extrapolation`), or 1 (a fit.json written
    before it, whose growth was per decade). n_cuts: the table's own backtest cuts they were learned
    from (0: the fallback alone). source: in words. calibration: the factor (>= 1) the growth was
    widened by because the table's own cuts erred more than the rule learned from its other cuts
    allowed (`calibration`; 1 where they did not, or a fit.json written before it). bias_sd: per
    decade, how far the bias may err where the cuts could not measure it (`unknown_bias`; 0 where
    they could, or a fit.json written before it)."""

    growth: float
    bias: float
    n_cuts: int
    source: str
    noise: float = 0.0
    power: float = 1.0
    calibration: float = 1.0
    bias_sd: float = 0.0

    def widen(self, predicted: npt.ArrayLike, distance: npt.ArrayLike, level: float = LEVEL,
              estimation: npt.ArrayLike = 0.0, dof: float = math.inf) -> tuple:
        """(center, lo, hi): the prediction moved by the bias and its interval for a run `distance`
        decades of compute beyond the fitted runs (broadcasts over arrays). `estimation`: the sd of
        the log prediction owed to estimating the law from its runs (`precision.prediction_sd`; 0 or
        inf: not measured), with `dof` degrees of freedom left by its fit: beyond the data the
        interval is never narrower than that error and the runs' scatter together (`at_least`)."""
        x = np.maximum(np.asarray(distance, dtype=float), 0.0)
        center = np.asarray(predicted, dtype=float) * np.exp(self.bias * x)
        sd = np.sqrt(self.noise ** 2 + (self.growth * x ** self.power) ** 2 + (self.bias_sd * x) ** 2)
        z = normal_quantile(0.5 + level / 2.0)
        sd = np.where(x > 0, np.maximum(sd, at_least(self.noise, estimation, dof, level) / z), sd)
        out = (center, center * np.exp(-z * sd), center * np.exp(z * sd))
        return tuple(float(v) for v in out) if np.ndim(center) == 0 else out

    def to_json(self) -> dict:
        return {"growth": self.growth, "bias": self.bias, "n_cuts": self.n_cuts, "source": self.source,
                "noise": self.noise, "power": self.power, "calibration": self.calibration, "bias_sd": self.bias_sd}

    @classmethod
    def from_json(cls, obj: dict) -> Extrapolation:
        return cls(float(obj["growth"]), float(obj["bias"]), int(obj["n_cuts"]), str(obj["source"]),
                   float(obj.get("noise", 0.0)), float(obj.get("power", 1.0)), float(obj.get("calibration", 1.0)),
                   float(obj.get("bias_sd", 0.0)))


# The fallback, learned on the public tables (bench/bench_backtest.py --learn): the bias is the dev
# half's pooled log error per decade (the law over-predicts: -2.7% per decade), the pessimism of
# tables of under-trained runs (below WELL_TRAINED_TPP; `fallback`). The growth, 2% (1 sd
# at one decade, growing as the square root of the distance), and its floor GROWTH_FLOOR were tuned
# for coverage on the dev half and the old held-out half together, once the held-out half had been
# seen: the rule before them (a linear growth learned from a table's own cuts), tuned on the dev
# half, held 66% and 71% at 3x and 10x when the held-out half was run once (docs/backtests.md, "The
# public tables: method, halves, figures"). For the growth a table's own cuts count as
# one observation each (cuts with the same runs below them once) against PRIOR_WEIGHT observations
# of the fallback; for the bias, as far as their refits measured it (`table_bias`).
PRIOR = Extrapolation(growth=0.02, bias=-0.027, n_cuts=0, source="the public tables' development halves",
                      power=0.5)
PRIOR_WEIGHT = 1.0
# How far a table's own bias per decade may lie from the fallback's: the spread of the development
# half's tables' biases about it (rms 3.63% per decade over the 23 outer splits of bench_backtest.py,
# of which their own standard errors, `measured_bias`, explain 2.41%: sqrt(3.63^2 - 2.41^2) = 2.7%
# is the tables'; `bench_backtest.py --spread`). A table's bias is trusted as far as it is measured more
# precisely than this.
BIAS_SPREAD = 0.027
# A table's two to four cuts, nested and fitted to overlapping runs, can show that its errors grow
# faster than the public tables' do, not that they grow slower: its own spread is not let below
# this (1 sd at one decade; the public tables' errors at 3x, 10x and 30x, 1.2%, 2.0% and 2.5%, grow
# about as the square root of the distance).
GROWTH_FLOOR = 0.0175
# The public tables' pessimism is that of under-trained runs: the tables whose law over-predicted
# its larger runs (Marin's, Porian et al.'s, the misfitting table, datablations: most of the dev
# half the fallback's -2.7% per decade was learned on) have a median of 4-11 tokens per parameter,
# IsoFLOP grids reaching far into models too large for their budgets; the tables whose median run
# is trained at least Chinchilla's compute-optimal 20 (Chinchilla's own, Gadre et al.'s
# over-trained runs) erred a median -0.8% and -0.4% per decade, Gadre et al.'s plain law 1.2-1.6%
# at 3x and 10x where the fallback made it 2.7-5.5% (docs/backtests.md, "When the bias applies").
# For them the fallback bias is 0: their own cuts still move it as far as they measured a bias. No
# public table has a median between 12.5 and 20: any threshold there splits them alike; 20 is the
# field's, not a fit (Gadre et al.'s 30x splits sit at exactly 20).
WELL_TRAINED_TPP = 20.0
# E below this share of the lowest loss is far below anything the runs reached: the floor the law
# extrapolates to is then set by the form, not the runs (on the public tables, the fits whose E fell
# towards 0 were those that missed by 15-25% beyond their data; docs/fitting.md). A quarter: a
# small sweep's lowest loss can honestly lie 2-3x above E (a 3e18-FLOP sweep of a law with E =
# 1.9 reaches 4.8), and that alone is not a fault. The verdict's E check cautions there; beyond
# the data the bias is then unknown (`unknown_bias`).
E_FAR = 0.25


def at_least(noise: float, estimation: npt.ArrayLike, dof: float, level: float = LEVEL) -> np.ndarray:
    """The least half-width (in log loss) of a prediction interval beyond the data: the runs' scatter
    and the law's own estimation error there (`estimation`, the Gauss-Newton sd of the log
    prediction; inf, where the runs cannot separate the constants, counts as not measured: 0), at
    Student's t for the `dof` degrees of freedom its fit left. The rule's growth was learned from
    cuts' refits (and the fallback from the public tables' cuts) whose own estimation error it
    includes; a law fitted on fewer runs than they were, far beyond them, errs by more. OLMo's
    ladder, fitted on 8 runs at 3 sizes (3 degrees of freedom, t = 3.18 against 1.96) 1.8 decades
    beneath its 3B runs, over-predicted them by 9% with the fallback's interval holding none; its own
    estimation error was 3.4% (docs/backtests.md, "Cuts of the minimum size"). A floor, not a
    sum: where the cuts measured the error, their growth holds the estimation error once."""
    est = np.asarray(estimation, dtype=float)
    est = np.where(np.isfinite(est), est, 0.0)
    q = 0.5 + level / 2.0
    return np.hypot(normal_quantile(q) * noise, student_quantile(q, max(dof, 1.0)) * est)


def fallback(tokens_per_param: float, prior: Extrapolation = PRIOR,
             well_trained: float = WELL_TRAINED_TPP) -> Extrapolation:
    """The fallback rule for a table whose runs have a median of `tokens_per_param`: `prior`, its
    bias where the runs are under-trained on the whole (below `well_trained`), none where not."""
    if not tokens_per_param >= well_trained:
        return prior
    return replace(prior, bias=0.0, source=f"{prior.source} (no bias: runs trained a median "
                                          f"{tokens_per_param:.0f} tokens per parameter)")


def unknown_bias(rule: Extrapolation, cuts: Iterable[Cut]) -> Extrapolation:
    """`rule` for a law whose E sits far below its runs (E_FAR): its floor is the form's, not the
    runs', and no cut can say how far that floor is off (their refits lose E too, and with it the
    precision of their bias). The bias is then unknown, as large either way as the largest slope
    any cut showed about it, and the interval carries it (`bias_sd`). In simulation a law whose
    data exponent grows with N, fitted with E at its bound, missed runs 30x beyond by 20% with
    intervals holding 10% of them; with this 86% (docs/backtests.md)."""
    made = distinct_cuts(cuts)
    if not made:
        return rule
    r, x = cut_slopes(made)
    return replace(rule, bias_sd=float(np.max(np.abs(r / x - rule.bias))))


def rule_beyond(cuts: Iterable[Cut], *, tokens_per_param: float, E: float | None, lowest_loss: float,
                noise: float = 0.0, prior: Extrapolation = PRIOR,
                well_trained: float = WELL_TRAINED_TPP) -> Extrapolation:
    """The rule beyond the data of a law with floor `E` (None: pinned by the user), fitted to runs
    with a median of `tokens_per_param` whose lowest loss is `lowest_loss`: learned from its cuts
    with the fallback for such runs (`fallback`), its bias left unknown where the fit put E far
    below the runs (`unknown_bias`). `prior` and `well_trained`: the fallback and its gate, other
    than the frozen ones only where a bench relearns them (bench_backtest.py --loso)."""
    cuts = list(cuts)
    rule = learn_extrapolation(cuts, prior=fallback(tokens_per_param, prior, well_trained), noise=noise)
    return unknown_bias(rule, cuts) if E is not None and E < E_FAR * lowest_loss else rule


def distinct_cuts(cuts: Iterable[Cut]) -> list[Cut]:
    """The made cuts, one per distinct set of runs below a cut (the 2x and 3x cuts of budgets 3x
    apart fit the same runs: counted twice they would claim an agreement the table never showed)."""
    made, seen = [], set()
    for c in (c for c in cuts if c.made and c.errors):
        if (c.n_train, c.train_max_compute) not in seen:
            seen.add((c.n_train, c.train_max_compute))
            made.append(c)
    return made


def learn_extrapolation(cuts: Iterable[Cut], prior: Extrapolation = PRIOR, weight: float = PRIOR_WEIGHT,
                        noise: float = 0.0, floor: float = GROWTH_FLOOR, calibrate: bool = True,
                        bias: float | None = None) -> Extrapolation:
    """The bias per decade and the growth of the log error from the made cuts, one observation per
    distinct set of runs below a cut (`distinct_cuts`). Each cut gives its median log residual r at
    its median distance x: a slope r / x for the bias, and (r - bias x) / x^power for the growth;
    both are shrunk towards `prior` as if it were `weight` cuts, and the growth is not let below
    `floor`; with `calibrate`, it is then widened by what the cuts' own errors say (`calibration`).
    `noise`: the scatter of the runs about the law that predicts. `bias`: given, not learned (the
    median of the forms, `checks.combined`, whose members' biases are in its predictions already)."""
    made = distinct_cuts(cuts)
    r, x = cut_slopes(made)
    k = r.size
    bias = table_bias(made, prior, weight) if bias is None else bias
    spread = (np.sum(((r - bias * x) / x ** prior.power) ** 2) + weight * prior.growth ** 2) / (k + weight)
    source = prior.source if k == 0 else f"this table's backtest ({k} cut{'s' * (k != 1)}) and {prior.source}"
    rule = Extrapolation(max(float(math.sqrt(spread)), floor), float(bias), k, source, float(noise), prior.power)
    if not calibrate or k < 2:
        return rule
    c = calibration(made, lambda others: learn_extrapolation(others, prior, weight, noise, floor, False, bias))
    return replace(rule, growth=rule.growth * c, calibration=c)


def cut_slopes(made: list) -> tuple[np.ndarray, np.ndarray]:
    """(r, x): each cut's median log residual and its median distance in decades (at least 0.1)."""
    return (np.array([np.median(c.log_residuals) for c in made]),
            np.array([max(float(np.median(c.distances)), 0.1) for c in made]))


def measured_bias(made: list) -> tuple[float, float] | None:
    """(the cuts' own bias per decade, its variance): their slopes r / x weighted by precision
    (`with_precision`), the variance one cut's, not theirs together (the cuts are nested, each
    refit's runs holding the next's, and their errors far from independent). None where a cut
    does not know its precision (a fit.json from before, a forms' cut) or none has any."""
    if not made or not all(c.prediction_sd for c in made):
        return None
    r, x = cut_slopes(made)
    se = np.array([float(np.median(c.prediction_sd)) for c in made]) / x
    w = np.where(np.isfinite(se), 1.0 / np.maximum(se, 1e-12) ** 2, 0.0)
    if w.sum() == 0:
        return None
    return float(np.sum(w * r / x) / w.sum()), float(np.count_nonzero(w) / w.sum())


def table_bias(made: list, prior: Extrapolation, weight: float) -> float:
    """The bias per decade beyond the data. Where the cuts measured it (`measured_bias`): their
    bias, shrunk towards the fallback as a normal prior of sd BIAS_SPREAD would shrink it, by
    BIAS_SPREAD^2 / (BIAS_SPREAD^2 + var). A table whose refits could have erred as much by chance
    (few runs, wide scatter) keeps about the fallback; one measured precisely about its own. Where
    every cut's precision is unknown (inf: its refit cannot separate the constants, E at its
    bound) the fallback; where no cut knows it, the cuts' mean slope with the fallback as `weight`
    cuts (as before the precision was measured)."""
    measured = measured_bias(made)
    if measured is not None:
        own, var = measured
        return prior.bias + (own - prior.bias) * BIAS_SPREAD ** 2 / (BIAS_SPREAD ** 2 + var)
    if made and all(c.prediction_sd for c in made):
        return prior.bias
    r, x = cut_slopes(made)
    return float((np.sum(r / x) + weight * prior.bias) / (r.size + weight))


def calibration(made: list, learn: Callable[[list], Extrapolation]) -> float:
    """How much wider than the rule the table's own cuts say its intervals must be: each cut's runs
    are predicted by the rule learned from the other cuts, and their standardised log errors z
    compared with a normal's (median |z| = 0.674); the factor is their median |z| over 0.674, at
    least 1. Shrinkage towards the public tables cannot see a table whose errors outgrow them (a
    law whose form drifts from the truth as the runs grow: docs/backtests.md, "In simulation"); its
    own cuts, each judged on its own, can. The median keeps one wild cut from deciding it."""
    z = []
    for j, cut in enumerate(made):
        rule = learn(made[:j] + made[j + 1:])
        x = np.maximum(np.asarray(cut.distances, dtype=float), 0.0)
        z.extend(np.abs(cut.log_residuals - rule.bias * x) / np.hypot(rule.noise, rule.growth * x ** rule.power))
    return max(1.0, float(np.median(z)) / normal_quantile(0.75))


def growth_text(rule: Extrapolation) -> str:
    """How the interval widens, in words: 1 sd of log loss at one decade and how it grows."""
    how = "per decade" if rule.power == 1 else f"at one decade, growing as decades^{rule.power:g}"
    return f"{100 * rule.growth:.2f}% (log loss, 1 sd) {how}"


@overload
def distance(compute: float, fitted_max: float) -> float: ...
@overload
def distance(compute: npt.ArrayLike, fitted_max: float) -> float | np.ndarray: ...
def distance(compute: npt.ArrayLike, fitted_max: float) -> float | np.ndarray:
    """Decades of compute beyond the largest fitted run (0 inside the data); broadcasts."""
    far = np.log10(np.asarray(compute, dtype=float) / fitted_max)
    # A budget the data hold, counted twice in float (3.2000000000000333e18 against ...0005e18), is inside.
    far = np.where(far > 1e-9, far, 0.0)
    return float(far) if np.ndim(far) == 0 else far
