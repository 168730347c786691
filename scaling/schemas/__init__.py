"""One schema per file kind this package reads, checked where the file is opened.

    obj = read_json(path)                           # scaling.reading: a bounded regular file
    check(FitSections, obj, str(path))              # UsageError: "fits/x/fit.json: 'verdict.verdict'
                                                    #   must be one of ...; got 3"

A schema is a pydantic model of the fields a later stage reads (report, plan, compare): their
types, ranges and finite values. Extra keys are allowed where a newer file may add them, and
refused where the reader passes a section on as arguments (a table's columns). The first error
becomes one line naming the file and the field, never a traceback from a stage that trusted it.
"""

from __future__ import annotations

import math
from typing import Annotated, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic_core import ErrorDetails

from scaling.errors import UsageError
from scaling.reading import excerpt

# A number a file may hold: strict (no bool, no numeric text), finite; and the usual ranges.
# LARGEST: beyond it, products and powers of the law's numbers overflow a float (1.8e308).
LARGEST = 1e300
Finite = Annotated[float, Field(strict=True, allow_inf_nan=False, ge=-LARGEST, le=LARGEST)]
# Positive: at least 1e-300, so that its reciprocal stays finite (1e-320, a denormal, does not).
Positive = Annotated[float, Field(strict=True, allow_inf_nan=False, ge=1 / LARGEST, le=LARGEST)]
NonNegative = Annotated[float, Field(strict=True, allow_inf_nan=False, ge=0, le=LARGEST)]
Count = Annotated[int, Field(strict=True, ge=0)]
Text = Annotated[str, Field(strict=True)]
Pair = tuple[Finite | None, Finite | None]             # an interval [lo, hi]; a bound null where undefined
PositivePair = tuple[Positive, Positive]


class Section(BaseModel):
    """A section of a file: strict leaf types (no numeric text, no bool for a number); extra keys
    allowed (a newer file may add some)."""

    model_config = ConfigDict(extra="allow", frozen=True)


class Closed(Section):
    """A section passed on as arguments: an unknown key is refused."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def _field(loc: tuple) -> str:
    """('runs', 0, 'interval') -> 'runs[0].interval'."""
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else f".{part}" if text else str(part)
    return text


Model = TypeVar("Model", bound=BaseModel)


def _problem(error: ErrorDetails) -> str:
    """pydantic's message, in this package's words for the common cases."""
    kind, ctx = error["type"], error.get("ctx") or {}
    if kind in ("finite_number", "float_type", "int_type", "float_parsing") and isinstance(error["input"], float) \
            and not math.isfinite(error["input"]):
        return "must be a finite number"
    if kind == "missing":
        return "is missing"
    if kind in ("model_type", "dict_type"):
        return "must be a JSON object {...}"
    if kind == "extra_forbidden":
        return "is not a known key"
    if "le" in ctx and ctx["le"] == LARGEST:
        return f"must be at most {LARGEST:g} (beyond it the law's numbers overflow a float)"
    if "ge" in ctx and ctx["ge"] == 1 / LARGEST:
        return f"must be positive (at least {1 / LARGEST:g})"
    return lowered(error["msg"].removeprefix("Value error, "))


def lowered(text: str) -> str:
    return text[:1].lower() + text[1:]


def check(schema: type[Model], obj: object, where: str, prefix: str = "") -> Model:
    """`obj` validated by `schema` (the model); UsageError naming `where` and the first bad field."""
    try:
        return schema.model_validate(obj)
    except ValidationError as exc:
        error = exc.errors()[0]
        name = _field(((prefix,) if prefix else ()) + tuple(error["loc"]))
        if error["type"] == "value_error" and isinstance(error["input"], dict):
            # A whole section's check (a model validator) says what is wrong with it, naming its fields.
            section = f"'{name}': " if name else ""
            raise UsageError(f"{where}: {section}{_problem(error)}") from None
        got = "" if error["type"] == "missing" else f", got {excerpt(error['input'])}"
        raise UsageError(f"{where}: '{name}' {_problem(error)}{got}") from None
