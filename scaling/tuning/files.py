"""The files `scaling tune` writes, at the I/O edge of the tuning stage: tune.json and the tuned config.

    write_tuning("fits/tiny-tune", "configs/tiny.yaml", tuning, law)   # tune.json, tiny-tuned.yaml
    write_budget_tuning("fits/tiny-tune", "configs/tiny.yaml", tried)   # `scaling tune --budgets`

Checked before any training (`check_tuning_output`): a tuned config tune did not write is
replaced only with --force, and never the input config. tune.json, the tuned config and the figure
(tune.png, tune.svg, drawn by `scaling.report.tuning` and handed in as bytes) are written as one unit
(`journal.replace_files`, as a fit's files): a kill or a full disk at any point leaves the old set or,
once the next tune (`journal.settle`, which it calls first) has finished the
committed renames, the new one.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

from scaling.errors import UsageError
from scaling.formats import json_safe
from scaling.reading import parse_yaml
from scaling.runs.journal import replace_files
from scaling.runs.store import check_output
from scaling.tuning.lr_law import LRLaw
from scaling.tuning.shapes import TUNED, Tuning, tuned_config

if TYPE_CHECKING:
    from scaling.tuning.budgets import Beta2Tunings, BudgetTuning

FIGURE_FILES = ("tune.png", "tune.svg")              # the tuning's figure (scaling.report.tuning)
TUNE_FILES = ("tune.json", *FIGURE_FILES)            # what tune writes beside the tuned config
TUNED_HEADER = "# Learning rates from `scaling tune "   # a tuned config's first line begins so


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


def check_tuning_output(out: str | Path, config_path: str | Path, name: str, force: bool = False) -> None:
    """Refuse, before any training, an `out` that cannot take tune's files, a tuned config that
    would replace the input config (never done), or a file of that name tune did not write
    (replaced only with `force`); tune's own earlier output is replaced, as a rerun should."""
    out, config_path = Path(out), Path(config_path)
    tuned = out / f"{name}{TUNED}.yaml"
    check_output(out, [tuned.name, *TUNE_FILES])
    for path in (tuned, *(out / f for f in TUNE_FILES)):
        if path.exists() and config_path.exists() and path.samefile(config_path):
            raise UsageError(f"{path} would replace its input config {config_path}: give another output folder",
                             options=("out",))
    if (tuned.exists() or tuned.is_symlink()) and not force and not written_by_tune(tuned):
        raise UsageError(f"{tuned} exists and was not written by `scaling tune`; force to replace it, "
                         "or give another output folder", options=("force", "out"))


def _input_config(out: Path, config_path: Path, force: bool) -> dict:
    """The input config's YAML, once `out` is checked to take tune's files (`check_tuning_output`)."""
    data = parse_yaml(config_path.read_text(encoding="utf-8"), str(config_path))
    check_tuning_output(out, config_path, data["name"], force)
    return data


def _config_text(header: str, config: dict) -> str:
    """A tuned config's file: the header saying where its rates came from, then the YAML."""
    return header + yaml.safe_dump(config, sort_keys=False, default_flow_style=None)


def write_tuning(out: str | Path, config_path: str | Path, tuning: Tuning, law: LRLaw, force: bool = False,
                 figures: dict[str, bytes] | None = None) -> tuple[Path, Path]:
    """Write into `out` tune.json, `<name>-tuned.yaml` (the config at `config_path` with each shape's
    chosen rate, and a header saying where they came from) and `figures` (tune.png and tune.svg's
    bytes, `scaling.report.tuning.figure_files`) as one unit, an earlier tune's figure removed where
    none is given; return the first two paths. `force`: replace a `<name>-tuned.yaml` that tune did
    not write (check_tuning_output)."""
    out, config_path = Path(out), Path(config_path)
    data = _input_config(out, config_path, force)
    tuned_path, record_path = out / f"{data['name']}{TUNED}.yaml", out / "tune.json"
    header = (f"{TUNED_HEADER}{config_path}`: each shape's rate chosen from the runs in "
              f"{tuning.sweep_dir}\n# ({len(tuning.lrs)} rates, {tuning.tokens:,} tokens each); "
              f"the table and the fit are in {record_path}.\n")
    edges = [s.name for s in tuning.shapes if s.choice.method == "edge"]
    if edges:
        header += f"# At the grid's edge (the optimum lies beyond: widen --lrs, tune again): {', '.join(edges)}\n"
    tuned = tuned_config(data, tuning.shapes)
    record = {"config": str(config_path), "tuned_config": str(tuned_path), **tune_record(tuning, law)}
    figures = {name: figures[name] for name in FIGURE_FILES if name in figures} if figures else {}
    replace_files(out, {tuned_path.name: _config_text(header, tuned),
                        record_path.name: json.dumps(json_safe(record), indent=2) + "\n", **figures},
                  remove=FIGURE_FILES)
    return record_path, tuned_path


