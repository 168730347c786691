"""The learning-rate law of a tuning sweep, lr_opt = c N^k, and the files `scaling tune` writes.

    tuning = scaling.sweep.tune.tune(cfg, lrs, tokens, "runs")   # each shape's rate, chosen
    law = lr_law(tuning.shapes)                                  # fitted over the inside optima
    print(format_table(tuning.shapes)); print(law.describe())
    write_tuning("fits/tiny-tune", "configs/tiny.yaml", tuning, law)   # tune.json, tiny-tuned.yaml

A shape whose best rate lies at the edge of its grid gives only a bound on its optimum, so the law
is fitted over the shapes whose optimum lies inside (`scaling.sweep.tune.choose`), by least
squares in log-log (`approaches.fit_power_law`, with a 95% interval from 3 shapes on). The
figure of the tuning is the report's (`scaling.report.tuning`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import yaml

from scaling.errors import UsageError
from scaling.formats import json_safe, plain_table, sci
from scaling.laws.optimal.approaches import PowerLaw, fit_power_law
from scaling.reading import parse_yaml
from scaling.runs.store import check_output, write_atomic
from scaling.sweep.tune import TUNED, ShapeTuning, Tuning, tuned_config

INSIDE = ("parabola", "grid point")   # choices that place the optimum inside the grid
TUNE_FILES = ("tune.json", "tune.png", "tune.svg")   # what tune writes beside the tuned config
TUNED_HEADER = "# Learning rates from `scaling tune "   # a tuned config's first line begins so


@dataclass(frozen=True)
class LRLaw:
    """lr_opt = c N^k (`power`, None when it could not be fitted, and `why` not), and the shapes
    it was fitted over."""

    power: PowerLaw | None
    inside: tuple
    why: str | None = None

    def describe(self) -> str:
        if self.power is None:
            return f"lr_opt(N): not fitted ({self.why})"
        law = self.power
        ci = f" [{law.ci[0]:.3f}, {law.ci[1]:.3f}] (95%)" if law.ci else " (no interval from 2 points)"
        return (f"lr_opt = {sci(law.coefficient)} * N^{law.exponent:.3f}; exponent {law.exponent:.3f}{ci}, "
                f"from {law.n_points} shapes ({', '.join(s.name for s in self.inside)})")

    def to_json(self) -> dict | None:
        law = self.power
        if law is None:
            return None
        return {"exponent": law.exponent, "coefficient": law.coefficient, "exponent_ci95": law.ci,
                "exponent_stderr": law.stderr, "n_points": law.n_points, "shapes": [s.name for s in self.inside]}


def lr_law(shapes: list[ShapeTuning]) -> LRLaw:
    """lr_opt = c N^k over the shapes whose optimum is inside their grid (an edge is only a bound)."""
    inside = tuple(s for s in shapes if s.choice.method in INSIDE)
    if len({s.n_params for s in inside}) < 2:
        return LRLaw(None, inside, f"{len(inside)} shape(s) with an optimum inside the grid; a law needs 2 sizes")
    return LRLaw(fit_power_law([s.n_params for s in inside], [s.choice.lr for s in inside]), inside)


def format_table(shapes: list[ShapeTuning]) -> str:
    """One row per shape, one column per rate tried (every shape tries the same rates)."""
    rows = []
    for s in shapes:
        losses = [f"{v:.3f}" if st == "finished" else st for v, st in zip(s.losses, s.statuses)]
        note = {"edge": f"at the {s.choice.edge} rate: widen the grid", "none": "no run finished"}
        rows.append([s.name, sci(s.n_params), *losses, sci(s.config_lr), sci(s.choice.lr),
                     note.get(s.choice.method, s.choice.method)])
    header = ["shape", "N", *(f"lr {sci(x)}" for x in shapes[0].lrs), "config lr", "chosen", "how"]
    return "final validation loss at each learning rate tried:\n" + plain_table(header, rows)


def tune_record(tuning: Tuning, law: LRLaw) -> dict:
    """tune.json's content: where the runs are, the budget, each shape's table and choice, the law."""
    shapes = [{"shape": s.name, **{k: v for k, v in vars(s).items() if k != "choice"}, "lr_opt": s.choice.lr,
               "loss_opt": s.choice.loss, "method": s.choice.method, "edge": s.choice.edge} for s in tuning.shapes]
    return {"tuning_sweep": tuning.config.name, "run_store": str(tuning.sweep_dir), "tokens": tuning.tokens,
            "learning_rates": tuning.lrs, "lr_law": law.to_json(), "lr_law_note": law.why, "shapes": shapes}


def written_by_tune(path: Path) -> bool:
    """Whether `path` is a regular file that opens with the header of a tuned config."""
    if not path.is_file():      # not a FIFO to wait on, nor a folder
        return False
    with open(path, "rb") as f:
        return f.read(len(TUNED_HEADER)) == TUNED_HEADER.encode()


def check_tuning_output(out, config_path, name: str, force: bool = False) -> None:
    """Refuse, before any training, an `out` that cannot take tune's files, a tuned config that
    would replace the input config (never done), or a file of that name tune did not write
    (replaced only with `force`); tune's own earlier output is replaced, as a rerun should."""
    out, config_path = Path(out), Path(config_path)
    tuned = out / f"{name}{TUNED}.yaml"
    check_output(out, [tuned.name, *TUNE_FILES])
    for path in (tuned, *(out / f for f in TUNE_FILES)):
        if path.exists() and config_path.exists() and path.samefile(config_path):
            raise UsageError(f"{path} would replace its input config {config_path}: give --out another folder")
    if (tuned.exists() or tuned.is_symlink()) and not force and not written_by_tune(tuned):
        raise UsageError(f"{tuned} exists and was not written by `scaling tune`; pass --force to replace it, "
                         "or give --out another folder")


