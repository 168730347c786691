"""`scaling sweep CONFIG` and `scaling runs RUNS_DIR`."""

from __future__ import annotations

import argparse
import importlib.util
import json
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

from rich.console import Console
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeRemainingColumn

from scaling.config import SweepConfig, load_config
from scaling.errors import UsageError
from scaling.formats import json_safe
from scaling.runs import store
from scaling.sweeps.estimates import DryRun, dry_run

if TYPE_CHECKING:
    import pandas as pd

    from scaling.sweeps.driver import SweepResult
    from scaling.sweeps.job import Job
    from scaling.sweeps.plan import PlannedRun
    from scaling.sweeps.state import SweepState

# scaling.sweep and scaling.train import torch (seconds to load): only the commands that need them import them.

console = Console(highlight=False, soft_wrap=True)


def register(subparsers: argparse._SubParsersAction) -> None:
    sweep = subparsers.add_parser(
        "sweep", help="train the runs of a sweep config (skips finished runs)",
        description="Train the runs of a sweep config into the run store RUNS_DIR/<name> (docs/sweeps.md, "
                    "docs/config.md): finished runs are skipped and an interrupted one resumes from its "
                    "checkpoint, so the same command continues a sweep.",
        epilog="examples:\n"
               "  scaling sweep configs/tiny.yaml --dry-run   # the runs, which are done, the wall time left\n"
               "  scaling sweep configs/tiny.yaml             # train them: runs/tiny, then `scaling fit runs/tiny`")
    sweep.add_argument("config", type=Path, metavar="CONFIG", help="sweep YAML, e.g. configs/tiny.yaml")
    sweep.add_argument("--runs-dir", type=Path, default=Path("runs"), help="run store root (default: runs)")
    sweep.add_argument("--cache-dir", type=Path, default=None,
                       help="token cache root (default: $SCALING_CACHE_DIR or ~/.cache/scaling)")
    sweep.add_argument("--dry-run", action="store_true",
                       help="print the plan: each run done, to resume or to train, and the "
                            "wall time left; train and write nothing")
    sweep.add_argument("--json", action="store_true", help="with --dry-run: print the plan as JSON")
    sweep.set_defaults(func=cmd_sweep)

    runs = subparsers.add_parser(
        "runs", help="print the table of runs in a run store",
        description="One line per run of a run store: its status, shape, N (non-embedding and total), D, "
                    "compute, final validation loss, bits per byte and wall time.",
        epilog="examples:\n"
               "  scaling runs runs/tiny          # each run: status, shape, N, D, C, final loss, wall time\n"
               "  scaling runs runs/tiny --json   # the same table, one object per run")
    runs.add_argument("sweep_dir", type=Path, metavar="RUNS_DIR", help="a sweep's run store, e.g. runs/tiny")
    runs.add_argument("--json", action="store_true", help="print the run table as JSON (one object per run)")
    runs.set_defaults(func=cmd_runs)


def _si(x: float) -> str:
    for unit, size in (("G", 1e9), ("M", 1e6), ("K", 1e3)):
        if abs(x) >= size:
            return f"{x / size:.3g}{unit}"
    return f"{x:.3g}"


def _duration(seconds: float) -> str:
    if 0 < seconds < 0.5:
        return "< 1 s"       # some work, however little: not the "0 s" of nothing to train
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


def show_plan(cfg: SweepConfig, args: argparse.Namespace) -> None:
    """The dry run of `cfg` (sweep, tune): as a table, or with --json as DryRun.to_json()."""
    dry = dry_run(cfg, args.runs_dir, args.cache_dir)
    if args.json:
        print(json.dumps(json_safe(dry.to_json()), indent=2))
    else:
        print_plan(dry, cfg)


