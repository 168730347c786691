"""A sweep: the grid of runs a config asks for, their order, and the executors that train them.

Local worker processes (`executor`) or a Ray cluster (`ray_executor`); every run ends in the
run store (`scaling.runs`).
"""
