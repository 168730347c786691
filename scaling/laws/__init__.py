"""From points (N, D, loss) to a law and what it implies.

The fit data and its loaders, the Approach-3 fit with its bootstrap, Approaches 1 and 2,
Kaplan-style single-variable laws, the compute-optimal allocation, the published laws and the
comparison with them. Pure functions over arrays, except the loaders (`fitdata`) and the
fit.json reader and writer (`results`) at the edge.
"""
