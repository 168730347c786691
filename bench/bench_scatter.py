"""Where the demo's scatter comes from: the final loss's spread by source, measured on its own runs.

    python bench/bench_scatter.py plan  .bench/scatter/configs          # the experiment's configs
    python bench/bench_scatter.py run   .bench/scatter/configs runs-scatter      # on 16 cores: 4.3 min
    python bench/bench_scatter.py table runs-scatter [--baseline runs/tiny]

Every cell (shape, budget) of the demo's IsoFLOP design (configs/tiny.yaml) is trained again
 - at its configured learning rate times 0.5, 0.71, 1, 1.41 and 2 (`tiny-lr<m>`),
 - with AdamW beta2 = 0.99 instead of 0.95 (`tiny-beta2`, Porian et al. 2024: 0.95 costs loss at
   small batches),
 - with training seeds 1 and 2 (`tiny-seeds`: replicates on the same tokens),
and three shapes of about the same N as three of the family's are trained at 1e12 FLOPs
(`tiny-shape-*`: depth against width at equal N). The table gives, in percent of the loss:
 - seed: the replicates' standard deviation per cell;
 - learning rate: the loss at the configured rate above the cell's optimum (a parabola in ln lr
   through the best rate and its neighbours), and its spread across cells, the part no law in N
   and D absorbs;
 - beta2: the loss at 0.99 against 0.95;
 - shape: the alternative shape against the family's at the same budget;
and the law fitted to the configured runs beside the law fitted to each cell's optimum (the
"tuned" table): residual RMS, a, tokens per parameter at the largest budget. It also fits the
learning-rate law in N and D over the cells' optima (what `scaling tune --budgets` fits).
Evaluation noise is not here: `bench_eval_noise.py` measures it on the same checkpoints.
"""

from __future__ import annotations

import argparse
import copy
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "configs" / "tiny.yaml"
LR_MULTIPLIERS = (0.5, 0.71, 1.0, 1.41, 2.0)
# (family shape, alternative of about its N_total): width traded for depth, trained at 1e12
ALTERNATIVES = [((32, 2, 2), (28, 3, 2)), ((48, 2, 3), (40, 3, 4)), ((48, 3, 3), (56, 2, 4))]
SHAPE_BUDGET = 1e12


def demo_config() -> dict:
    return yaml.safe_load(DEMO.read_text(encoding="utf-8"))


def with_lr_multiplier(base: dict, m: float) -> dict:
    cfg = copy.deepcopy(base)
    cfg["name"] = f"tiny-lr{m:g}"
    for shape in cfg["grid"]["models"]:
        shape["lr"] = float(f"{shape['lr'] * m:.4g}")
    return cfg


def shape_configs(base: dict) -> list[dict]:
    """One cross-grid config per alternative shape: its own D at the budget's exact FLOPs, and the
    family's learning-rate law at its N (configs/tiny.yaml: lr = 0.0512 N_non-emb^-0.230)."""
    from scaling.train.counts import flops_by_measure, param_counts

    vocab, context = base["tokenizer"]["vocab_size"], base["model"]["context_length"]
    out = []
    for _, (d, layers, heads) in ALTERNATIVES:
        n_non_emb = param_counts(layers, d, context, vocab)[1]
        tokens = int(SHAPE_BUDGET / flops_by_measure(layers, d, context, vocab)["exact"])
        cfg = copy.deepcopy(base)
        cfg["name"] = f"tiny-shape-d{d}-l{layers}"
        cfg["grid"] = {"models": [{"d_model": d, "n_layers": layers, "n_heads": heads,
                                   "lr": float(f"{0.0512 * n_non_emb ** -0.230:.3g}")}], "tokens": [tokens]}
        out.append(cfg)
    return out


def experiment(base: dict) -> list[dict]:
    seeds = copy.deepcopy(base)
    seeds["name"], seeds["train"]["seeds"] = "tiny-seeds", [1, 2]
    beta2 = copy.deepcopy(base)
    beta2["name"], beta2["train"]["beta2"] = "tiny-beta2", 0.99
    return [with_lr_multiplier(base, m) for m in LR_MULTIPLIERS] + [seeds, beta2] + shape_configs(base)


