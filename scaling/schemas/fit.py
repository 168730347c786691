"""fit.json's sections that report, plan and compare read: their schema.

`scaling.laws.results.fit_schema.check_fit` checks the law, the intervals and the data's ranges (with the
messages it always gave) and then this schema, so every section a later stage prints or computes
with is typed, in range and finite when the file is read. The format is documented in
docs/fit-json.md.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from scaling.schemas import (
    LARGEST,
    Closed,
    Count,
    Finite,
    NonNegative,
    Pair,
    Positive,
    PositivePair,
    Section,
    Text,
    check,
)
from scaling.schemas.beyond import CHOSEN_FORMS, Backtest, Forms
from scaling.schemas.laws import Exponents, Law, Level, Params, Share

VERDICTS = Literal["trustworthy", "use with caution", "not identified"]
STATUSES = Literal["pass", "caution", "not identified"]


class Compute(Section):
    """c(N) = 6 kappa N^gamma FLOPs per token: kappa is 1-4 for every model this package counts
    (the output layer and attention past 6 N), gamma about 1; far beyond (a gamma of 1e-300), the
    allocation's powers of C overflow or vanish."""
    measure: Text
    kappa: Annotated[float, Field(strict=True, allow_inf_nan=False, ge=1e-3, le=1e3)]
    gamma: Annotated[float, Field(strict=True, allow_inf_nan=False, ge=0.1, le=3)]
    max_error: NonNegative


class Approach(Section):
    a: Finite | None = None
    b: Finite | None = None
    a_ci: Pair | None = None
    b_ci: Pair | None = None
    method: Text | None = None
    reason: Text | None = None


class Budget(Section):
    compute: Positive
    n_opt: Positive | None = None
    d_opt: Positive | None = None
    loss_opt: Finite | None = None
    n_range: PositivePair | None = None
    n_runs: Count | None = None
    n_sizes: Count | None = None
    status: Text | None = None


class IsoFlop(Approach):
    budgets: list[Budget] = []


class Approaches(Section):
    """Hoffmann's three approaches, and any other method (vpnls) as an approach of its own."""
    __pydantic_extra__: dict[str, Approach | None]
    approach_1: Approach | None = None
    approach_2: IsoFlop | None = None
    approach_3: Approach | None = None


class KaplanLaw(Section):
    alpha: Finite | None = None
    alpha_ci: Pair | None = None
    x_c: Finite | None = None
    n_points: Count | None = None
    used: Text | None = None
    caveat: Text | None = None


class Kaplan(Section):
    param_convention: Text | None = None
    L_N: KaplanLaw | None = None
    L_D: KaplanLaw | None = None
    L_C: KaplanLaw | None = None
    reasons: list[Text] = []


class Verdict(Section):
    verdict: VERDICTS
    reasons: list[Text] = []


class Check(Section):
    name: Text
    value: Finite | None = None
    threshold: Text | None = None
    status: STATUSES
    reason: Text
    margin: Finite | None = None

    @model_validator(mode="after")
    def _margin_of_a_value(self) -> Check:
        if self.margin is not None and (self.value is None or self.threshold is None):
            raise ValueError("a check with a margin has a value and a threshold")
        return self


class LackOfFitTest(Section):
    by: Text
    F: Finite | None = None
    df: tuple[Count, Count] | None = None
    p_value: Share | None = None
    design_effect: Finite | None = None
    offenders: list = []


class LackOfFit(Section):
    tests: list[LackOfFitTest]
    residual_rms: NonNegative | None = None
    pure_error_rms: NonNegative | None = None
    replicated_cells: Count | None = None
    interval_factor: Annotated[float, Field(strict=True, allow_inf_nan=False, ge=1, le=1e6)] | None = None


class Dropped(Section):
    id: Text | int
    reason: Text


class Filters(Closed):
    drop_highest_loss: Count | None = None
    min_tokens: Positive | None = None
    min_tokens_per_param: Positive | None = None


class Table(Closed):
    """The arguments `readers.from_table` is called with again: exactly its keywords."""
    path: Text
    n_col: Text
    loss_col: Text
    d_col: Text | None = None
    c_col: Text | None = None
    param_convention: Text | None = None
    embedding_col: Text | None = None
    budget_col: Text | None = None
    unique_col: Text | None = None
    unique_tokens: Positive | None = None


class Data(Section):
    dropped: list[Dropped] = []
    filters: Filters | None = None
    table: Table | None = None
    n_points: Count | None = None
    n_budgets: Count | None = None
    loss_range: PositivePair | None = None


class EPriorOptions(Section):
    """The Gaussian prior on E a fit carried (--E-prior, --E-from): penalty scale (E - mean)^2 / (2 sd^2)."""
    mean: Positive
    sd: Positive
    scale: Positive
    source: Text | None = None


