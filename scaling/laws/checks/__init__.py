"""Whether to trust a fitted law: the statuses and thresholds (`verdict`), the hold-out refit
(`holdout`), stability without the largest runs (`stability`), structure left in the residuals
(`lack_of_fit`), the checks gathered into a verdict (`diagnostics`), and the plain-language
evidence and limitations a fit carries (`evidence`). Pure functions, no I/O."""
