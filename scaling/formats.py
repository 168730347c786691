"""Numbers in and out of text, defined once for every stage.

    positive("1e21", "compute C")          -> 1e+21   (UsageError naming "compute C" otherwise)
    sci(1.5e18) -> "1.5e18";  sci(None) -> "-"
    json_safe({"x": np.float64("nan")}) -> {"x": None}
    print(plain_table(["", "a"], [["fit", "0.51"]]))

Library messages name the quantity ("compute C"), never a command-line flag: the CLI says which
flag carried it.
"""

from __future__ import annotations

import math
from dataclasses import asdict, is_dataclass
from typing import Any, Literal, overload

import numpy as np

from scaling.errors import UsageError


@overload
def positive(value: float | str, name: str, *, integer: Literal[True]) -> int: ...
@overload
def positive(value: float | str, name: str, *, integer: Literal[False] = False) -> float: ...
def positive(value: float | str, name: str, *, integer: bool = False) -> float:
    """`value` (a number or its text, "1e21", "1_000") as a positive finite float, or an int when
    `integer`; UsageError saying what `name` must be."""
    allowed = "a positive whole number" if integer else "a positive, finite number"
    try:
        x = float(value.replace("_", "") if isinstance(value, str) else value)
    except (TypeError, ValueError, OverflowError):
        raise UsageError(f"{name} must be {allowed}, got {value!r} (not a number)") from None
    if not math.isfinite(x) or x <= 0 or (integer and x != int(x)):
        raise UsageError(f"{name} must be {allowed}, got {value!r}")
    return int(x) if integer else x


# The largest value a point may hold: a loss past MAX_LOSS nats per token, or a count (N, D, FLOPs)
# past MAX_COUNT, is a unit slip or a hand edit, and its logs and powers overflow a float downstream.
# A fit holds its points to them (scaling.laws.fitting.fitdata), an import its runs (runs.imports.resolve).
def whole_number(value: object, name: str, least: int = 0, most: int | None = None) -> int:
    """`value` as an int from `least` to `most` (None: no bound); UsageError naming `name` otherwise.
    A bool, a float (1.5 or 1.0) and text ("3") are not whole numbers: each was once taken, and
    went on to fail deep inside numpy (a seed of "x") or to mean 1 (True)."""
    if (isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < least
            or (most is not None and value > most)):
        bound = f" and <= {most:,}" if most is not None else ""
        raise UsageError(f"{name} must be a whole number >= {least}{bound}; got {value!r}")
    return int(value)


def seed_value(seed: object) -> int:
    """A random seed as numpy takes it: a whole number >= 0, else UsageError naming the seed."""
    return whole_number(seed, "the seed")


MAX_LOSS = 1e4
MAX_COUNT = 1e30

def sci(x: float | None, digits: int = 3, *, fixed: bool = False) -> str:
    """`digits` significant digits, exponent without '+' or leading zeros: 1.5e18, 3.2e-5, 250;
    '-' for None, NaN or infinity. fixed: always scientific, trailing zeros kept (7.0e19, 4.00e14),
    for tables whose columns should read alike."""
    if x is None or not math.isfinite(float(x)):
        return "-"
    text = f"{float(x):.{max(digits, 1) - 1}e}" if fixed else f"{float(x):.{max(digits, 1)}g}"
    if "e" not in text:
        return text
    mantissa, exponent = text.split("e")
    return f"{mantissa}e{int(exponent)}"


def json_safe(obj: object) -> Any:
    """Plain JSON types: dataclasses and dicts to dicts (str keys), tuples to lists, numpy scalars
    to Python numbers, NaN and infinities to None (strict JSON has none of them)."""
    if is_dataclass(obj) and not isinstance(obj, type):
        obj = asdict(obj)
    if isinstance(obj, dict):
        return {str(k): json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    if isinstance(obj, (bool, np.bool_)):
        return bool(obj)
    if isinstance(obj, (int, np.integer)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        x = float(obj)
        return x if math.isfinite(x) else None
    if isinstance(obj, complex):
        return None
    return obj


def plain_table(header: list[str], rows: list[list[str]], n_left: int = 1) -> str:
    """Aligned plain text: the first `n_left` columns left-aligned (labels), the others
    right-aligned (numbers), a dashed rule under the header, no trailing spaces."""
    lines = [list(header)] + [list(r) for r in rows]
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    out = []
    for j, cells in enumerate(lines):
        text = "  ".join(cell.ljust(w) if i < n_left else cell.rjust(w)
                         for i, (cell, w) in enumerate(zip(cells, widths)))
        out.append(text.rstrip())
        if j == 0:
            out.append("  ".join("-" * w for w in widths))
    return "\n".join(out)


def flatten(config: dict, prefix: str = "") -> dict:
    """Nested settings as dotted keys: {"model": {"n_params": 1}} -> {"model.n_params": 1}."""
    out = {}
    for key, value in config.items():
        if isinstance(value, dict):
            out.update(flatten(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out
