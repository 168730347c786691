"""From points (N, D, loss) to a law and what it implies, one folder a question
(docs/architecture.md, "Inside laws/"):

    forms/     what a law is: the Chinchilla form, the published laws
    fitting/   the points and their readers, the Approach-3 fit, its bootstrap
    optimal/   the compute-optimal allocation, Approaches 1 and 2, Kaplan's laws, the comparison
    checks/    whether to trust the fit: hold-out, stability, lack of fit, the verdict
    curves/    the law fitted from whole training curves
    repeated/  the data-constrained law, for runs that repeat tokens
    results/   `LawFit`, its file fit.json, and the text the commands print of it
    design/    a sweep judged before training, by simulation
    analysis   the whole fit in one call; api: `scaling.fit` and `scaling.load`

Pure functions over arrays, except the readers (`fitting.readers`, `curves.store`,
`curves.runs`) and fit.json's reader and writer (`results.lawfit`) at the edge.
"""
