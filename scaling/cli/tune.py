"""`scaling tune CONFIG`: each shape's learning rate measured by a short sweep, and lr_opt(N) fitted.

    scaling tune configs/tiny.yaml --dry-run                  # the tuning runs, trained nothing
    scaling tune configs/tiny.yaml --tokens 5e5 --lrs 1e-3,2e-3,4e-3,8e-3,1.6e-2

Trains `<name>-tune` into the run store (scaling.sweep.tune), prints per shape the rates tried,
their final losses and the rate chosen, fits lr_opt = c N^k over the shapes whose optimum lies
inside their grid (scaling.laws.approaches.fit_power_law, with a 95% interval), and writes into
--out: tune.json (the table, the fit, the budget and where they came from), `<name>-tuned.yaml`
(the config at the chosen rates) and tune.png/.svg (loss against lr per shape; lr_opt against N).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import yaml

from scaling.cli.sweep import console, print_plan, stop_on_signals
from scaling.config import load_config, parse_yaml
from scaling.errors import UsageError
from scaling.formats import json_safe, plain_table, positive, sci
from scaling.runs.store import write_atomic


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "tune", help="measure each shape's learning rate with a short sweep; fit lr_opt against N",
        description="For each shape of the config's grid, train a log grid of learning rates at one token "
                    "budget (into the run store, as the sweep `<name>-tune`), choose the rate of lowest "
                    "final loss (a parabola in log lr through the best rate and its neighbours), fit "
                    "lr_opt = c N^k, and write tune.json, a tuned config and a figure.")
    p.add_argument("config", type=Path, help="sweep YAML, e.g. configs/tiny.yaml")
    p.add_argument("--tokens", help="token budget of every tuning run (default: the smallest D of the sweep's runs)")
    p.add_argument("--lrs", help="comma-separated learning rates, at least 3 (default: 7 from 1e-3 to 3e-2)")
    p.add_argument("--runs-dir", type=Path, default=Path("runs"), help="run store root (default: runs)")
    p.add_argument("--cache-dir", type=Path, default=None,
                   help="token cache root (default: $SCALING_CACHE_DIR or ~/.cache/scaling)")
    p.add_argument("--out", type=Path, metavar="DIR", help="output folder (default: fits/<name>-tune)")
    p.add_argument("--dry-run", action="store_true", help="print the tuning runs; train and write nothing")
    p.set_defaults(func=cmd_tune)


def parse_flags(args):
    """The config, the rates and the budget, each checked under its flag's name."""
    from scaling.sweep.tune import DEFAULT_LRS, learning_rates

    cfg = load_config(args.config)
    try:
        lrs = learning_rates(args.lrs.split(",")) if args.lrs is not None else DEFAULT_LRS
    except UsageError as exc:
        raise UsageError(f"--lrs {args.lrs!r}: {exc}") from None
    tokens = positive(args.tokens, "--tokens", integer=True) if args.tokens is not None else None
    return cfg, lrs, tokens


class LineReporter:
    """One line per run as it ends, with its learning rate (the run id holds it only as a digest)."""

    def begin(self, jobs):
        console.print(f"{len(jobs)} tuning runs to train")

    def started(self, job): pass

    def progress(self, job, tokens_done, tokens_total, tokens_per_s): pass

    def finished(self, job, summary):
        loss = summary.get("final_val_loss")
        console.print(f"{job.spec.run_id}  lr {sci(job.spec.lr)}: {summary['status']}"
                      + (f", val loss {loss:.4f}" if loss is not None else "") + f", {summary.get('wall_s', 0):.0f} s")


def lr_law(shapes):
    """lr_opt = c N^k over the shapes whose optimum is inside their grid (an edge is only a bound),
    or None and why not."""
    from scaling.laws.approaches import fit_power_law

    inside = [s for s in shapes if s.choice.method in ("parabola", "grid point")]
    if len({s.n_params for s in inside}) < 2:
        return None, inside, f"{len(inside)} shape(s) with an optimum inside the grid; a law needs 2 sizes"
    return fit_power_law([s.n_params for s in inside], [s.choice.lr for s in inside]), inside, None


