"""The constants of a law and of each law form, as fit.json holds them: their schema.

`scaling.schemas.fit` (the law, the hold-out's refit, the data-constrained fit) and
`scaling.schemas.beyond` (each cut's refit, each form's constants and resamples) check them with
these models, so that no later stage divides by an exponent of 0 or raises a power past a float.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, Field

from scaling.schemas import LARGEST, NonNegative, Positive, Section


def _not_vanishing(value: float) -> float:
    if value != 0 and abs(value) < SMALLEST_EXPONENT:
        raise ValueError(f"must be 0 or at least {SMALLEST_EXPONENT:g} in size (the allocation divides by it)")
    return value


def _not_zero(value: float) -> float:
    if value == 0:
        raise ValueError("must not be 0 (the law divides by it)")
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
# An exponent a form divides by (Kaplan's alpha_D: L = [(N_c/N)^(alpha_N/alpha_D) + D_c/D]^alpha_D).
Divisor = Annotated[Exponent, AfterValidator(_not_zero)]
Share = Annotated[float, Field(strict=True, allow_inf_nan=False, ge=0, le=1)]
Level = Annotated[float, Field(strict=True, allow_inf_nan=False, gt=0, lt=1)]       # an interval's level


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


class KaplanParams(Section):
    """The Kaplan form's constants (scaling.laws.forms.kaplan_nd.KaplanLaw)."""
    N_c: Positive
    D_c: Positive
    alpha_N: Exponent
    alpha_D: Divisor


class FarseerParams(Section):
    """The Farseer-like form's constants (scaling.laws.forms.farseer.FarseerLaw): beta_1 scales log(N / 1e8)."""
    E: NonNegative
    A: NonNegative
    B: NonNegative
    alpha: Exponent
    beta_0: Exponent
    beta_1: Annotated[float, Field(strict=True, allow_inf_nan=False, ge=-1, le=1)]


# Each form's constants by name (scaling.laws.forms.catalog.law_of reads the same names): the
# forms of E + A/N^alpha + B/D^beta hold that law's, with A and B that a resample may underflow to 0.
FORM_PARAMS: dict[str, type[Section]] = {"chinchilla": Params, "tied": Params, "fixed-E": Params,
                                         "kaplan": KaplanParams, "farseer": FarseerParams}
