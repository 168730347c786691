"""Close the loop: train the model a fit recommends at compute C, and its two neighbours.

    fit = load_fit("fits/tiny/fit.json")
    result = validate(fit, recipe(fit, None), compute=1e13, runs_dir="runs")
    print("\\n".join(format_validation(result)))

At C the law's optimum N_opt is rounded to the sweep's model family (scaling.validation.family);
that shape trains on D = C / (its FLOPs per token, in the fit's compute measure) tokens, and so do
two neighbours of about N/2.5 and 2.5 N, with
the sweep's own recipe (corpus, tokenizer, schedule, learning-rate rule). The runs are a sweep of
their own, `<name>-validate`, trained by the sweep driver: they resume and skip like any run, and
a second `validate` at the same C trains nothing. Each is marked with the role "validation" in its
summary and runs.csv, and the fitter leaves such runs out. A fit whose verdict is `not identified`
is refused unless `force`: its optimum is not a prediction.
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

from scaling.config import Shape, SweepConfig, derived_name, load_config, parse_config
from scaling.errors import UsageError
from scaling.laws.optimal.allocation import check_compute
from scaling.laws.results.fit_file import FILENAME, load_fit
from scaling.laws.results.lawfit import LawFit
from scaling.reading import parse_yaml, read_text
from scaling.runs import store
from scaling.sweeps.driver import run_sweep
from scaling.sweeps.job import Reporter
from scaling.sweeps.plan import PlannedRun, budget_tokens, planned_run
from scaling.sweeps.state import SweepState
from scaling.validation.family import Family, family_of
from scaling.validation.result import Validation, ValidationRun

NEIGHBOUR_FACTOR = 2.5   # the neighbours' N: about N/2.5 and 2.5 N, at the same compute
STORE_PREFIX = "runs "   # how a fit names the run store it read (FitData.source)


def fit_store(fit: LawFit) -> Path | None:
    """The run store the fit read, or None when it was fitted from a table or dataset: the absolute
    path fit.json records, refused when gone or changed since; a fit from before that record names
    the store as typed then."""
    if fit.data.store is not None:
        path = store.recorded_store(fit.data.store, "the fit")
        if path is None:
            raise UsageError(f"the fit's run store {fit.data.store['path']} does not exist (moved or deleted)")
        return path
    source = fit.data.source or ""
    return Path(source[len(STORE_PREFIX):]) if source.startswith(STORE_PREFIX) else None


def runs_root(fit: LawFit, runs_dir: str | Path | None = None) -> Path:
    """Where the validation's store goes: `runs_dir`, else the root holding the fit's own store
    (so the two sit side by side), else runs."""
    if runs_dir is not None:
        return Path(runs_dir)
    store_dir = fit_store(fit)
    return store_dir.parent if store_dir is not None else Path("runs")


def recipe(fit: LawFit, config: str | Path | None) -> SweepConfig:
    """The sweep config to validate with: `config` when given, else read back from the runs of
    the fit's store (their config.yaml holds every setting, and each shape's learning rate)."""
    if config is not None:
        return load_config(config)
    sweep_dir = fit_store(fit)
    if sweep_dir is None:
        raise UsageError(f"the fit was made from {fit.data.source or 'an unknown source'}, not a run store: "
                         "give the sweep's config", options=("config",))
    paths = sorted(sweep_dir.glob(f"*/{store.CONFIG}"))
    runs = [(p, parse_yaml(read_text(p, "run config"), str(p))) for p in paths]
    # A run's own settings: not a validation's, nor a retry's (trained at a lower rate than the recipe's).
    runs = [(p, r) for p, r in runs if isinstance(r, dict) and r.get("role") is None and r.get("retry_of") is None]
    if not runs:
        raise UsageError(f"{sweep_dir} has no run with a {store.CONFIG}: give the sweep's config", options=("config",))
    shape_keys = ("d_model", "n_layers", "n_heads")
    for path, run in runs:                  # a hand-edited config.yaml: one line naming it, not a KeyError
        missing = [k for k in ("sweep", "seed", "corpus", "tokenizer", "model", "train", "tokens", "lr")
                   if k not in run]
        if missing or not isinstance(run["model"], dict) or any(k not in run["model"] for k in shape_keys):
            raise UsageError(f"{path} is not a run's config (no {', '.join(missing) or 'model shape'}): "
                             "give the sweep's config", options=("config",))
    configs = [r for _, r in runs]
    first = configs[0]
    try:
        shapes = {tuple(r["model"][k] for k in shape_keys): r["lr"] for r in configs}
        model = {k: v for k, v in first["model"].items() if k not in (*shape_keys, "vocab_size")}
        models = [dict(zip(shape_keys, key), lr=lr) for key, lr in sorted(shapes.items())]
        return parse_config({"name": first["sweep"], "seed": first["seed"], "corpus": first["corpus"],
                             "tokenizer": first["tokenizer"], "model": model, "train": first["train"],
                             "grid": {"models": models, "tokens": [first["tokens"]]}},
                            f"the settings of the runs in {sweep_dir}")
    except TypeError as exc:                # an unhashable or unorderable value where a number belongs
        raise UsageError(f"the run configs in {sweep_dir} hold a malformed shape ({exc})") from None


def validation_config(cfg: SweepConfig) -> SweepConfig:
    """The sweep `<name>-validate`, with `cfg`'s recipe. Retries are off: a retry at a lower rate
    would not be the recipe's run."""
    data = cfg.model_dump()
    data.update(name=derived_name(cfg.name, "-validate", "the validation sweep"), train={**data["train"], "retries": 0})
    return parse_config(data, f"the validation sweep of {cfg.name}")


