"""The optional extras a test needs: skipped where one is not installed, failed in CI.

A developer without `pip install -e '.[tensorboard,mlflow,wandb,ray]'` still runs the rest of
the suite; CI (.ci/run) names the extras it installed in SCALING_REQUIRE_EXTRAS ("tensorboard,
mlflow,wandb,ray"), so that one which did not install fails the tests that need it instead of
skipping them unseen.
"""

from __future__ import annotations

import importlib
import os

import pytest

REQUIRE = "SCALING_REQUIRE_EXTRAS"


def needs_extra(module: str, extra: str):
    """`module` imported, or the test skipped (failed where SCALING_REQUIRE_EXTRAS names `extra`)."""
    if extra in os.environ.get(REQUIRE, "").split(","):
        return importlib.import_module(module)
    return pytest.importorskip(module, reason=f"the {extra} extra is not installed: pip install -e '.[{extra}]'")