def write_tuning(out, config_path, tuning: Tuning, law: LRLaw, force: bool = False) -> tuple[Path, Path]:
    """Write into `out` tune.json and `<name>-tuned.yaml`, the config at `config_path` with each
    shape's chosen rate (and a header saying where they came from); return the two paths.
    `force`: replace a `<name>-tuned.yaml` that tune did not write (check_tuning_output)."""
    out, config_path = Path(out), Path(config_path)
    data = parse_yaml(config_path.read_text(encoding="utf-8"), str(config_path))
    check_tuning_output(out, config_path, data["name"], force)
    out.mkdir(parents=True, exist_ok=True)
    tuned_path, record_path = out / f"{data['name']}{TUNED}.yaml", out / "tune.json"
    header = (f"{TUNED_HEADER}{config_path}`: each shape's rate chosen from the runs in "
              f"{tuning.sweep_dir}\n# ({len(tuning.lrs)} rates, {tuning.tokens:,} tokens each); "
              f"the table and the fit are in {record_path}.\n")
    edges = [s.name for s in tuning.shapes if s.choice.method == "edge"]
    if edges:
        header += f"# At the grid's edge (the optimum lies beyond: widen --lrs, tune again): {', '.join(edges)}\n"
    tuned = tuned_config(data, tuning.shapes)
    write_atomic(tuned_path, header + yaml.safe_dump(tuned, sort_keys=False, default_flow_style=None))
    record = {"config": str(config_path), "tuned_config": str(tuned_path), **tune_record(tuning, law)}
    write_atomic(record_path, json.dumps(json_safe(record), indent=2) + "\n")
    return record_path, tuned_path


def format_cells(tuning) -> str:
    """One row per tuned cell (scaling.sweep.tune_budgets): its rates, their losses and the choice."""
    title = f"the cells tuned at their own D, beta2 {tuning.beta2:g}:\n"
    rows = []
    for c in tuning.cells:
        tried = ", ".join(f"{sci(lr)}: {'-' if loss is None else f'{loss:.3f}'}" for lr, loss in zip(c.lrs, c.losses))
        rows.append([c.name, sci(c.run.n_params_non_embedding), sci(c.run.spec.lr), tried,
                     "-" if c.choice.lr is None else sci(c.choice.lr), c.choice.method])
    header = ["cell", "N non-emb", "config lr", "final loss at each rate", "chosen", "how"]
    return title + plain_table(header, rows)


def tuning_record(tuning) -> dict:
    """One beta2's budget tuning as tune.json holds it: the cells, the law, the cost."""
    cells = [{"cell": c.name, "shape": c.run.shape.model_dump(exclude={"lr"}), "tokens": c.run.spec.tokens,
              "budget": c.run.spec.budget, "n_params_non_embedding": c.run.n_params_non_embedding,
              "config_lr": c.run.spec.lr, "lrs": c.lrs, "losses": c.losses, "lr_opt": c.choice.lr,
              "loss_opt": c.choice.loss, "method": c.choice.method, "edge": c.choice.edge} for c in tuning.cells]
    law = tuning.law
    return {"beta2": tuning.beta2, "cells": cells, "lr_law": None if law is None else vars(law),
            "lr_law_note": tuning.why, "tuning_flops_exact": tuning.tuning_flops}


def write_budget_tuning(out, config_path, tried, force: bool = False) -> tuple[Path, Path | None]:
    """Write into `out` tune.json (each beta2's cells, law and cost, and the one chosen: `tried`, a
    scaling.sweep.tune_budgets.Beta2Tunings) and, when the chosen one has a law, `<name>-tuned.yaml`:
    the config with train.lr_law in place of its shapes' own rates, and the chosen beta2. `force`:
    as write_tuning's."""
    from scaling.sweep.tune_budgets import budget_tuned_config

    out, config_path = Path(out), Path(config_path)
    data = parse_yaml(config_path.read_text(encoding="utf-8"), str(config_path))
    check_tuning_output(out, config_path, data["name"], force)
    out.mkdir(parents=True, exist_ok=True)
    chosen = tried.chosen
    record_path, tuned_path, law = out / "tune.json", None, chosen.law
    record = {"config": str(config_path), **tuning_record(chosen),
              "beta2_tried": [tuning_record(t) for t in tried.tunings], "tuning_flops_exact": tried.tuning_flops,
              "sweep_flops_exact": chosen.sweep_flops, "cost_share": tried.cost_share}
    if law is not None:
        tuned_path = out / f"{data['name']}{TUNED}.yaml"
        header = (f"{TUNED_HEADER}{config_path} --budgets`: {law.describe()}; "
                  f"beta2 {chosen.beta2:g}.\n"
                  f"# The cells, their losses and the fit are in {record_path}.\n")
        tuned = budget_tuned_config(data, law, chosen.beta2)
        write_atomic(tuned_path, header + yaml.safe_dump(tuned, sort_keys=False, default_flow_style=None))
        record["tuned_config"] = str(tuned_path)
    write_atomic(record_path, json.dumps(json_safe(record), indent=2) + "\n")
    return record_path, tuned_path