def neighbour(family: Family, n: float, centre: float, below: bool) -> Shape:
    """The family's shape nearest `n` on one side of the centre's N (never the centre itself)."""
    side = [s for s in family.candidates(2 * max(n, centre))
            if (family.n_params(s) < centre if below else family.n_params(s) > centre)]
    if not side:  # only below can be empty: the family grows without end
        raise UsageError(f"the model family has no shape below N = {centre:.3g}: the optimum is the smallest "
                         "model the family can build, so there is no smaller neighbour to train")
    shape = min(side, key=lambda s: abs(math.log(family.n_params(s) / n)))
    return shape.model_copy(update={"lr": family.lr(shape)})


def optimum_of(fit: LawFit, compute: float) -> tuple[float, float]:
    """N_opt, D_opt at `compute` of the allocation the fit plans with (`LawFit.plan`: under `--form
    kaplan` that form's, as `scaling plan` recommends it): the run validated is the one recommended."""
    best = fit.plan(compute)     # UsageError for a law with no optimum
    n_opt, d_opt = float(best.n), float(best.d)
    if not (math.isfinite(n_opt) and n_opt > 0):
        raise UsageError(f"the law has no compute-optimal N at C = {compute:.3g}: nothing to validate")
    return n_opt, d_opt


def plan_runs(fit: LawFit, cfg: SweepConfig, family: Family, compute: float,
              n_opt: float) -> list[tuple[str, PlannedRun]]:
    """The three runs at `compute`, by position: the family's shape nearest `n_opt` and its two
    neighbours, each on D = C / (its FLOPs per token in the fit's measure) rounded to whole batches."""
    centre = family.shape_near(n_opt)
    n_centre = family.n_params(centre)
    shapes = {"smaller": neighbour(family, n_centre / NEIGHBOUR_FACTOR, n_centre, below=True), "optimum": centre,
              "larger": neighbour(family, n_centre * NEIGHBOUR_FACTOR, n_centre, below=False)}
    measure = fit.law.flops.measure
    runs = []
    for position, shape in shapes.items():
        assert shape.lr is not None      # a family's shapes carry their rate (Family.candidates)
        tokens = budget_tokens(compute, family.flops_per_token(shape, measure), cfg.train.batch_tokens)
        runs.append((position, planned_run(cfg, shape, tokens, shape.lr, budget=compute, budget_measure=measure,
                                           role=store.VALIDATION_ROLE)))
    return runs


def predictions(fit: LawFit, family: Family, compute: float, optimum: tuple[float, float],
                runs: list[tuple[str, PlannedRun]], *, store_dir: Path, fit_path: str = "",
                forced: bool = False) -> Validation:
    """The validation as planned about `optimum` (N_opt, D_opt): each run's predicted loss and
    interval, nothing observed yet."""
    rows = []
    for position, run in runs:
        n, d = family.n_params(run.shape), run.spec.tokens
        rows.append(ValidationRun(position, run.run_id, run.shape.d_model, run.shape.n_layers, run.shape.n_heads,
                                  run.spec.lr, n, d, fit.expected_loss(n, d), fit.loss_interval(n, d)))
    c_range = fit.data.c_range
    use = fit.data.context_use       # the fitted runs' range, as fit.json records it (None: not recorded)
    return Validation(compute, float(c_range[1]) if c_range else None, *optimum,
                      fit.ci.level if fit.ci else 0.95, tuple(rows),
                      fit.diagnostics.verdict if fit.diagnostics else None, forced, str(store_dir), fit_path,
                      fit.law.to_dict(), None if use is None else tuple(use))


