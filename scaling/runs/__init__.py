"""The run store: where every run lives, and the files it is made of.

`store` lays out runs/<sweep>/<run-id>/ (config, metrics, summary, checkpoint) and runs.csv;
`locks` keeps two sweeps from training one run; `faults` names the points where the fault
tests kill a sweep. Training writes here and fitting reads here, so every later stage may
import this package and it imports none of them.
"""
