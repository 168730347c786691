"""What every reader returns: a source run as its log holds it, before N, D and the loss are found.

A reader keeps the log's own names (hyperparameter keys, scalar tags), so that the names a user
gives (--n, --d, --loss) are matched exactly, whatever the format.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from importlib import import_module
from types import ModuleType
from typing import SupportsFloat, cast

from scaling.errors import UsageError

KINDS = ("tensorboard", "wandb", "mlflow", "csv")


# A step is a whole number a run store's metrics.jsonl holds as a 64-bit integer (numpy's astype(int)
# wrapped 1e19 to -9.2e18, and its tokens with it): every reader and `resolve` hold steps to it.
LARGEST_STEP = 2**63 - 1

@dataclass(frozen=True)
class SourceRun:
    """One run of a log. name: the source's own (a folder, a run name or id); params: its
    hyperparameters, nested ones flattened to dotted keys; scalars: tag -> [(step, value)] in step
    order; problem: why the source says the run did not finish (None: it did); origin: where it
    came from, for the provenance; wall_s: its wall time in seconds, where the log keeps it."""

    name: str
    params: dict = field(default_factory=dict)
    scalars: dict = field(default_factory=dict)
    problem: str | None = None
    origin: dict = field(default_factory=dict)
    wall_s: float | None = None


def needs(module: str, kind: str) -> ModuleType:
    """Import a format's library, or say which extra to install (one line)."""
    try:
        return import_module(module)
    except ImportError:
        raise UsageError(f"reading {kind} logs needs the {kind} extra: pip install 'scaling[{kind}]'") from None


def number(value: object) -> float | None:
    """A hyperparameter as a number (MLflow keeps them as text); None when it is not one."""
    if isinstance(value, bool):
        return None
    try:
        x = float(cast(SupportsFloat, value))     # anything else raises TypeError: caught
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def plain(value: object) -> object:
    """A hyperparameter as config.yaml can hold it: numbers (numpy's as Python's), text, booleans
    and None as they are, anything else as its text."""
    if hasattr(value, "item") and callable(value.item):   # a numpy scalar from a table
        value = value.item()
    return value if value is None or type(value) in (bool, int, float, str) else str(value)
