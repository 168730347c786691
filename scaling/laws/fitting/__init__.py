"""From points to a law: the validated points (`fitdata`, `provenance`) and their readers
(`readers`, the I/O edge), which points a fit uses (`selection`), the Huber objective on log
residuals (`objective`) minimised by a batched L-BFGS (`lbfgs`) from many starts (`fit`), the
Bayesian bootstrap of its intervals (`bootstrap`), and VPNLS, a second estimator (`vpnls`)."""
