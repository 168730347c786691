"""Which points a fit uses: filters that leave points out (each recorded with its reason), and the
check that enough remain to determine the law.

    data = apply_filters(data, drop_highest_loss=5)     # Besiroglu et al.'s 240 of Hoffmann's 245
    check_fittable(data)                                # enough points and sizes
"""

from __future__ import annotations

import math

import numpy as np

from scaling.errors import UsageError
from scaling.laws.fitting.fitdata import Dropped, FitData


def apply_filters(data: FitData, *, drop_highest_loss: int = 0, min_tokens_per_param: float | None = None,
                  min_tokens: float | None = None) -> FitData:
    """Leave out points, recording each in `dropped` and the settings in `filters`.

    min_tokens_per_param: drop points with D/N below it. min_tokens: drop points with D below
    it. drop_highest_loss: then drop the K points with the highest loss among those left
    (Besiroglu et al. drop the 5 highest of Hoffmann et al.'s 245); ties go to the earlier row.
    """
    if isinstance(drop_highest_loss, bool) or not isinstance(drop_highest_loss, (int, np.integer)) \
            or drop_highest_loss < 0:
        raise UsageError(f"the number of highest losses to drop must be a whole number >= 0; got "
                         f"{drop_highest_loss!r}")
    for what, value in (("the minimum tokens per parameter", min_tokens_per_param),
                        ("the minimum tokens", min_tokens)):
        if value is not None and not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
            raise UsageError(f"{what} must be a positive number; got {value!r}")
    keep = np.ones(len(data), dtype=bool)
    dropped = list(data.dropped)
    if min_tokens_per_param is not None:
        low = keep & (data.d / data.n < min_tokens_per_param)
        dropped += [Dropped(data.ids[i], f"D/N = {data.d[i] / data.n[i]:.4g} below the minimum "
                                         f"{min_tokens_per_param:g}") for i in np.flatnonzero(low)]
        keep &= ~low
    if min_tokens is not None:
        low = keep & (data.d < min_tokens)
        dropped += [Dropped(data.ids[i], f"D = {data.d[i]:.4g} tokens below the minimum {min_tokens:g}")
                    for i in np.flatnonzero(low)]
        keep &= ~low
    if drop_highest_loss:
        left = np.flatnonzero(keep)
        if drop_highest_loss >= left.size:
            raise UsageError(f"dropping the {drop_highest_loss} highest losses would drop all {left.size} "
                             "remaining points")
        order = left[np.lexsort((left, -data.loss[left]))]       # highest loss first, then row
        worst = np.sort(order[:drop_highest_loss])
        dropped += [Dropped(data.ids[i], f"one of the {drop_highest_loss} highest losses "
                                         f"(loss = {data.loss[i]:.6g})") for i in worst]
        keep[worst] = False
    filters = {**data.filters, "drop_highest_loss": int(drop_highest_loss),
               "min_tokens_per_param": None if min_tokens_per_param is None else float(min_tokens_per_param),
               "min_tokens": None if min_tokens is None else float(min_tokens)}
    return data.take(np.flatnonzero(keep), dropped=tuple(dropped), filters=filters)


# The most points one fit takes. Every L-BFGS step of every fit, refit and bootstrap resample walks
# all points: 1e5 points with the default 1,000 resamples take 27 minutes of one core (1,621 s of
# CPU time, 316 MB; docs/fitting.md), 1e6 would take hours. A sweep has hundreds of runs; a table past this holds
# replicates or curve points, which are averaged or subsampled before fitting, not fitted whole.
MAX_POINTS = 100_000


def check_fittable(data: FitData, fixed_E: float | None = None) -> None:
    """UsageError unless the points can determine the law in reasonable time: enough points (and
    at most MAX_POINTS), two or more sizes and two or more token counts."""
    n_free = 4 if fixed_E is not None else 5
    after = " after filters" if any(data.filters.values()) else ""
    if len(data) > MAX_POINTS:
        raise UsageError(f"{data.source}: {len(data):,} points{after}, more than the {MAX_POINTS:,} a fit takes "
                         "(1e5 points with 1,000 bootstrap resamples take about 27 minutes of one core); average "
                         "replicates or subsample the table")
    if len(data) < n_free:
        raise UsageError(f"{data.source}: {len(data)} point(s){after}, fewer than the {n_free} free "
                         f"parameters of the fit{' with E fixed' if fixed_E is not None else ''} "
                         f"({len(data.dropped)} left out); add runs or relax the filters")
    if data.n_sizes < 2:
        raise UsageError(f"{data.source}: all {len(data)} points{after} have the same model size "
                         f"(N = {data.n[0]:.4g}); alpha and A cannot be fitted from one size: add runs "
                         "at other sizes")
    if np.unique(data.d).size < 2:
        raise UsageError(f"{data.source}: all {len(data)} points{after} have the same token count "
                         f"(D = {data.d[0]:.4g}); beta and B cannot be fitted from one token count: add "
                         "runs on other token counts")
