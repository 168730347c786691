"""Validation: train the model a fit recommends, and its neighbours at the same compute, and
compare their losses with the law's prediction (`run`), in the sweep's model family (`family`),
judged and printed by `result`.

`scaling.validate(fit, compute)` is `run.validate_fit`.
"""
