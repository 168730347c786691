"""fit.json's sections that report, plan and compare read: their schema.

`scaling.laws.results.fit_schema.check_fit` checks the law, the intervals and the data's ranges (with the
messages it always gave) and then this schema, so every section a later stage prints or computes
with is typed, in range and finite when the file is read. The format is documented in
docs/fit-json.md.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, Field, model_validator

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


def _not_vanishing(value: float) -> float:
    if value != 0 and abs(value) < SMALLEST_EXPONENT:
        raise ValueError(f"must be 0 or at least {SMALLEST_EXPONENT:g} in size (the allocation divides by it)")
    return value


# The law's exponents a file may hold. Published exponents are below 1, but the fit's exponents are
# unbounded and a narrow table can end far out (alpha 8.4, its hold-out refit's 11.0, on 6 sizes
# within 1.3x), and what `fit` writes must be read back. Up to +-25, the N and D of real sweeps
# (below 1e12) raise N^alpha to at most 1e300, inside a float; below 1e-6 (1e-320 say) the
# allocation divides by zero.
SMALLEST_EXPONENT = 1e-6
LARGEST_EXPONENT = 25.0
Exponent = Annotated[float, Field(strict=True, allow_inf_nan=False, ge=-LARGEST_EXPONENT, le=LARGEST_EXPONENT),
                     AfterValidator(_not_vanishing)]
Share = Annotated[float, Field(strict=True, allow_inf_nan=False, ge=0, le=1)]
VERDICTS = Literal["trustworthy", "use with caution", "not identified"]
STATUSES = Literal["pass", "caution", "not identified"]


class Exponents(Section):
    alpha: Exponent
    beta: Exponent


class Params(Exponents):
    E: NonNegative
    A: NonNegative
    B: NonNegative


# A and B of the law itself: below 1e-300 (a denormal, 1e-320) its allocation G divides by zero.
Coefficient = Annotated[float, Field(strict=True, allow_inf_nan=False, ge=1e-300, le=LARGEST)]


class Law(Exponents):
    E: NonNegative
    A: Coefficient
    B: Coefficient


class Compute(Section):
    """c(N) = 6 kappa N^gamma FLOPs per token: kappa is 1-4 for every model this package counts
    (the output layer and attention past 6 N), gamma about 1; far beyond, the allocation's
    powers of C overflow or vanish."""
    measure: Text
    kappa: Annotated[float, Field(strict=True, allow_inf_nan=False, gt=0, le=1e3)]
    gamma: Annotated[float, Field(strict=True, allow_inf_nan=False, gt=0, le=3)]
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
    predicted: Finite | None = None
    full_predicted: Finite | None = None
    abs_rel_error: NonNegative | None = None


class Holdout(Section):
    fraction: Annotated[float, Field(strict=True, gt=0, lt=1)]
    n_points: Count
    n_train: Count
    train_max_compute: Positive | None = None
    mean_abs_rel_error: NonNegative | None = None
    full_mean_abs_rel_error: NonNegative | None = None
    reason: Text | None = None
    params: Params | None = None
    rows: list[HoldoutRow] = []


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


FORM_NAMES = Literal["chinchilla", "tied", "kaplan", "fixed-E", "farseer"]   # scaling.laws.forms.catalog.FORMS
CHOSEN_FORMS = Literal["chinchilla", "tied", "kaplan", "fixed-E", "farseer", "median"]   # and checks.combined.NAME


class FormPrediction(Section):
    loss: Positive
    lo: Positive
    hi: Positive


class FormOptimum(Section):
    """A form's own compute-optimal run at the target compute, or why it has none."""
    n: Positive | None = None
    d: Positive | None = None
    loss: Positive | None = None
    reason: Text | None = None

    @model_validator(mode="after")
    def _a_run_or_a_reason(self) -> FormOptimum:
        if self.reason is None and None in (self.n, self.d, self.loss):
            raise ValueError("a form's optimum has n, d and loss, or a reason")
        return self


class FormTarget(Section):
    n: Positive
    d: Positive


class Extrapolation(Section):
    """How a prediction's error grows beyond the fitted compute (scaling.laws.checks.extrapolation.Extrapolation)."""
    growth: NonNegative
    bias: Finite
    n_cuts: Count
    source: Text
    noise: NonNegative = 0.0
    power: Positive = 1.0
    calibration: Positive = 1.0
    bias_sd: NonNegative = 0.0


class FormEntry(Section):
    """One law form fitted beside the fit (scaling.laws.checks.cross_forms.FormEntry)."""
    name: FORM_NAMES
    description: Text
    params: dict[str, Finite] | None = None
    residual_rms: NonNegative = 0.0
    n_resamples: Count = 0
    cuts: list[dict] = []
    extrapolation: Extrapolation | None = None
    prediction: FormPrediction | None = None
    optimum: FormOptimum | None = None
    samples: list[list[Finite]] = []
    sample_names: list[Text] = []
    reason: Text | None = None


class Combined(Section):
    """The median of the forms (scaling.laws.checks.combined.Combined)."""
    name: Literal["median"]
    members: list[FORM_NAMES]
    cuts: list[dict] = []
    extrapolation: Extrapolation
    prediction: FormPrediction | None = None


class Forms(Section):
    """Every law form beside the fit, their predictions for the target run (`scaling fit --form`)."""
    headline: CHOSEN_FORMS
    target_compute: Positive
    target: FormTarget | None = None
    beyond: NonNegative
    level: Share
    entries: list[FormEntry]
    combined: Combined | None = None
    planner: Literal["", "chinchilla", "fixed-E"] = ""


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
    data: Data | None = None
    approaches: Approaches | None = None
    kaplan: Kaplan | None = None
    verdict: Verdict | None = None
    diagnostics: list[Check] | None = None
    lack_of_fit: LackOfFit | None = None
    param_conventions: dict[str, Convention] | None = None
    holdout: Holdout | None = None
    curves: Curves | None = None
    form: CHOSEN_FORMS = "chinchilla"
    forms: Forms | None = None


def check_sections(obj: dict, where: str) -> FitSections:
    """The sections report, plan and compare read, checked; UsageError naming `where` and the field."""
    return check(FitSections, obj, where)