def print_plan(dry: DryRun, cfg: SweepConfig) -> None:
    from scaling.sweeps.plan import family_flops
    from scaling.train.compute import expected_optimum
    from scaling.train.counts import MEASURE_CONVENTION

    planned, unique, wall_of, basis = dry.planned, dry.unique_tokens, dry.walls, dry.basis
    wsd = cfg.train.schedule == "wsd"
    kinds = ""
    if wsd:
        stable = sum(r.kind == "stable" for r in planned)
        kinds = (f": {stable} WSD stable runs (warmup, constant lr to the last branch point; not fit "
                 f"points) and {len(planned) - stable} cooldown branches")
    console.print(f"sweep {cfg.name}: {len(planned)} runs{kinds}; wall times from {basis}")
    width = max(28, *(len(r.run_id) for r in planned))
    trains = f" {'trains':>8}" if wsd else ""  # the tokens a run trains itself: a branch, its cooldown
    iso = cfg.grid.isoflop
    convention = "total" if iso is None else MEASURE_CONVENTION[iso.measure]
    if iso is not None:
        _, family = family_flops(cfg, cfg.grid.models, iso.measure)
        console.print(f"budgets in {iso.measure} FLOPs: {family.describe()}; N and D/N in {convention} parameters")
    console.print(f"{'run':<{width}} {'d':>4} {'L':>3} {'H':>3} {'N total':>9} {'N non-emb':>10} {'D':>8}{trains} "
                  f"{'D/N':>7} {'epochs':>7} {'C exact':>10} {'C=6ND':>10} {'status':>12} {'wall left':>10}")
    for run in planned:
        budget = run.spec.budget           # set on every run of an IsoFLOP design
        if iso is not None and budget is not None and run is next(r for r in planned if r.spec.budget == budget):
            n_opt = expected_optimum(family, budget, iso.tokens_per_param)
            console.print(f"budget C = {budget:.3g} FLOPs ({iso.measure}): expected optimum N = {_si(n_opt)} "
                          f"(D/N = {iso.tokens_per_param:g}, the prior)")
        m = run.spec.model
        n = run.n_params_total if convention == "total" else run.n_params_non_embedding
        trains = f" {_si(run.trained_tokens):>8}" if wsd else ""
        console.print(f"{run.run_id:<{width}} {m.d_model:>4} {m.n_layers:>3} {m.n_heads:>3} "
                      f"{_si(run.n_params_total):>9} {_si(run.n_params_non_embedding):>10} "
                      f"{_si(run.spec.tokens):>8}{trains} {run.spec.tokens / n:>7.3g} "
                      f"{'?' if unique is None else format(run.spec.tokens / unique, '.3g'):>7} "
                      f"{run.flops_exact:>10.3g} {run.flops_6nd:>10.3g} {dry.state.status(run.run_id):>12} "
                      f"{'-' if run.run_id in dry.state.ended else _duration(wall_of[run.run_id]):>10}")
    print_repeats(planned, unique)
    print_totals(dry, cfg)


def print_totals(dry: DryRun, cfg: SweepConfig) -> None:
    """The plan's FLOPs (and WSD's saving), then the work left: the runs ended in the store are
    reused, so only the others count in the FLOPs and wall time left."""
    cost = dry.cost
    wsd = cfg.train.schedule == "wsd"
    if wsd:
        console.print(f"WSD, cooldown {cfg.train.cooldown_fraction:g} of each budget "
                      f"({cfg.train.cooldown_shape}): {cost['train_flops_6nd']:.2e} FLOP against "
                      f"{cost['separate_flops_6nd']:.2e} for separate cosine runs of the same grid "
                      f"({100 * cost['fraction_of_separate']:.1f}%): saves {cost['saved_flops_6nd']:.2e} FLOP "
                      f"({100 * (1 - cost['fraction_of_separate']):.1f}%)")
    total_6nd, total_exact = cost["train_flops_6nd"], cost["train_flops_exact"]
    console.print(f"total  {len(dry.planned)} runs  {total_exact:.2e} FLOPs counted exactly ({total_6nd:.2e} "
                  f"as 6 N_non-emb D)")
    console.print(f"left   {work_left(dry.state, len(dry.planned))}"
                  + (f": {dry.flops_left:.2e} FLOPs, est. wall {_duration(dry.total_wall)} with {dry.workers} "
                     f"run{'s' * (dry.workers > 1)} at a time on {dry.threads} thread{'s' * (dry.threads > 1)} each"
                     if dry.state.todo else ": est. wall 0 s, nothing to train"))


