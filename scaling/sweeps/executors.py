"""The executor a sweep config asks for: local worker processes, or a Ray cluster.

Its own module so that `executor` and `ray_executor` do not import each other: the Ray
executor builds on the local one, and only this choice needs both.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from scaling.errors import UsageError
from scaling.sweeps.executor import LocalExecutor

if TYPE_CHECKING:
    from scaling.config import ExecutorConfig
    from scaling.sweeps.plan import PlannedRun


def make_executor(config: ExecutorConfig | str, expected: list[PlannedRun] | None = None) -> LocalExecutor:
    """The executor an `ExecutorConfig` asks for (a bare kind string is accepted too); `expected`:
    the runs the sweep means to train, for the defaults (see LocalExecutor)."""
    kind = config if isinstance(config, str) else config.kind
    options: dict[str, Any] = {"expected": expected} if isinstance(config, str) else {
        "workers": config.workers, "threads_per_run": config.threads_per_run, "runs_per_gpu": config.runs_per_gpu,
        "expected": expected}
    if kind == "local":
        return LocalExecutor(**options)
    if kind == "ray":
        try:
            from scaling.sweeps.ray_executor import RayExecutor
        except ModuleNotFoundError as exc:
            if exc.name != "ray" and not (exc.name or "").startswith("ray."):
                raise
            raise UsageError("executor.kind is 'ray' but Ray is not installed here: "
                             "pip install 'scaling[ray]'") from None
        extra: dict[str, Any] = {} if isinstance(config, str) else {"address": config.address,
                                                                    "max_retries": config.max_retries}
        return RayExecutor(**options, **extra)
    raise ValueError(f"unknown executor {kind!r}")  # config validation already restricts this