class Options(Section):
    delta: Positive | None = None
    grid: Text | None = None
    n_starts: Annotated[int, Field(strict=True, ge=1)] | None = None
    fixed_E: Finite | None = None
    bootstrap: Count = 0
    E_prior: EPriorOptions | None = None


class Allocation(Section):
    a: Finite | None = None
    b: Finite | None = None
    G: Finite | None = None


class Convention(Section):
    """One parameter convention's fit (`analysis.convention_summary`), or why there is none."""
    alpha: Finite | None = None
    a: Finite | None = None
    a_ci: Pair | None = None
    tokens_per_param: Finite | None = None
    tokens_per_param_ci: Pair | None = None
    n_resamples: Count | None = None
    reason: Text | None = None


class HoldoutRow(Section):
    id: Text | int
    n: Positive
    d: Positive
    compute: Positive
    loss: Finite
    predicted: Finite
    full_predicted: Finite
    abs_rel_error: NonNegative


class Holdout(Section):
    fraction: Annotated[float, Field(strict=True, gt=0, lt=1)]
    n_points: Count
    n_train: Count
    train_max_compute: Positive | None = None
    mean_abs_rel_error: NonNegative | None = None
    full_mean_abs_rel_error: NonNegative | None = None
    reason: Text | None = None
    params: Params | None           # the refit's constants: null where there is none, never absent
    rows: list[HoldoutRow]


class CurveLawParams(Section):
    L0: Finite
    A: Finite
    C: Finite
    alpha: Finite
    rms: Finite | None = None
    n_points: Count


class CurveSize(Section):
    n: Positive
    runs: list[Text]
    warmup_steps: list[Count] | None = None
    law: CurveLawParams
    points: list[tuple[Positive, Finite]]


class LeaveOneOut(Section):
    n_runs: Count
    mean_abs_error: NonNegative | None = None
    median_abs_error: NonNegative | None = None
    mean_error: Finite | None = None
    max_abs_error: NonNegative | None = None
    by_reach: dict[str, dict] = {}
    runs: list[dict] = []


class Curves(Section):
    decay: Finite
    decay_profile: list[tuple[Finite, Finite | None]] = []
    params: Exponents
    allocation: Allocation
    reference_compute: Positive
    tokens_per_param_at_reference: Finite | None = None
    residual_rms: NonNegative
    ci: dict | None = None
    sizes: list[CurveSize]
    leave_one_run_out: LeaveOneOut


class Intervals(Section):
    """A "ci" section: its level, resamples and widening, and a [lo, hi] (a bound null where undefined) a name."""
    __pydantic_extra__: dict[str, Pair]
    level: Level = 0.95
    n_resamples: Annotated[int, Field(strict=True, ge=1)] | None = None
    widened_by: Annotated[float, Field(strict=True, allow_inf_nan=False, ge=1, le=LARGEST)] = 1.0


class Repeated(Section):
    """The data-constrained fit (scaling.laws.repeated.section.Repeated): the base law, R_D* (null where
    the runs did not determine it, then `message` says why) and its intervals."""
    params: Law
    r_d_star: Positive | None = None
    n_repeated: Count
    max_epochs: Positive
    unique_range: PositivePair
    objective: NonNegative
    residual_rms: NonNegative
    message: Text = ""
    ci: Intervals | None = None


class FitSections(Section):
    """The sections of fit.json beyond the law, intervals and data ranges (`fit_schema.check_fit`)."""
    seed: Count = 0
    params: Law
    compute: Compute | None = None
    allocation: Allocation | None = None
    reference_compute: Positive | None = None
    tokens_per_param_at_reference: Finite | None = None
    objective: NonNegative | None = None
    n_starts_at_optimum: Count | None = None
    evidence: list[Text] = []
    limitations: list[Text] = []
    options: Options | None = None
    ci: Intervals | None = None
    data: Data | None = None
    approaches: Approaches | None = None
    kaplan: Kaplan | None = None
    verdict: Verdict | None = None
    diagnostics: list[Check] | None = None
    lack_of_fit: LackOfFit | None = None
    param_conventions: dict[str, Convention] | None = None
    holdout: Holdout | None = None
    curves: Curves | None = None
    residual_rms: NonNegative | None = None
    repeated: Repeated | None = None
    backtest: Backtest | None = None
    form: CHOSEN_FORMS = "chinchilla"
    forms: Forms | None = None

    @model_validator(mode="after")
    def _intervals_with_their_scatter(self) -> FitSections:
        # Every fit with intervals measured its residuals: a loss's interval holds the runs' scatter.
        if self.ci is not None and self.residual_rms is None:
            raise ValueError("'residual_rms' must be a number where the file has intervals ('ci'), got null")
        return self


def check_sections(obj: dict, where: str) -> FitSections:
    """The sections report, plan and compare read, checked; UsageError naming `where` and the field."""
    return check(FitSections, obj, where)