def work_left(state: SweepState, runs: int) -> str:
    """'3 of 20 runs to train (1 resumes from a checkpoint); 17 ended in the store, reused (16
    finished, 1 diverged)': the same words for `scaling sweep` and `scaling validate` dry runs."""
    statuses = [str(summary["status"]) for summary in state.ended.values()]
    reused = ", ".join(f"{statuses.count(s)} {s}" for s in store.ENDED if s in statuses)
    resuming = len(state.resumes)
    resumed = f" ({resuming} resume{'s' * (resuming == 1)} from a checkpoint)" if resuming else ""
    if state.unusable:        # the sweep moves such a checkpoint aside: said here, not "resumes"
        run_id, why = next(iter(state.unusable.items()))
        resumed += (f" ({len(state.unusable)} with a checkpoint that cannot be read, trained again from step 0: "
                    f"{run_id}: {why})")
    ended = f"{len(state.ended)} ended in the store, reused ({reused})" if reused else "none in the store yet"
    return f"{len(state.todo)} of {runs} runs to train{resumed}; {ended}"


def progress_bars() -> Progress:
    """The bars RichReporter draws on: one for the sweep, one per run in training."""
    return Progress(TextColumn("{task.description:<28}"), BarColumn(), TextColumn("{task.percentage:>5.1f}%"),
                    TextColumn("{task.fields[info]}"), TimeRemainingColumn(), console=console)


def print_repeats(planned: list[PlannedRun], unique: int | None) -> None:
    """Whether the runs will see their training tokens more than once, and how often."""
    if unique is None:
        console.print("epochs: not known until the corpus is tokenized (the sweep builds the token cache first)")
        return
    repeating = [run for run in planned if run.spec.tokens > unique]
    if not repeating:
        console.print(f"every run stays within one epoch of the {_si(unique)} training tokens")
        return
    top = max(run.spec.tokens for run in repeating) / unique
    console.print(f"[yellow]{len(repeating)} of {len(planned)} runs repeat data[/]: up to {top:.2f} epochs of the "
                  f"{_si(unique)} training tokens. Summaries record epochs and unique tokens; `scaling fit` then "
                  "fits the data-constrained law too (repeated tokens are worth less than fresh ones)")


class RichReporter:
    """A bar for the sweep, in FLOPs so that big runs weigh in the ETA as they should, and a bar
    in tokens for each run in training (several at once when the executor packs runs)."""

    def __init__(self, progress: Progress) -> None:
        self.bars = progress
        self.sweep_bar: TaskID   # added by begin(), which the executor calls first
        self.run_bars: dict[str, TaskID] = {}     # run id -> bar of a run in training
        self.flops_running: dict[str, float] = {}  # run id -> FLOPs it has done so far
        self.flops_done = 0.0    # FLOPs of the runs completed in this call

    def begin(self, jobs: list[Job]) -> None:
        total = sum(job.spec.trained_flops() for job in jobs)
        self.sweep_bar = self.bars.add_task(f"{len(jobs)} runs to train", total=total, info="")

    def started(self, job: Job) -> None:
        run_id = job.spec.run_id
        if run_id not in self.run_bars:
            self.run_bars[run_id] = self.bars.add_task(run_id, total=job.spec.tokens, info="")

    def progress(self, job: Job, tokens_done: int, tokens_total: int, tokens_per_s: float) -> None:
        self.started(job)
        self.bars.update(self.run_bars[job.spec.run_id], completed=tokens_done,
                         info=f"{_si(tokens_done)}/{_si(tokens_total)} tok  {_si(tokens_per_s)} tok/s")
        self.flops_running[job.spec.run_id] = job.spec.trained_flops(tokens_done)
        self.bars.update(self.sweep_bar, completed=self.flops_done + sum(self.flops_running.values()))

    def finished(self, job: Job, summary: dict) -> None:
        bar = self.run_bars.pop(job.spec.run_id, None)
        if bar is not None:
            self.bars.remove_task(bar)
        self.flops_running.pop(job.spec.run_id, None)
        self.flops_done += job.spec.trained_flops()
        self.bars.update(self.sweep_bar, completed=self.flops_done + sum(self.flops_running.values()))
        loss = summary.get("final_val_loss")
        self.bars.console.print(f"{job.spec.run_id}: {summary['status']}"
                                + (f", val loss {loss:.4f}" if loss is not None else "")
                                + f", {summary.get('wall_s', 0):.0f} s")


