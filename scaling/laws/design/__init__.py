"""Judging a sweep before training it: synthetic points from a known law (`simulate`), a design
of final-loss runs simulated, refitted and judged under a prior law (`sweep`), and a curve-based
design judged the same way (`curves`)."""