def check_trust(fit: LawFit, force: bool) -> bool:
    """Refuse a fit the diagnostics call `not identified`, unless forced; True when forced past it."""
    if fit.diagnostics is None or fit.diagnostics.verdict != "not identified":
        return False
    if force:
        return True
    why = "; ".join(fit.diagnostics.reasons[:2]) or "see its diagnostics"
    raise UsageError(f"the fit's verdict is 'not identified' ({why}): its optimum is not a prediction to "
                     "validate; force it to train it anyway", options=("force",))


def prepare(fit: LawFit, cfg: SweepConfig, compute: float | str, *, runs_dir: Path | str = "runs", force: bool = False,
            fit_path: str = "") -> tuple[SweepConfig, list[PlannedRun], Validation]:
    """The validation sweep's config, its three runs and their predictions (what a dry run shows)."""
    forced = check_trust(fit, force)
    compute = check_compute(compute)
    vcfg = validation_config(cfg)
    family = family_of(vcfg, fit.data.param_convention or "non_embedding")
    optimum = optimum_of(fit, compute)          # one plan: with the bootstrap's intervals, not free
    runs = plan_runs(fit, vcfg, family, compute, optimum[0])
    planned = predictions(fit, family, compute, optimum, runs, store_dir=Path(runs_dir) / vcfg.name,
                          fit_path=fit_path, forced=forced)
    return vcfg, [run for _, run in runs], planned


def observe(planned: Validation, sweep_dir: Path) -> Validation:
    """The planned validation with each run's status and final loss read from the store."""
    runs = []
    for r in planned.runs:
        summary = store.read_summary(sweep_dir / r.run_id) or {"status": "incomplete"}
        finished = summary["status"] == "finished"
        runs.append(replace(r, status=summary["status"], observed=summary.get("final_val_loss") if finished else None,
                            context_use=summary.get("final_context_use") if finished else None))
    return replace(planned, runs=tuple(runs))


def as_dry_run(planned: Validation, state: SweepState, sweep_dir: Path) -> Validation:
    """The planned validation as far as its store `sweep_dir` has got (`state`, of scaling.sweeps.
    state): the runs that ended as they ended (status, observed loss), which a run of validate
    would reuse, and the others 'would train' or 'would resume'."""
    seen = observe(planned, sweep_dir)
    return replace(seen, runs=tuple(r if r.run_id in state.ended else replace(r, status=state.status(r.run_id))
                                    for r in seen.runs))


def validate(fit: LawFit, cfg: SweepConfig, compute: float | str, *, runs_dir: Path | str = "runs",
             cache_dir: Path | None = None, force: bool = False, fit_path: str = "",
             reporter: Reporter | None = None) -> Validation:
    """Train the three runs at `compute` not trained yet, and compare them with the law."""
    vcfg, runs, planned = prepare(fit, cfg, compute, runs_dir=runs_dir, force=force, fit_path=fit_path)
    result = run_sweep(vcfg, runs_dir, cache_dir, reporter, planned=runs)
    return observe(planned, result.sweep_dir)


def validate_fit(fit: LawFit | str | Path, compute: float | str, *, config: str | Path | None = None,
                 runs_dir: str | Path | None = None, cache_dir: Path | None = None, force: bool = False,
                 reporter: Reporter | None = None) -> Validation:
    """Train the model `fit` (a LawFit, or a fit directory / fit.json) recommends at `compute`
    FLOPs and its two neighbours, as `scaling validate` does (`scaling.validate(...)` is this
    function); the `result.Validation`. config: the sweep's YAML (default: read back from the
    fit's run store); runs_dir: the run store root (default: the one holding the fit's store).
    Loads torch."""
    fit_path = ""
    if not isinstance(fit, LawFit):
        fit_path = str(Path(fit) / FILENAME if Path(fit).is_dir() else fit)
        fit = load_fit(fit_path)
    return validate(fit, recipe(fit, config), compute, runs_dir=runs_root(fit, runs_dir), cache_dir=cache_dir,
                    force=force, fit_path=fit_path, reporter=reporter)