@contextmanager
def stop_on_signals() -> Iterator[list[int]]:
    """SIGINT and SIGTERM ask the run in progress to stop after a checkpoint; a second one stops
    at once. Yields the list the signals received are appended to."""
    from scaling.train.loop import STOP, request_stop

    received: list[int] = []

    def handler(signum: int, frame: FrameType | None) -> None:
        if received:
            raise KeyboardInterrupt
        received.append(signum)
        request_stop()

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield received
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
        STOP.clear()


@dataclass
class Stopped:
    """Whether a stop request ended the training (`code`: the command's exit code, else None)."""

    code: int | None = None


@contextmanager
def resumable(command: str) -> Iterator[Stopped]:
    """Training under `stop_on_signals` that a stop request may end: the stop said in one line (its
    finished runs are kept, and the same `scaling COMMAND` resumes) and its exit code, 128 + the
    signal (130 without one), left in the yielded `Stopped`."""
    from scaling.train.loop import Interrupted

    stopped = Stopped()
    with stop_on_signals() as received:
        try:
            yield stopped
        except Interrupted:
            console.print(f"stopped; finished runs are kept: the same `scaling {command}` command resumes")
            stopped.code = 128 + received[0] if received else 130


def resume_command(args: argparse.Namespace) -> str:
    command = f"scaling sweep {args.config}"
    if args.runs_dir != Path("runs"):
        command += f" --runs-dir {args.runs_dir}"
    if args.cache_dir is not None:
        command += f" --cache-dir {args.cache_dir}"
    return command


# What a fitting-only install (`pip install -e .`, no torch) adds to train: the [train] extra.
TRAIN_INSTALL = "pip install -e '.[train]' (or `make install`)"


def require_torch(command: str) -> None:
    """UsageError in one line where torch is not installed: `command` trains models (fitting,
    planning and reports need no torch, so a plain install leaves it out; pyproject's [train])."""
    try:
        found = importlib.util.find_spec("torch") is not None
    except ImportError:                 # a finder that refuses it: as good as not installed
        found = False
    if not found:
        raise UsageError(f"`scaling {command}` trains models and needs torch, which is not installed: {TRAIN_INSTALL}")


