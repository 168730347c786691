"""Tuning: the learning rates a sweep trains with, measured by short sweeps of their own.

`shapes` (each shape of the grid at a log grid of rates, one token budget; the rate of lowest loss),
`budgets` (the plan's own cells at their own D, and lr = c N^p D^q across them), `lr_law` (lr_opt =
c N^k over the shapes, pure), `files` (tune.json and the tuned config: the I/O edge) and `run`
(`scaling.tune`: either tuning as one call). It trains with the sweep and fits with the laws, so it
comes after both; `scaling tune` is its command, the report draws its figure.
"""
