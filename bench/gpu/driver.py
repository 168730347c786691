"""The GPU path measured in one call of a lent GPU (issue 42): every figure under OUT as it comes.

    bash bench/gpu/run.sh                       # on the GPU machine: every stage, about 520 s
    SCALING_DRY_RUN=1 bash bench/gpu/run.sh     # on CPU: every stage on micro configs (a few minutes)
    python bench/gpu/driver.py --only study,validate --total 540   # some stages, with the whole time

Stages, in this order, each under its own time limit (`LIMITS`; the study: `stage_limit`), each
recorded as ok, failed, timed out or skipped, with what it had:

    tests       the tests that need CUDA (pytest -m cuda; on CPU they skip)
    throughput  the study's 7 shapes, k = 1, 2, 4, 8, 16 runs at once on the GPU: summed tokens/s,
                share of the card's bf16 peak, GPU memory per run (bench/gpu/throughput.py)
    compile     one shape with train.compile, one run: tokens/s and compile time, beside eager
    stacked     R runs of one shape stacked in one process (bench/gpu/stacked.py): tokens/s, memory
    demo        configs/tiny.yaml (the demo, 20 runs) swept with runs_per_gpu = the best k, fitted
    study       configs/study.yaml (21 runs past the change to using context) swept, fitted
    validate    the study's law validated at 3x its largest budget

After each stage OUT/gpu.json (every figure) and OUT/gpu.md (the tables) are written again, and the
run stores and fits (without checkpoints) go to OUT/runs.tar.gz, so a call stopped at its limit
still returns what it measured. Sweeps, fits and validations run through the command line
(`python -m scaling ...`, as `make study` runs them) into a work folder outside the repository;
one past its limit gets SIGTERM, on which its runs stop with a checkpoint.

--dry-run: the same stages on CPU with micro configs (the test suite's micro corpus, three
two-layer shapes of width 16-32, budgets of 1e9-2e9 FLOPs), short timings and small limits.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import tarfile
import time
import traceback
from collections import Counter
from pathlib import Path

import numpy as np
import torch
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpu_tables import write_report  # noqa: E402
from stacked import time_stacked  # noqa: E402
from throughput import ShapeJob, bf16_peak, measure  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # bench/: bench_train
from bench_train import Layout, Timing, matmul_flops  # noqa: E402

from scaling.config import SweepConfig, load_config, parse_config  # noqa: E402
from scaling.data.tokens import prepare_tokens  # noqa: E402
from scaling.runs import store  # noqa: E402
from scaling.sweeps.packing import usable_cores  # noqa: E402
from scaling.sweeps.plan import plan  # noqa: E402
from scaling.train.shape import GPTConfig, flops_by_measure  # noqa: E402
from scaling.train.spec import RunSpec  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
CONFIGS = {"demo": REPO / "configs" / "tiny.yaml", "study": REPO / "configs" / "study.yaml"}
STAGES = ("tests", "throughput", "compile", "stacked", "demo", "study", "validate")
# Seconds each stage may take (the study: what the total leaves after the validation's share).
LIMITS = {"gpu": {"tests": 45, "throughput": 90, "compile": 50, "stacked": 45, "demo": 75, "validate": 75},
          "cpu": {"tests": 60, "throughput": 40, "compile": 90, "stacked": 40, "demo": 60, "validate": 40}}
TOTAL = {"gpu": 520, "cpu": 420}   # gpu: inside the device's 600 s a call, with the install and a margin
RUNS_AT_ONCE = {"gpu": (1, 2, 4, 8, 16), "cpu": (1, 2)}
RUNS_STACKED = {"gpu": (1, 3, 8, 21), "cpu": (1, 3)}   # 3: a shape's runs in the study; 21: all its runs
TIMING = {"gpu": Timing(warmup=15, windows=3, steps=30), "cpu": Timing(warmup=2, windows=2, steps=3)}
STOP_GRACE_S = 25      # after SIGTERM, how long a command has to checkpoint and leave


def micro(cfg: SweepConfig) -> SweepConfig:
    """`cfg` shrunk for a CPU dry run: the test suite's micro corpus and context, three two-layer
    shapes (widths 16, 24, 32, the config's first three learning rates), budgets 1e9 and 2e9 FLOPs."""
    data = cfg.model_dump(mode="json")
    data["corpus"].update(max_documents=30, val_fraction=0.1)
    data["tokenizer"]["vocab_size"] = 320
    data["model"]["context_length"] = 32
    data["grid"]["models"] = [{**shape, "d_model": width, "n_layers": 2, "n_heads": 2}
                              for shape, width in zip(data["grid"]["models"], (16, 24, 32))]
    data["grid"]["isoflop"].update(budgets=[1e9, 2e9], per_budget=3, span=1000)  # all three at each
    data["train"].update(batch_tokens=256, eval_interval=10, eval_tokens=4096, log_interval=5,
                         checkpoint_interval=40, warmup_fraction=0.05, device="cpu")
    data["train"].pop("warmup_tokens_per_param", None)
    return parse_config(data, f"micro {cfg.name}")


class Call:
    """One call of the driver: where it writes, its clock, and every figure so far."""

    def __init__(self, out: Path, work: Path, dry_run: bool, total: float):
        self.out, self.work, self.dry_run = out, work, dry_run
        self.kind = "cpu" if dry_run else "gpu"
        self.deadline = time.monotonic() + total
        self.figures: dict = {"dry_run": dry_run, "total_limit_s": total, "stages": {}}
        self.runs_per_gpu = 4       # until the throughput stage measures the best k

    def config(self, name: str) -> SweepConfig:
        cfg = load_config(CONFIGS[name])
        return micro(cfg) if self.dry_run else cfg

    def command(self, args: list[str], limit: float) -> dict:
        """Run `python -m scaling ARGS` (or another command) until it ends or `limit` seconds pass;
        then SIGTERM (its runs checkpoint and stop), and SIGKILL to its process group if it stays."""
        begin = time.monotonic()
        print(f"$ {' '.join(args)}   (limit {limit:.0f} s)", flush=True)
        process = subprocess.Popen(args, cwd=REPO, start_new_session=True)
        timed_out = False
        try:
            rc = process.wait(timeout=max(1.0, limit))
        except subprocess.TimeoutExpired:
            timed_out = True
            process.send_signal(signal.SIGTERM)
            try:
                rc = process.wait(timeout=STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                rc = process.wait()
        return {"rc": rc, "wall_s": time.monotonic() - begin, "timed_out": timed_out}

    def scaling(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "scaling", *args]

    def save(self) -> None:
        """gpu.json, gpu.md and runs.tar.gz under OUT, as they stand now."""
        (self.out / "gpu.json").write_text(json.dumps(self.figures, indent=2, default=str) + "\n")
        (self.out / "gpu.md").write_text(write_report(self.figures))
        with tarfile.open(self.out / "runs.tar.gz", "w:gz") as tar:
            for folder in ("runs", "fits", "configs"):
                if (self.work / folder).exists():
                    tar.add(self.work / folder, arcname=folder,
                            filter=lambda info: None if info.name.endswith(".pt") else info)


def environment(call: Call) -> dict:
    """The machine: card, its peak, measured matmul rate, torch, cores."""
    cuda = torch.cuda.is_available() and not call.dry_run
    device = torch.device("cuda" if cuda else "cpu")
    name = torch.cuda.get_device_name() if cuda else platform.processor() or platform.machine()
    table = bf16_peak(name) if cuda else None
    return {"device": name, "device_type": device.type, "torch": torch.__version__,
            "cuda": torch.version.cuda, "python": platform.python_version(), "cores": usable_cores(),
            "peak_part": table[0] if table else None, "peak_flop_s": table[1] if table else None,
            "peak_source": "NVIDIA datasheet, dense bf16" if table else None,
            # 8192^3 on a GPU (about 1.4 ms on an H100: well past the launch), 2048^3 on CPU
            "matmul_flop_s": matmul_flops(device, size=8192 if cuda else 2048),
            "matmul_dtype": "bf16" if cuda else "fp32",
            "gpu_memory_bytes": torch.cuda.get_device_properties(0).total_memory if cuda else None}


def peak(call: Call) -> float:
    """The rate shares are taken of: the datasheet's bf16 peak, else (CPU, unknown card) the measured matmul."""
    env = call.figures["env"]
    return env["peak_flop_s"] or env["matmul_flop_s"]


def stage_tests(call: Call, limit: float) -> dict:
    return {"pytest": call.command([sys.executable, "-m", "pytest", "-q", "-m", "cuda", "-p", "no:cacheprovider",
                                    "tests/train/test_cuda.py"], limit)}


def shape_jobs(call: Call) -> tuple[list[ShapeJob], object]:
    cfg = call.config("study")
    jobs = [ShapeJob(GPTConfig.from_config(cfg.model, s, cfg.tokenizer.vocab_size), s.lr or cfg.train.lr)
            for s in cfg.grid.models]
    return jobs, cfg.train.model_copy(update={"device": "cpu" if call.dry_run else "cuda"})


def stage_throughput(call: Call, limit: float) -> dict:
    """Every study shape at each k runs at once; the best k (summed tokens/s over the shapes, each
    shape relative to one run) becomes the sweeps' runs_per_gpu."""
    jobs, train = shape_jobs(call)
    deadline = time.monotonic() + limit
    rows: list[dict] = []
    for k in RUNS_AT_ONCE[call.kind]:
        if k > usable_cores() or time.monotonic() > deadline:
            break
        # One torch thread a run, as the sweep's workers (executor.threads_per_run's default).
        rows += measure(jobs, train, Layout(k, 1), TIMING[call.kind], deadline)
        with_shares(rows, peak(call))
        call.figures["stages"]["throughput"] = {"rows": rows}
        call.save()
    speedup: dict[int, float] = {}
    single = {r["shape"]: r["tokens_per_s"] for r in rows if r["runs"] == 1}
    for r in rows:
        if r["shape"] in single:
            speedup[r["runs"]] = speedup.get(r["runs"], 0.0) + r["tokens_per_s"] / single[r["shape"]] / len(single)
    complete = [k for k in speedup if sum(r["runs"] == k for r in rows) == len(jobs)]
    if complete:
        call.runs_per_gpu = max(complete, key=lambda k: speedup[k])
    return {"rows": rows, "mean_speedup_by_runs": speedup, "best_runs_per_gpu": call.runs_per_gpu,
            "timed_out": time.monotonic() > deadline}


def with_shares(rows: list[dict], peak_flop_s: float) -> None:
    for row in rows:
        row["share_of_peak"] = row["flop_s"] / peak_flop_s


def stage_compile(call: Call, limit: float) -> dict:
    """The middle study shape, one run with train.compile; beside it the same shape's eager run from
    stage throughput (measured here when that stage did not run)."""
    jobs, train = shape_jobs(call)
    job = jobs[len(jobs) // 2]
    shape = f"d{job.model.d_model}/L{job.model.n_layers}"
    eager = [r for r in call.figures["stages"].get("throughput", {}).get("rows", []) if r["shape"] == shape
             and r["runs"] == 1]
    deadline = time.monotonic() + limit
    rows = measure([job], train, Layout(1, 1, compile=True), TIMING[call.kind], deadline)
    rows += eager or measure([job], train, Layout(1, 1), TIMING[call.kind], deadline)
    with_shares(rows, peak(call))
    return {"rows": rows, "timed_out": len(rows) < 2}


def stage_stacked(call: Call, limit: float) -> dict:
    """R runs of one shape stacked in this process (bench/gpu/stacked.py), for the smallest, middle
    and largest study shapes: summed tokens/s beside the packed processes of stage throughput."""
    jobs, train = shape_jobs(call)
    device = torch.device("cpu" if call.dry_run else "cuda")
    timing = TIMING[call.kind]
    tokens = np.random.default_rng(0).integers(0, jobs[0].model.vocab_size, size=1_000_000, dtype=np.uint16)
    deadline, rows = time.monotonic() + limit, []
    for job in (jobs[0], jobs[len(jobs) // 2], jobs[-1]):
        spec = RunSpec("stacked", job.model, train, job.lr, tokens=train.batch_tokens, seed=0)
        for runs in RUNS_STACKED[call.kind]:
            if time.monotonic() > deadline:
                return {"rows": rows, "timed_out": True}
            got = time_stacked(spec, runs, tokens, device, timing.warmup, timing.windows, timing.steps)
            per_token = flops_by_measure(job.model)["exact"]
            rows.append({"shape": f"d{job.model.d_model}/L{job.model.n_layers}", "runs": runs, "compile": False,
                         "stacked": True, "tokens_per_s": got["tokens_per_s"],
                         "tokens_per_s_per_run": got["tokens_per_s"] / runs, "flops_per_token": per_token,
                         "flop_s": got["tokens_per_s"] * per_token, "warmup_s": got["warmup_s"],
                         "vmap_fallbacks": got["vmap_fallbacks"],
                         "memory_bytes_per_run": None if got["memory_bytes"] is None else got["memory_bytes"] / runs})
            with_shares(rows, peak(call))
    return {"rows": rows}


def sweep_config(call: Call, name: str) -> tuple[SweepConfig, Path]:
    """The config `name` as this call sweeps it (micro on a dry run; runs_per_gpu the best k),
    written to the work folder for the command line."""
    cfg = call.config(name)
    cfg = cfg.model_copy(update={"executor": cfg.executor.model_copy(update={"runs_per_gpu": call.runs_per_gpu})})
    path = call.work / "configs" / f"{name}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(cfg.model_dump(mode="json"), sort_keys=False))
    return cfg, path


def sweep_and_fit(call: Call, name: str, limit: float) -> dict:
    """Sweep `name` (the token cache prepared and timed first), then fit it if every run finished."""
    deadline = time.monotonic() + limit
    cfg, path = sweep_config(call, name)
    begin = time.monotonic()
    prepare_tokens(cfg, call.work / "cache")
    figures: dict = {"tokenize_s": time.monotonic() - begin, "runs_per_gpu": call.runs_per_gpu,
                     "planned_runs": len(plan(cfg)), "planned_flops": sum(r.spec.trained_flops() for r in plan(cfg))}
    runs, sweep_dir = plan(cfg), call.work / "runs" / cfg.name
    before = trained(sweep_dir, runs)    # > 0 when a run store from an earlier call came along
    figures["sweep"] = call.command(call.scaling("sweep", str(path), "--runs-dir", str(call.work / "runs"),
                                                 "--cache-dir", str(call.work / "cache")),
                                    deadline - time.monotonic())
    figures.update(sweep_figures(sweep_dir, figures["sweep"]["wall_s"], peak(call)))
    figures.update(this_call(before, trained(sweep_dir, runs), figures["planned_flops"], figures["sweep"]["wall_s"],
                             peak(call)))
    call.figures["stages"][name] = figures
    call.save()
    if figures["finished_runs"] == figures["planned_runs"]:
        fit_dir = call.work / "fits" / cfg.name
        bootstrap = ["--bootstrap", "100"] if call.dry_run else []
        figures["fit"] = call.command(call.scaling("fit", str(call.work / "runs" / cfg.name), "--out", str(fit_dir),
                                                   *bootstrap), deadline - time.monotonic())
        figures.update(fit_figures(fit_dir / "fit.json"))
    return figures


def this_call(before: tuple[float, int], after: tuple[float, int], planned_flops: float, wall_s: float,
              peak_flop_s: float) -> dict:
    """The sweep's rates over what it trained in this call (runs in flight included, runs finished
    by an earlier call left out), and the wall time all it had left would take at that rate."""
    flops, tokens = after[0] - before[0], after[1] - before[1]
    return {"flops_trained_before": before[0], "flops_trained": flops, "flop_s": flops / wall_s,
            "tokens_per_s": tokens / wall_s, "share_of_peak": flops / wall_s / peak_flop_s,
            "projected_wall_s": (planned_flops - before[0]) / flops * wall_s if flops > 0 else None}


def sweep_figures(sweep_dir: Path, wall_s: float, peak_flop_s: float) -> dict:
    """What the run store says of a sweep: runs finished, its FLOPs and tokens per second of wall
    time, and each shape's own training rate (the median of its runs' tokens/s, from summary.json)."""
    summaries = [store.read_summary(d) for d in store.run_dirs(sweep_dir)] if sweep_dir.exists() else []
    done = [s for s in summaries if s and s["status"] == "finished"]
    flops, tokens = sum(s["flops_exact"] for s in done), sum(s["tokens"] for s in done)
    by_shape: dict[str, list[float]] = {}
    for s in done:
        by_shape.setdefault(f"d{s['d_model']}/L{s['n_layers']}", []).append(s["tokens_per_s"])
    statuses = Counter(s["status"] if s else "incomplete" for s in summaries)
    return {"finished_runs": len(done), "statuses": dict(statuses),
            "devices": sorted({s["device"] for s in done}), "flops_done": flops, "tokens_done": tokens,
            "flop_s": flops / wall_s, "tokens_per_s": tokens / wall_s, "share_of_peak": flops / wall_s / peak_flop_s,
            "run_seconds": sum(s["wall_s"] for s in done),
            "tokens_per_s_per_run_by_shape": {k: statistics.median(v) for k, v in by_shape.items()}}


def trained(sweep_dir: Path, runs: list) -> tuple[float, int]:
    """(exact FLOPs, tokens) the store's runs have trained, the runs in flight counted to their last
    logged step."""
    flops, tokens = 0.0, 0
    for run in runs:
        metrics = sweep_dir / run.spec.run_id / store.METRICS
        records = store.read_jsonl(metrics) if metrics.exists() else []
        seen = min(max((r.get("tokens") or 0 for r in records), default=0), run.spec.tokens)
        flops, tokens = flops + run.spec.trained_flops(seen), tokens + seen
    return flops, tokens


def fit_figures(path: Path) -> dict:
    if not path.exists():
        return {}
    fit = json.loads(path.read_text())
    ci = fit.get("ci") or {}
    a_ci = ci.get("a")
    return {"verdict": (fit.get("verdict") or {}).get("verdict"), "a": fit["allocation"]["a"], "a_interval": a_ci,
            "a_interval_width": a_ci[1] - a_ci[0] if a_ci and None not in a_ci else None,
            "tokens_per_param": fit.get("tokens_per_param_at_reference"),
            "tokens_per_param_interval": ci.get("tokens_per_param"), "residual_rms": fit.get("residual_rms"),
            "reference_compute": fit.get("reference_compute"),
            "verdict_reasons": (fit.get("verdict") or {}).get("reasons")}


def stage_demo(call: Call, limit: float) -> dict:
    return sweep_and_fit(call, "demo", limit)


def stage_study(call: Call, limit: float) -> dict:
    return sweep_and_fit(call, "study", limit)


def stage_validate(call: Call, limit: float) -> dict:
    """The study's law at 3x its largest budget (--force: a `not identified` law is validated too,
    and says so), as `make study` does."""
    cfg = call.config("study")
    fit_dir = call.work / "fits" / cfg.name
    if not (fit_dir / "fit.json").exists():
        return {"skipped": "the study has no fit (its sweep did not finish in this call)"}
    assert cfg.grid.isoflop is not None
    compute = 3 * max(cfg.grid.isoflop.budgets)
    figures: dict = {"compute": compute}
    figures["command"] = call.command(call.scaling("validate", str(fit_dir), "--compute", f"{compute:g}", "--force",
                                                   "--runs-dir", str(call.work / "runs"),
                                                   "--cache-dir", str(call.work / "cache")), limit)
    figures.update(sweep_figures(call.work / "runs" / f"{cfg.name}-validate", figures["command"]["wall_s"],
                                 peak(call)))
    path = fit_dir / "validate.json"
    if path.exists():
        got = json.loads(path.read_text())
        figures["runs"] = [{k: r.get(k) for k in ("position", "d_model", "n", "d", "predicted", "interval",
                                                  "observed", "inside", "context_use")} for r in got["runs"]]
        figures["optimum_holds"] = got.get("optimum_holds")
    return figures


def run_stage(call: Call, name: str, limit: float) -> None:
    """One stage under its limit; an error is recorded with its traceback and the call goes on."""
    print(f"\n=== {name} (limit {limit:.0f} s) ===", flush=True)
    begin = time.monotonic()
    try:
        figures = globals()[f"stage_{name}"](call, limit)
        commands = [v for v in figures.values() if isinstance(v, dict) and "rc" in v]
        timed_out = figures.get("timed_out") or any(c["timed_out"] for c in commands)
        status = ("skipped" if "skipped" in figures else "timed out" if timed_out
                  else "failed" if any(c["rc"] != 0 for c in commands) else "ok")
    except Exception:  # a stage's bug or a missing package: record it, go on with the next stage
        traceback.print_exc()
        figures, status = {"error": traceback.format_exc(limit=-3)}, "failed"
    figures.update(status=status, wall_s=time.monotonic() - begin, limit_s=limit)
    call.figures["stages"][name] = figures
    call.save()
    print(f"=== {name}: {status} in {figures['wall_s']:.1f} s ===", flush=True)


def stage_limit(call: Call, name: str, stages: list[str]) -> float:
    """Seconds for stage `name`: its own limit, within what is left of the call. The study takes
    what the later stages leave, or everything left when stage throughput's rates say it cannot
    finish in that (then the validation, which needs its fit, would have nothing to validate)."""
    left = call.deadline - time.monotonic()
    own = LIMITS[call.kind].get(name)
    if own is not None:
        return max(1.0, min(own, left))
    later = sum(LIMITS[call.kind].get(s, 0) for s in stages if STAGES.index(s) > STAGES.index(name))
    rows = [r for r in call.figures["stages"].get("throughput", {}).get("rows", []) if r["runs"] == call.runs_per_gpu]
    if rows:
        cfg = call.config("study")
        estimate = sum(r.spec.trained_flops() for r in plan(cfg)) / statistics.mean(r["flop_s"] for r in rows)
        call.figures["study_estimate_s"] = estimate   # at the packed rate, averaged over the shapes
        if estimate > left - later:
            return max(1.0, left)
    return max(1.0, left - later)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dry-run", action="store_true", help="on CPU, micro configs, short limits")
    p.add_argument("--out", type=Path, default=Path(os.environ.get("OUT") or "/tmp/scaling-gpu-out"))
    p.add_argument("--work", type=Path, default=Path("/tmp/scaling-gpu-work"), help="run stores, fits, token cache")
    p.add_argument("--only", help=f"comma-separated stages (default: all of {', '.join(STAGES)})")
    p.add_argument("--total", type=float, help="seconds for the whole call (default 520; dry run 420)")
    args = p.parse_args(argv)
    stages = args.only.split(",") if args.only else list(STAGES)
    if unknown := set(stages) - set(STAGES):
        p.error(f"unknown stage(s) {', '.join(sorted(unknown))}; the stages: {', '.join(STAGES)}")
    kind = "cpu" if args.dry_run else "gpu"
    if kind == "gpu" and not torch.cuda.is_available():
        print("no CUDA device: this script measures a GPU (on CPU, --dry-run)", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    args.work.mkdir(parents=True, exist_ok=True)
    call = Call(args.out, args.work, args.dry_run, args.total or TOTAL[kind])
    begin = time.monotonic()
    call.figures["env"] = environment(call)
    if torch.cuda.is_available():
        torch.cuda.empty_cache()   # the matmul's 384 MB: the workers get the card
    print(json.dumps(call.figures["env"], indent=1), flush=True)
    for name in [s for s in STAGES if s in stages]:
        run_stage(call, name, stage_limit(call, name, stages))
    call.figures["wall_s"] = time.monotonic() - begin
    call.save()
    failed = [n for n, s in call.figures["stages"].items() if s["status"] not in ("ok", "skipped")]
    print(f"\nall stages in {call.figures['wall_s']:.1f} s; not ok: {', '.join(failed) or 'none'}; "
          f"figures in {args.out}/gpu.md and gpu.json")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