def print_table(shapes) -> None:
    """One row per shape, one column per rate tried (every shape tries the same rates)."""
    rows = []
    for s in shapes:
        losses = [f"{v:.3f}" if st == "finished" else st for v, st in zip(s.losses, s.statuses)]
        note = {"edge": f"at the {s.choice.edge} rate: widen the grid", "none": "no run finished"}
        rows.append([s.name, sci(s.n_params), *losses, sci(s.config_lr), sci(s.choice.lr),
                     note.get(s.choice.method, s.choice.method)])
    header = ["shape", "N", *(f"lr {sci(x)}" for x in shapes[0].lrs), "config lr", "chosen", "how"]
    print("final validation loss at each learning rate tried:")
    print(plain_table(header, rows))


def describe_law(law, inside, why) -> str:
    if law is None:
        return f"lr_opt(N): not fitted ({why})"
    ci = f" [{law.ci[0]:.3f}, {law.ci[1]:.3f}] (95%)" if law.ci else " (no interval from 2 points)"
    return (f"lr_opt = {sci(law.coefficient)} * N^{law.exponent:.3f}; exponent {law.exponent:.3f}{ci}, "
            f"from {law.n_points} shapes ({', '.join(s.name for s in inside)})")


def figure(shapes, law):
    """Left: final loss against lr per shape, each parabola and chosen rate; right: lr_opt against N."""
    from matplotlib import rc_context

    from scaling.report.style import RC, SizeColours, new_figure

    with rc_context(RC):
        fig, axes = new_figure(1, 2, size=(10.5, 4.3))
        colours = SizeColours([s.n_params for s in shapes], label="N (non-embedding parameters)")
        loss_panel(fig, axes[0, 0], shapes, colours)
        law_panel(axes[0, 1], shapes, law, colours)
    return fig


def loss_panel(fig, ax, shapes, colours) -> None:
    from matplotlib.lines import Line2D

    from scaling.report.style import log_axis, size_legend

    top = max((v for s in shapes for v in s.losses if v is not None), default=1.0)
    for s in shapes:
        c = colours(s.n_params)
        lrs, losses = np.array(s.lrs), np.array([np.nan if v is None else v for v in s.losses])
        ax.plot(lrs, losses, "o-", color=c, ms=4, lw=1.2)
        bad = np.isnan(losses)  # diverged or failed: crosses at the top of the panel
        ax.plot(lrs[bad], np.full(bad.sum(), top), "X", color=c, ms=7, mec="black", mew=0.5)
        if s.choice.parabola is not None:
            u = np.linspace(*np.log(s.choice.bracket), 40)
            ax.plot(np.exp(u), np.polyval(s.choice.parabola, u), ":", color=c, lw=1)
        if s.choice.lr is not None:
            ax.plot([s.choice.lr], [s.choice.loss], "*", color=c, ms=11, mec="black", mew=0.5)
    log_axis(ax, "x", counts=False)
    ax.set_xlabel("learning rate (log scale)")
    ax.set_ylabel("final validation loss (nats/token)")
    ax.set_title("Final loss against learning rate, per shape")
    extra = [Line2D([], [], color="black", marker="*", ls="none", ms=9, label="chosen")]
    if any(s.choice.parabola is not None for s in shapes):
        extra.append(Line2D([], [], color="black", ls=":", label="parabola in log lr"))
    if any(v is None for s in shapes for v in s.losses):
        extra.append(Line2D([], [], color="black", marker="X", ls="none", ms=6, label="diverged / failed"))
    size_legend(fig, ax, colours, [s.n_params for s in shapes], extra_handles=extra, loc="upper right")


def law_panel(ax, shapes, law, colours) -> None:
    from scaling.report.style import log_axis

    for s in (s for s in shapes if s.choice.lr is not None):
        edge = s.choice.method == "edge"  # hollow: only a bound, left out of the fit
        ax.plot([s.n_params], [s.choice.lr], "o", ms=7, color="white" if edge else colours(s.n_params),
                mec=colours(s.n_params), mew=1.5)
    if law is not None:
        n = np.geomspace(min(s.n_params for s in shapes), max(s.n_params for s in shapes), 50)
        ci = f" [{law.ci[0]:.2f}, {law.ci[1]:.2f}]" if law.ci else ""
        ax.plot(n, law(n), "-", color="black", lw=1.2, label=f"lr_opt = c N^k, k = {law.exponent:.2f}{ci}")
        ax.legend(loc="upper right")
    log_axis(ax, "x")
    log_axis(ax, "y", counts=False)
    ax.set_xlabel("non-embedding parameters N (log scale)")
    ax.set_ylabel("chosen learning rate (log scale)")
    ax.set_title("Chosen rate against N (hollow: at the grid's edge)")


