"""How far a sweep has got in its run store: the runs that ended (a sweep never trains them
again), those that resume from their checkpoint, and those that train from their start.

`pending` is what the sweep driver trains, and `sweep_state` what a dry run shows: one answer
from the same reading of the store, so that the plan printed and the work done cannot disagree.
Torch-free: a dry run reads summaries and metrics, and of a checkpoint only whether it is a torch
archive (`unusable_checkpoint`), never its tensors.
"""

from __future__ import annotations

import zipfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from scaling.config import SweepConfig
from scaling.errors import UsageError
from scaling.reading import open_regular
from scaling.runs import store
from scaling.sweeps.plan import PlannedRun, retry


def attempts(cfg: SweepConfig, planned: list[PlannedRun], sweep_dir: Path) -> Iterator[tuple[PlannedRun, dict | None]]:
    """Each planned run, then its retries while the one before diverged, with its summary (None:
    not ended, or never started)."""
    for first in planned:
        run: PlannedRun | None = first          # then its retries
        while run is not None:
            summary = store.read_summary(sweep_dir / run.run_id)
            yield run, summary
            if summary is None or summary["status"] not in store.ENDED:
                break
            run = retry(cfg, run, summary)


def split(seen: Iterable[tuple[PlannedRun, dict | None]]) -> tuple[list[PlannedRun], dict]:
    """The runs still to train, and the summaries of those that ended, by run id."""
    todo, ended = [], {}
    for run, summary in seen:
        if summary is not None and summary["status"] in store.ENDED:
            ended[run.run_id] = summary
        else:
            todo.append(run)
    return todo, ended


def pending(cfg: SweepConfig, planned: list[PlannedRun], sweep_dir: Path) -> tuple[list[PlannedRun], dict]:
    """Runs still to train (retries of diverged runs included), and the summaries of those that
    ended, by run id."""
    return split(attempts(cfg, planned, sweep_dir))


def checkpoint_step(run: PlannedRun, run_dir: Path) -> int:
    """The step a run with a checkpoint resumes from, at least: its last logged step rounded down
    to the checkpoint interval (the loop saves at each multiple before the last step, a stop at a
    later one), never before a branch's branch point. Read from metrics.jsonl: reading the
    checkpoint itself would load torch."""
    logged = max((r["step"] for r in store.read_jsonl(run_dir / store.METRICS)), default=0)
    interval = run.spec.train.checkpoint_interval
    saved = min(logged, run.spec.steps - 1) // interval * interval
    return max(saved, run.spec.branch_step or 0)


def unusable_checkpoint(path: Path) -> str | None:
    """Why the checkpoint at `path` cannot be resumed from, as far as can be told without torch, or
    None: torch.save writes a zip archive holding a data.pkl, so junk, a FIFO or a folder is found
    here (the sweep's `checkpoint.read_checkpoint` moves such a file aside and trains from step 0;
    a dry run said it "resumes"). One that is an archive but wrong inside is found only by the sweep."""
    try:
        with open_regular(path, "checkpoint") as f, zipfile.ZipFile(f) as archive:
            if not any(name.endswith("data.pkl") for name in archive.namelist()):
                return "a zip archive, not a torch checkpoint"
    except UsageError as exc:
        return str(exc).rpartition(": ")[2]       # "it is a FIFO, not a regular file"
    except (OSError, zipfile.BadZipFile) as exc:
        return f"not a torch checkpoint ({exc})"
    return None


@dataclass(frozen=True)
class SweepState:
    """The plan's runs and the retries of its diverged runs so far (`runs`), those of them a sweep
    would train (`todo`), the summaries of those that ended (`ended`, reused as they are), and for
    each run of `todo` with a checkpoint, the step it resumes from (`resumes`), or why it cannot
    (`unusable`: the run trains from step 0)."""

    runs: list[PlannedRun]
    todo: list[PlannedRun]
    ended: dict[str, dict]
    resumes: dict[str, int]
    unusable: dict[str, str]

    def counts(self) -> dict[str, int]:
        """The runs reused, to train and resuming, as a dry run's JSON gives them."""
        return {"runs_reused": len(self.ended), "runs_to_train": len(self.todo), "runs_resumed": len(self.resumes)}

    def status(self, run_id: str) -> str:
        """A run's status in a dry run: its summary's when it ended, else what the sweep would do."""
        if run_id in self.ended:
            return str(self.ended[run_id]["status"])
        return "would resume" if run_id in self.resumes else "would train"

    def share_left(self, run: PlannedRun) -> float:
        """The share of the run's own training still to do: 1 from its start, less from a checkpoint."""
        if run.run_id in self.ended:
            return 0.0
        start = run.spec.branch_step or 0
        done = self.resumes.get(run.run_id, start)
        return (run.spec.steps - done) / max(run.spec.steps - start, 1)


def sweep_state(cfg: SweepConfig, planned: list[PlannedRun], sweep_dir: Path) -> SweepState:
    """How far the sweep of `planned` has got in `sweep_dir` (see SweepState)."""
    seen = list(attempts(cfg, planned, sweep_dir))
    todo, ended = split(seen)
    found = [run for run in todo if (sweep_dir / run.run_id / store.CHECKPOINT).exists()]
    unusable = {run.run_id: why for run in found
                if (why := unusable_checkpoint(sweep_dir / run.run_id / store.CHECKPOINT)) is not None}
    resumes = {run.run_id: checkpoint_step(run, sweep_dir / run.run_id) for run in found if run.run_id not in unusable}
    return SweepState([run for run, _ in seen], todo, ended, resumes, unusable)