def tuning_record(tuning: BudgetTuning) -> dict:
    """One beta2's budget tuning as tune.json holds it: the cells, the law, the cost."""
    cells = [{"cell": c.name, "shape": c.run.shape.model_dump(exclude={"lr"}), "tokens": c.run.spec.tokens,
              "budget": c.run.spec.budget, "n_params_non_embedding": c.run.n_params_non_embedding,
              "config_lr": c.run.spec.lr, "lrs": c.lrs, "losses": c.losses, "lr_opt": c.choice.lr,
              "loss_opt": c.choice.loss, "method": c.choice.method, "edge": c.choice.edge} for c in tuning.cells]
    law = tuning.law
    return {"beta2": tuning.beta2, "cells": cells, "lr_law": None if law is None else vars(law),
            "lr_law_note": tuning.why, "tuning_flops_exact": tuning.tuning_flops}


def write_budget_tuning(out: str | Path, config_path: str | Path, tried: Beta2Tunings,
                        force: bool = False) -> tuple[Path, Path | None, Path | None]:
    """Write into `out` tune.json (each beta2's cells, law and cost, and the one chosen: `tried`, a
    scaling.tuning.budgets.Beta2Tunings) and, when the chosen one has a law, `<name>-tuned.yaml`:
    the config with train.lr_law in place of its shapes' own rates, and the chosen beta2, as one
    unit. Without a law, an earlier tune's `<name>-tuned.yaml` is removed in the same unit: its rates
    are not this tuning's, and left beside this tune.json it would read as its result (one tune
    did not write, kept with `force`, stays). `force`: as write_tuning's. Returns the paths of
    tune.json, of the tuned config (None without a law) and of the earlier one removed (or None)."""
    from scaling.tuning.budgets import budget_tuned_config

    out, config_path = Path(out), Path(config_path)
    data = _input_config(out, config_path, force)
    chosen = tried.chosen
    record_path, tuned_path, law = out / "tune.json", None, chosen.law
    tuned_at = out / f"{data['name']}{TUNED}.yaml"
    files: dict[str, str] = {}
    record = {"config": str(config_path), **tuning_record(chosen),
              "beta2_tried": [tuning_record(t) for t in tried.tunings], "tuning_flops_exact": tried.tuning_flops,
              "sweep_flops_exact": chosen.sweep_flops, "cost_share": tried.cost_share}
    if law is not None:
        tuned_path = tuned_at
        header = (f"{TUNED_HEADER}{config_path} --budgets`: {law.describe()}; "
                  f"beta2 {chosen.beta2:g}.\n"
                  f"# The cells, their losses and the fit are in {record_path}.\n")
        tuned = budget_tuned_config(data, law, chosen.beta2)
        files[tuned_path.name] = _config_text(header, tuned)
        record["tuned_config"] = str(tuned_path)
    # An earlier tune's figure of shapes against rates is not this tuning's, nor its tuned config
    # when this one has none to replace it: removed with the write.
    stale = tuned_at if law is None and written_by_tune(tuned_at) else None
    replace_files(out, {**files, record_path.name: json.dumps(json_safe(record), indent=2) + "\n"},
                  remove=[*FIGURE_FILES, *([stale.name] if stale else [])])
    return record_path, tuned_path, stale