def tune_record(tuning, law, inside, why) -> dict:
    """tune.json's content: where the runs are, the budget, each shape's table and choice, the law."""
    fit = None if law is None else {"exponent": law.exponent, "coefficient": law.coefficient,
                                    "exponent_ci95": law.ci, "exponent_stderr": law.stderr,
                                    "n_points": law.n_points, "shapes": [s.name for s in inside]}
    shapes = [{"shape": s.name, **{k: v for k, v in vars(s).items() if k != "choice"}, "lr_opt": s.choice.lr,
               "loss_opt": s.choice.loss, "method": s.choice.method, "edge": s.choice.edge} for s in tuning.shapes]
    return {"tuning_sweep": tuning.config.name, "run_store": str(tuning.sweep_dir), "tokens": tuning.tokens,
            "learning_rates": tuning.lrs, "lr_law": fit, "lr_law_note": why, "shapes": shapes}


def write_outputs(args, cfg, tuning, law, inside, why) -> Path:
    """tune.json, the tuned config and the figure, all in --out."""
    from scaling.report.style import save
    from scaling.sweep.tune import tuned_config

    out = args.out or Path("fits") / f"{cfg.name}-tune"
    out.mkdir(parents=True, exist_ok=True)
    tuned_path = out / f"{cfg.name}-tuned.yaml"
    header = (f"# Learning rates from `scaling tune {args.config}`: each shape's rate chosen from the runs in "
              f"{tuning.sweep_dir}\n# ({len(tuning.lrs)} rates, {tuning.tokens:,} tokens each); "
              f"the table and the fit are in {out / 'tune.json'}.\n")
    edges = [s.name for s in tuning.shapes if s.choice.method == "edge"]
    if edges:
        header += f"# At the grid's edge (the optimum lies beyond: widen --lrs, tune again): {', '.join(edges)}\n"
    data = tuned_config(parse_yaml(args.config.read_text(encoding="utf-8"), str(args.config)), tuning.shapes)
    write_atomic(tuned_path, header + yaml.safe_dump(data, sort_keys=False, default_flow_style=None))
    record = {"config": str(args.config), "tuned_config": str(tuned_path), **tune_record(tuning, law, inside, why)}
    write_atomic(out / "tune.json", json.dumps(json_safe(record), indent=2) + "\n")
    save(figure(tuning.shapes, law), out, "tune")
    return out


def cmd_tune(args) -> int:
    from scaling.sweep.tune import tune, tuning_config
    from scaling.train.loop import Interrupted

    cfg, lrs, tokens = parse_flags(args)
    if args.dry_run:
        tune_cfg = tuning_config(cfg, lrs, tokens)
        console.print(f"tune {cfg.name}: {len(tune_cfg.grid.models) // len(lrs)} shapes x {len(lrs)} learning rates "
                      f"({', '.join(sci(x) for x in lrs)}) at {tune_cfg.grid.tokens[0]:,} tokens each, into "
                      f"{args.runs_dir / tune_cfg.name}")
        print_plan(tune_cfg, args.runs_dir, args.cache_dir)
        return 0
    with stop_on_signals() as received:
        try:
            tuning = tune(cfg, lrs, tokens, args.runs_dir, args.cache_dir, reporter=LineReporter())
        except Interrupted:
            console.print("stopped; finished runs are kept: the same `scaling tune` command resumes")
            return 128 + received[0] if received else 130
    law, inside, why = lr_law(tuning.shapes)
    console.print(f"{tuning.sweep_dir}: trained {tuning.trained}, already done {tuning.skipped}; "
                  f"{tuning.tokens:,} tokens per run")
    print_table(tuning.shapes)
    print(describe_law(law, inside, why))
    out = write_outputs(args, cfg, tuning, law, inside, why)
    print(f"wrote {out / 'tune.json'}, {out / f'{cfg.name}-tuned.yaml'}, {out / 'tune.png'}")
    return 1 if any("failed" in s.statuses for s in tuning.shapes) else 0
