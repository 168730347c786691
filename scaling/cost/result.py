"""What every cost result shares: a dataclass base with `to_dict()`, the 6 N D assumption, and the
number formats their texts use.

Each result is a frozen dataclass carrying its numbers, a `units` dict naming the unit of each
number, and `assumptions`: the sentences that produced them, so a printed figure is never
separated from what it assumed. `to_dict()` gives the JSON form (`scaling.formats.json_safe`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from scaling import formats
from scaling.formats import json_safe
from scaling.laws.optimal import allocation

if TYPE_CHECKING:
    from scaling.laws.forms.law import Law

SIX_ND = ("C = 6 N D: 2 N forward + 4 N backward FLOPs per parameter and training token; "
          "ignores attention over the context and counts every parameter (embeddings included) "
          "as a matmul")


def check_allocation(law: Law, law_label: str | None = None) -> Law:
    """`law`, when it has a compute-optimal allocation; else a UsageError saying why not
    (`scaling.laws.optimal.allocation.check_allocatable`)."""
    return allocation.check_allocatable(law, law_label)


class Result:
    def to_dict(self) -> dict:
        return json_safe(self)


def fixed_sci(x: float, digits: int = 2) -> str:
    """The cost tables' numbers: formats.sci with `digits` significant digits and trailing zeros
    kept (7.0e19, 4.00e14), so a column reads alike."""
    return formats.sci(x, digits, fixed=True)


def format_bytes(n_bytes: float) -> str:
    """Decimal units (1 MB = 1e6 bytes): one decimal below 100, none from 100 up, and none when
    the value is whole (94 GB, 1.0 MB for 1,048,576 bytes, 268 MB, 65.5 GB)."""
    units = ("B", "kB", "MB", "GB", "TB", "PB", "EB")
    b = float(n_bytes)
    i = 0
    while i < len(units) - 1 and abs(b) >= 1000 ** (i + 1):
        i += 1
    v = b / 1000**i
    text = f"{v:.0f}" if v == round(v) or abs(v) >= 100 else f"{v:.1f}"
    if text in ("1000", "1000.0") and i < len(units) - 1:  # rounding carried into the next unit
        return f"1.0 {units[i + 1]}"
    return f"{text} {units[i]}"


def format_ratio(x: float) -> str:
    """Two significant digits below 100 (0.00012, 0.12, 3.5), whole numbers from 100 up."""
    return f"{x:.0f}" if abs(x) >= 100 else f"{x:.2g}"
