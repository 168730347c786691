"""Validation: train the model a fit recommends, and its neighbours at the same compute, and
compare their losses with the law's prediction (`run`), in the sweep's model family (`family`),
judged and printed by `result`."""

import sys
from pathlib import Path
from types import ModuleType


class _CallableStage(ModuleType):
    """`scaling.validate(fit, compute)` validates while `scaling.validate.run` stays a module: the
    package is the function as well (as `scaling.sweep` is)."""

    def __call__(self, fit, compute, *, config=None, runs_dir=None, cache_dir=None, force=False, reporter=None):
        """Train the model `fit` (a LawFit, or a fit directory / fit.json) recommends at `compute`
        FLOPs and its two neighbours, as `scaling validate` does; the `result.Validation`.
        config: the sweep's YAML (default: read back from the fit's run store); runs_dir: the run
        store root (default: the one holding the fit's store). Loads torch."""
        from scaling.laws.results.lawfit import FILENAME, LawFit, load_fit
        from scaling.validate.run import recipe, runs_root, validate

        fit_path = ""
        if not isinstance(fit, LawFit):
            fit_path = str(Path(fit) / FILENAME if Path(fit).is_dir() else fit)
            fit = load_fit(fit_path)
        return validate(fit, recipe(fit, config), compute, runs_dir=runs_root(fit, runs_dir), cache_dir=cache_dir,
                        force=force, fit_path=fit_path, reporter=reporter)


sys.modules[__name__].__class__ = _CallableStage
