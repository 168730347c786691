"""Sweeps: the grid of runs a config asks for, their order, and the executors that train them.

`plan` (the runs of the grid, their ids, sizes and order), `estimates` (their wall time before
they run), `driver` (`run_sweep`: train the runs not yet ended into the run store), `claims`
(each run's lock, and the start of WSD branches), `job` (what an executor is given and returns),
`executor` with `packing` and `worker` (local worker processes), `ray_executor` (a Ray cluster)
and `executors` (the one a config asks for). Every run ends in the run store (`scaling.runs`).

`scaling.sweep(config, runs_dir)` is `driver.sweep`.
"""
