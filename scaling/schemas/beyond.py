"""fit.json's sections on the law beyond its data: `backtest`, `forms` (its entries and `combined`).

`scaling.schemas.fit.FitSections` holds them; every field a later stage computes with (a cut's
errors, distances and intervals, the backtest law's covariance, each form's constants and
resamples) is typed, in range and of consistent length when the file is read, so that summary,
predict, plan, report and plot never meet a null, a ragged list or a Kaplan form whose alpha_D
is 0. The sections themselves: docs/fit-json.md and docs/fitting.md.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, Field, ValidationError, model_validator

from scaling.schemas import LARGEST, Count, Finite, NonNegative, Positive, Section, Text, lowered
from scaling.schemas.laws import FORM_PARAMS, Level, Params

# A run's relative error (predicted - observed) / observed: its prediction is a positive loss, so
# the error lies above -1 (log1p of it is the cut's log residual); a flat table's cut errs by 1e11.
RelativeError = Annotated[float, Field(strict=True, allow_inf_nan=False, gt=-1, le=LARGEST)]
# Decades of compute beyond the fitted runs: a rule's interval grows with them through exp().
Decades = Annotated[float, Field(strict=True, allow_inf_nan=False, ge=-100, le=100)]
# An extrapolation rule's rates, in log loss per decade: the public tables' are a few percent, a flat
# table's 10 or more (what `fit` writes must be read back).
Rate = NonNegative


class Extrapolation(Section):
    """How a prediction's error grows beyond the fitted compute (scaling.laws.checks.extrapolation.Extrapolation)."""
    growth: Rate
    bias: Finite
    n_cuts: Count
    source: Text
    noise: Rate = 0.0
    power: Annotated[float, Field(strict=True, allow_inf_nan=False, gt=0, le=2)] = 1.0
    calibration: Annotated[float, Field(strict=True, allow_inf_nan=False, ge=1, le=LARGEST)] = 1.0
    bias_sd: Rate = 0.0


class Cut(Section):
    """One leave-future-out cut (scaling.laws.checks.backtest.Cut): its runs' errors, and per run
    (each list empty where not recorded, else one entry a predicted run) distances, intervals and
    estimation errors."""
    factor: Positive
    n_train: Count
    n_test: Count
    train_max_compute: Positive | None = None
    test_compute: Positive | None = None
    errors: list[RelativeError] = []
    raw_errors: list[RelativeError] = []
    distances: list[Decades] = []
    # An interval or estimation error the refit could not measure is infinite, written null.
    half_widths: list[NonNegative | None] = []
    prediction_sd: list[NonNegative | None] = []
    covered: Count | None = None
    reason: Text | None = None
    n_sizes: Count = 0
    params: Params | None = None

    @model_validator(mode="after")
    def _one_entry_a_run(self) -> Cut:
        if self.reason is None and (not self.errors or None in (self.train_max_compute, self.test_compute)):
            raise ValueError("a cut that was made (no 'reason') has its runs' 'errors', 'train_max_compute' and "
                             "'test_compute'")
        for name in ("raw_errors", "distances", "half_widths", "prediction_sd"):
            if len(getattr(self, name)) not in (0, len(self.errors)):
                raise ValueError(f"'{name}' must hold one entry per run of 'errors' ({len(self.errors)}), "
                                 f"or none; got {len(getattr(self, name))}")
        if self.covered is not None and self.covered > len(self.errors):
            raise ValueError(f"'covered' ({self.covered}) must be at most the runs predicted ({len(self.errors)})")
        return self


def _covariance(rows: list[list[float]]) -> list[list[float]]:
    """The backtest law's free constants' covariance: empty (not measured), or square over its 4 or 5
    free constants (E left out where pinned) with variances >= 0."""
    if rows and not (len(rows) in (4, 5) and all(len(row) == len(rows) for row in rows)):
        raise ValueError(f"must be a square matrix over the law's 4 or 5 free constants, got rows of "
                         f"{sorted({len(row) for row in rows})} in {len(rows)} rows")
    if any(rows[i][i] < 0 for i in range(len(rows))):
        raise ValueError("must have variances >= 0 on its diagonal")
    return rows


class Undertrained(Section):
    factor: Positive
    median_abs_error: NonNegative | None = None


class Backtest(Section):
    """The leave-future-out backtest (scaling.laws.checks.backtest.Backtest)."""
    cuts: list[Cut]
    extrapolation: Extrapolation
    level: Level = 0.95
    by: Literal["budget", "compute"] = "budget"
    law: Params | None = None
    n_trained: Count = 0
    min_tokens_per_param: Positive = 5.0
    undertrained_kept: list[Undertrained] = []
    covariance: Annotated[list[list[Finite]], AfterValidator(_covariance)] = []
    n_sizes: Count = 0


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


class FormEntry(Section):
    """One law form fitted beside the fit (scaling.laws.checks.cross_forms.FormEntry): its constants
    and each row of its resamples those of its form (`laws.FORM_PARAMS`)."""
    name: FORM_NAMES
    description: Text
    params: dict[str, Finite] | None = None
    residual_rms: NonNegative = 0.0
    n_resamples: Count = 0
    cuts: list[Cut] = []
    extrapolation: Extrapolation | None = None
    prediction: FormPrediction | None = None
    optimum: FormOptimum | None = None
    samples: list[list[Finite]] = []
    sample_names: list[Text] = []
    reason: Text | None = None

    @model_validator(mode="after")
    def _the_forms_constants(self) -> FormEntry:
        schema = FORM_PARAMS[self.name]
        if self.params is not None:
            _as_form(schema, self.params, f"the {self.name} form's 'params'")
        if self.samples and set(map(len, self.samples)) != {len(self.sample_names)}:
            raise ValueError(f"each row of 'samples' must hold the {len(self.sample_names)} values of 'sample_names', "
                             f"got rows of {sorted(set(map(len, self.samples)))}")
        for i, row in enumerate(self.samples):
            _as_form(schema, dict(zip(self.sample_names, row)), f"the {self.name} form's 'samples[{i}]'")
        return self


def _as_form(schema: type[Section], values: dict, what: str) -> None:
    """`values` checked as the constants `schema` names (exactly those); ValueError naming `what`."""
    if set(values) != set(schema.model_fields):
        raise ValueError(f"{what} must be {', '.join(schema.model_fields)}; got {', '.join(values) or 'none'}")
    try:
        schema.model_validate(values)
    except ValidationError as exc:
        error = exc.errors()[0]
        raise ValueError(f"{what}: {error['loc'][0]} {lowered(error['msg'].removeprefix('Value error, '))}, "
                         f"got {error['input']!r}") from None


class Combined(Section):
    """The median of the forms (scaling.laws.checks.combined.Combined)."""
    name: Literal["median"]
    members: list[FORM_NAMES]
    cuts: list[Cut] = []
    extrapolation: Extrapolation
    prediction: FormPrediction | None = None


class Forms(Section):
    """Every law form beside the fit, their predictions for the target run (`scaling fit --form`)."""
    headline: CHOSEN_FORMS
    target_compute: Positive
    target: FormTarget | None = None
    beyond: NonNegative
    level: Level
    entries: list[FormEntry]
    combined: Combined | None = None
    planner: Literal["", "chinchilla", "fixed-E"] = ""