def write_plan(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for cfg in experiment(demo_config()):
        (folder / f"{cfg['name']}.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False), encoding="utf-8")
        print(folder / f"{cfg['name']}.yaml")


def run_all(folder: Path, runs_dir: Path) -> None:
    """Every config's sweep at once, every run at once on one thread: the OS shares the cores, so
    no core idles while a long run finishes alone."""
    from scaling.config import load_config
    from scaling.sweeps.plan import plan

    procs = []
    for path in sorted(folder.glob("*.yaml")):
        cfg = yaml.safe_load(path.read_text(encoding="utf-8"))
        cfg["executor"] = {"workers": len(plan(load_config(path))), "threads_per_run": 1}
        live = runs_dir / "configs" / path.name
        live.parent.mkdir(parents=True, exist_ok=True)
        live.write_text(yaml.safe_dump(cfg, sort_keys=False), encoding="utf-8")
        command = [sys.executable, "-m", "scaling", "sweep", str(live), "--runs-dir", str(runs_dir)]
        procs.append(subprocess.Popen(command, env={**os.environ, "OMP_NUM_THREADS": "1"}))
    for p in procs:
        p.wait()


def finished(store: Path) -> pd.DataFrame:
    table = pd.read_csv(store / "runs.csv")
    return table[table.status == "finished"]


def cell_key(table: pd.DataFrame) -> pd.Series:
    return table.d_model.astype(str) + "-" + table.n_layers.astype(str) + "@" + table.budget.map("{:g}".format)


def lr_table(root: Path) -> pd.DataFrame:
    """One row per (cell, multiplier): the final loss."""
    parts = []
    for m in LR_MULTIPLIERS:
        store = root / f"tiny-lr{m:g}"
        if (store / "runs.csv").exists():
            t = finished(store).assign(multiplier=m)
            parts.append(t.assign(cell=cell_key(t)))
    return pd.concat(parts)


def cell_optimum(rows: pd.DataFrame) -> tuple[float, float, str]:
    """(lr_opt, loss_opt, how) of one cell: the parabola in ln lr through the best rate and its two
    neighbours; the best rate itself where it sits at the grid's edge."""
    rows = rows.sort_values("lr")
    x, y = np.log(rows.lr.to_numpy()), rows.final_val_loss.to_numpy()
    i = int(np.argmin(y))
    if i in (0, len(y) - 1):
        return float(rows.lr.iloc[i]), float(y[i]), "edge"
    p2, p1, p0 = np.polyfit(x[i - 1:i + 2], y[i - 1:i + 2], 2)
    u = -p1 / (2 * p2)
    return float(np.exp(u)), float(p0 + p1 * u + p2 * u * u), "parabola"


def pct(x) -> str:
    return f"{100 * x:.2f}%"


def scatter_table(root: Path) -> None:
    lrs = lr_table(root)
    base = lrs[lrs.multiplier == 1.0].set_index("cell")
    rows = []
    for cell, group in lrs.groupby("cell"):
        lr_opt, loss_opt, how = cell_optimum(group)
        b = base.loc[cell]
        rows.append({"cell": cell, "budget": b.budget, "N": b.n_params_total, "D": b.tokens, "lr": b.lr,
                     "loss": b.final_val_loss, "lr_opt": lr_opt, "loss_opt": loss_opt, "how": how,
                     "lr_excess": b.final_val_loss / loss_opt - 1})
    cells = pd.DataFrame(rows).set_index("cell")
    seeds = finished(root / "tiny-seeds")
    seeds = seeds.assign(cell=cell_key(seeds))
    reps = pd.concat([base.reset_index()[["cell", "final_val_loss"]], seeds[["cell", "final_val_loss"]]])
    spread = reps.groupby("cell").final_val_loss.agg(lambda v: v.std(ddof=1) / v.mean())
    cells["seed_sd"] = spread
    beta = finished(root / "tiny-beta2")
    cells["beta2_0.99"] = beta.assign(cell=cell_key(beta)).set_index("cell").final_val_loss / cells.loss - 1
    pd.set_option("display.width", 200)
    print(cells.sort_values(["budget", "N"]).to_string(float_format=lambda v: f"{v:.4g}"))
    print("\nscatter by source, % of the loss (RMS over cells; by budget in brackets):")
    by_budget = cells.groupby("budget")
    for name, col in (("seed sd", "seed_sd"), ("lr excess at configured rate", "lr_excess"),
                      ("beta2 0.99 - 0.95", "beta2_0.99")):
        rms = float(np.sqrt(np.nanmean(cells[col] ** 2)))
        per = ", ".join(pct(np.sqrt(np.nanmean(g[col] ** 2))) for _, g in by_budget)
        print(f"  {name:32s} {pct(rms)}  [{per}]")
    print(f"  {'lr excess, sd across cells':32s} {pct(cells.lr_excess.std(ddof=1))}")
    shape_rows(root, base)
    fits(cells)


def shape_rows(root: Path, base: pd.DataFrame) -> None:
    print("\nshape at equal N, 1e12 FLOPs (alternative / family - 1):")
    for (fam, alt) in ALTERNATIVES:
        store = root / f"tiny-shape-d{alt[0]}-l{alt[1]}"
        family = base[(base.d_model == fam[0]) & (base.n_layers == fam[1]) & (base.budget == SHAPE_BUDGET)]
        if not (store / "runs.csv").exists() or family.empty:
            continue
        a, f = finished(store).iloc[0], family.iloc[0]
        print(f"  d{alt[0]}/L{alt[1]} (N {a.n_params_total:,}) vs d{fam[0]}/L{fam[1]} (N {f.n_params_total:,}): "
              f"{pct(a.final_val_loss / f.final_val_loss - 1)}")


def fits(cells: pd.DataFrame) -> None:
    """The law on the configured runs and on each cell's optimum; the lr law in N and D."""
    import scaling

    for label, col in (("configured rates", "loss"), ("each cell at its optimum", "loss_opt")):
        table = pd.DataFrame({"N": cells.N, "D": cells.D, "loss": cells[col]})
        f = scaling.fit(table, n="N", d="D", loss="loss", bootstrap=400, seed=0)
        print(f"\nfit, {label}:\n{f.summary()}")
    inside = cells[cells.how == "parabola"]
    X = np.column_stack([np.ones(len(inside)), np.log(inside.N), np.log(inside.D)])
    coef, *_ = np.linalg.lstsq(X, np.log(inside.lr_opt), rcond=None)
    resid = np.log(inside.lr_opt) - X @ coef
    print(f"\nlr_opt = {np.exp(coef[0]):.4g} N^{coef[1]:.3f} D^{coef[2]:.3f} over {len(inside)} cells "
          f"with an inside optimum; residual sd {resid.std(ddof=3):.3f} in ln lr")


def at_optimum_configs(root: Path, folder: Path) -> None:
    """Each cell again at its measured best rate (the parabola's optimum, or the best rate where it
    sits at the grid's edge): seeds 0-2 at beta2 0.95 (`tiny-opt-*`), seed 0 at 0.99 (`tiny-opt99-*`)."""
    base = demo_config()
    folder.mkdir(parents=True, exist_ok=True)
    lrs = lr_table(root)
    for cell, group in lrs.groupby("cell"):
        lr_opt, _, _ = cell_optimum(group)
        b = group.iloc[0]
        shape = {"d_model": int(b.d_model), "n_layers": int(b.n_layers), "n_heads": int(b.n_heads),
                 "lr": float(f"{lr_opt:.3g}")}
        for prefix, train in (("tiny-opt", {"seeds": [0, 1, 2]}), ("tiny-opt99", {"beta2": 0.99})):
            cfg = copy.deepcopy(base)
            cfg["name"] = f"{prefix}-{cell.replace('@', '-at-').replace('+', '')}"
            cfg["grid"] = {"models": [shape], "tokens": [int(b.tokens)]}
            cfg["train"].update(train)
            (folder / f"{cfg['name']}.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False), encoding="utf-8")


def at_optimum_table(root: Path) -> None:
    """The law on the cells at their optimum rates (seed 0, and the mean of seeds 0-2), the seed
    spread there, and beta2 0.99 against 0.95 at the same rates."""
    import scaling

    parts = [finished(p).assign(store=p.name) for p in sorted(root.glob("tiny-opt*")) if (p / "runs.csv").exists()]
    runs = pd.concat(parts)
    runs = runs.assign(cell=cell_key(runs.assign(budget=runs.flops_exact.map(lambda c: float(f"{c:.1g}")))))
    opt = runs[~runs.store.str.startswith("tiny-opt99")]
    spread = opt.groupby("cell").final_val_loss.agg(lambda v: v.std(ddof=1) / v.mean())
    print(f"seed sd at the optimum rates: RMS {pct(np.sqrt((spread ** 2).mean()))}, max {pct(spread.max())}")
    print(opt.pivot_table(index="cell", columns="seed", values="final_val_loss").assign(
        lr=opt.groupby("cell").lr.first(), sd=spread).round(4).to_string())
    b99 = runs[runs.store.str.startswith("tiny-opt99")].set_index("cell").final_val_loss
    seed0 = opt[opt.seed == 0].set_index("cell")
    diff = (b99 / seed0.final_val_loss - 1).dropna()
    print(f"beta2 0.99 - 0.95 at the optimum rates: mean {pct(diff.mean())}, RMS {pct(np.sqrt((diff ** 2).mean()))}")
    means = opt.groupby("cell").agg(N=("n_params_total", "first"), D=("tokens", "first"), C=("flops_exact", "first"),
                                    loss=("final_val_loss", "mean"))
    for label, table in (("seed 0", seed0.rename(columns={"n_params_total": "N", "tokens": "D",
                                                           "flops_exact": "C", "final_val_loss": "loss"})),
                         ("mean of 3 seeds", means), ("3 seeds as points", opt.rename(columns={
                             "n_params_total": "N", "tokens": "D", "flops_exact": "C", "final_val_loss": "loss"}))):
        f = scaling.fit(table[["N", "D", "loss"]].reset_index(drop=True), n="N", d="D", loss="loss",
                        bootstrap=400, seed=0)
        print(f"\nfit at the optimum rates, {label}:\n{f.summary()}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("plan").add_argument("folder", type=Path)
    r = sub.add_parser("run")
    r.add_argument("folder", type=Path)
    r.add_argument("runs_dir", type=Path)
    sub.add_parser("table").add_argument("runs_dir", type=Path)
    o = sub.add_parser("plan-optimum")
    o.add_argument("runs_dir", type=Path)
    o.add_argument("folder", type=Path)
    sub.add_parser("table-optimum").add_argument("runs_dir", type=Path)
    args = ap.parse_args()
    if args.cmd == "plan":
        write_plan(args.folder)
    elif args.cmd == "plan-optimum":
        at_optimum_configs(args.runs_dir, args.folder)
    elif args.cmd == "table-optimum":
        at_optimum_table(args.runs_dir)
    elif args.cmd == "run":
        run_all(args.folder, args.runs_dir)
    else:
        scatter_table(args.runs_dir)


if __name__ == "__main__":
    main()
