"""Repeated data, in one place: runs that see some of their tokens again (D > U).

    law      Muennighoff et al. 2023's data-constrained L(N, D, U): the base law at an effective
             data D', repeated tokens decaying at the rate R_D* (and excess parameters at R_N*)
    fit      its fit (the same Huber objective on log residuals) and bootstrap; pure functions
    plan     the compute-optimal N, D for a budget when only U unique tokens exist
    section  the fit's "repeated" section (fit.json), and the plan `scaling plan --unique-tokens`
             prints

The names a fit, its file and the CLI use are imported here (`from scaling.laws.repeated import
Repeated`).
"""

from scaling.laws.repeated.section import (
    RESAMPLES,
    SAMPLE_NAMES,
    Repeated,
    RepeatedPlan,
    fit_repeated,
    plan_repeated,
)

__all__ = ["RESAMPLES", "SAMPLE_NAMES", "Repeated", "RepeatedPlan", "fit_repeated", "plan_repeated"]