def cmd_sweep(args: argparse.Namespace) -> int:
    cfg = load_config(args.config)
    if args.json and not args.dry_run:
        raise UsageError("--json goes with --dry-run (a sweep's result is its run store: `scaling runs --json`)")
    if args.dry_run:
        show_plan(cfg, args)
        return 0
    require_torch("sweep")
    from scaling.sweeps.driver import run_sweep  # training loads torch: not for a dry run
    from scaling.train.loop import Interrupted

    with stop_on_signals() as received:
        try:
            with progress_bars() as bars:
                result = run_sweep(cfg, args.runs_dir, args.cache_dir, reporter=RichReporter(bars))
        except Interrupted as stop:
            where = (f"; run {stop.run_id} stopped at step {stop.step} of {stop.steps}, with a checkpoint there"
                     if stop.run_id else "")
            name = signal.Signals(received[0]).name if received else "a stop request"
            console.print(f"stopped by {name}{where}; finished runs are kept. "
                          f"Resume with: {resume_command(args)}")
            return 128 + received[0] if received else 130
        except OSError as exc:  # a full disk, a folder that cannot be written: not a bug of ours
            where = f": {exc.filename}" if exc.filename else ""
            raise UsageError(f"{exc.strerror or exc}{where}; finished runs are kept. Fix this, "
                             f"then resume with: {resume_command(args)}") from exc
    _print_outcome(result)
    return 1 if any(s["status"] == "failed" for s in result.trained) else 0


def _print_outcome(result: SweepResult) -> None:
    t = result.table
    finished = int((t.status == "finished").sum())
    stable = int((t.status == "stable").sum())
    of = f"{len(t) - stable} (and {stable} WSD stable runs)" if stable else f"{len(t)}"
    console.print(f"{result.sweep_dir}: trained {len(result.trained)}, already done {len(result.skipped)}, "
                  f"finished {finished}/{of}; table: {result.sweep_dir / store.TABLE}")
    for status in ("diverged", "failed", "incomplete"):
        for _, row in t[t.status == status].iterrows():
            console.print(f"[yellow]{status}:[/] {row.run_id}: {row.reason}")
    for _, row in t[t.retry_of.notna()].iterrows():
        console.print(f"retry: {row.run_id} retries {row.retry_of} at lr {row.lr:.3g}: {row.status}")


def cmd_runs(args: argparse.Namespace) -> int:
    table = store.read_store(args.sweep_dir)
    if args.json:
        # runs.csv's own columns, NaN as null: the table `scaling fit` reads
        print(json.dumps(json_safe(table.to_dict(orient="records")), indent=2))
        return 0
    width = max(28, *(len(str(r)) for r in table.run_id))  # WSD stable run ids are longer
    console.print(f"{'run':<{width}} {'status':<9} {'d':>4} {'L':>3} {'H':>3} {'N non-emb':>10} {'N total':>9} "
                  f"{'D':>8} {'C (FLOPs)':>10} {'val loss':>9} {'bpb':>6} {'wall':>8}")
    for _, r in table.iterrows():
        done = r.status == "finished"
        timed = done or r.status == "stable"  # a stable run is no fit point: no loss shown, its time is
        console.print(
            f"{r.run_id:<{width}} {r.status:<9} {_int(r.d_model):>4} {_int(r.n_layers):>3} {_int(r.n_heads):>3} "
            f"{_si_or(r.n_params_non_embedding):>10} {_si_or(r.n_params_total):>9} {_si_or(r.tokens):>8} "
            f"{_num(_compute(r), '.3g'):>10} {_num(r.final_val_loss, '.4f') if done else '-':>9} "
            f"{_num(r.final_val_bpb, '.3f') if done else '-':>6} {_num(r.wall_s, '.0f') + ' s' if timed else '-':>8}")
    console.print("C: the exact FLOPs a run spent (what `scaling fit` counts); an imported run's: 6 N D of its own N")
    return 0


def _compute(run: pd.Series) -> float | None:
    """The run's compute as the fit counts it: exact FLOPs, else (an imported run) 6 N D."""
    for column in ("flops_exact", "flops_6n_total", "flops_6nd"):
        value = run.get(column)
        if value is not None and value == value:
            return value
    return None


def _int(x: float | None) -> str:
    return "-" if x is None or x != x else str(int(x))


def _si_or(x: float | None) -> str:
    return "-" if x is None or x != x else _si(float(x))


def _num(x: float | None, fmt: str) -> str:
    return "-" if x is None or x != x else format(float(x), fmt)
