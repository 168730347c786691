"""What a validation found: the law's predictions for three runs at one compute, and what they did.

Two questions, answered separately:

* the loss: does the run at the predicted optimum land inside the law's 95% prediction interval
  (the bootstrap's laws at that N and D, times the runs' scatter)?
* the optimum: is that run's loss lower than both neighbours' at the same compute (about N/2.5
  and 2.5 N)? If not, by how much the better neighbour beats it.

And one warning: a run that uses its context (scaling.train.batches.context_use) by more than
THRESHOLDS["context_use"] (0.04 nats) beyond every fitted run has left the regime the law was
fitted in, and its loss is not the law's to predict. On the demo's corpus this was the whole
miss: the two validation runs that fell 6% below their prediction intervals used their context
(+0.083, +0.089 nats), every sweep run and the one validation run inside its interval did not
(-0.068 to -0.015).

The types, the judgement and the lines the command prints are pure; validate.json, their JSON,
is written and read here too (as fit.json is beside `LawFit`), so that a report can read it
without loading the training stack.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from scaling.errors import UsageError
from scaling.formats import json_safe
from scaling.laws.checks.verdict import THRESHOLDS
from scaling.reading import excerpt, finite_number, read_json
from scaling.runs.store import write_atomic
from scaling.schemas import LARGEST

POSITIONS = ("smaller", "optimum", "larger")
FILENAME = "validate.json"


@dataclass(frozen=True)
class ValidationRun:
    """One run of the validation: its shape, N (as the fit counts it) and D, the law's prediction
    and what the run measured (observed: its final validation loss; None unless it finished)."""

    position: str                       # "smaller" (about N/2.5), "optimum" or "larger" (about 2.5 N)
    run_id: str
    d_model: int
    n_layers: int
    n_heads: int
    lr: float
    n: float
    d: float
    predicted: float
    interval: tuple | None              # the prediction interval; None without bootstrap samples
    status: str = "planned"             # planned, finished, diverged, failed or incomplete
    observed: float | None = None
    context_use: float | None = None    # its final context use (nats), when finished and recorded

    @property
    def shape(self) -> str:
        return f"d{self.d_model}/L{self.n_layers}/H{self.n_heads}"

    @property
    def inside(self) -> bool | None:
        """Whether the observed loss lies inside the prediction interval (None: nothing to say)."""
        if self.observed is None or self.interval is None:
            return None
        return self.interval[0] <= self.observed <= self.interval[1]


@dataclass(frozen=True)
class Validation:
    compute: float
    largest_fit_compute: float | None   # the largest C among the fitted runs
    n_opt: float                        # the law's compute-optimal N and D at `compute`
    d_opt: float
    level: float                        # of the prediction intervals
    runs: tuple                         # ValidationRun, in POSITIONS order
    fit_verdict: str | None             # the fit's verdict when it was validated
    forced: bool                        # validated with --force despite a `not identified` verdict
    store: str                          # the run store folder the runs are in
    fit: str                            # the fit.json validated
    law: dict                           # its constants (E, A, B, alpha, beta): a refit is another law
    fit_context_use: tuple | None = None  # (lowest, highest) final context use of the fitted runs

    def run(self, position: str) -> ValidationRun:
        return next(r for r in self.runs if r.position == position)

    @property
    def new_regime(self) -> tuple:
        """The runs whose context use exceeds every fitted run's by more than THRESHOLDS["context_use"]."""
        if self.fit_context_use is None:
            return ()
        top = self.fit_context_use[1] + THRESHOLDS["context_use"]
        return tuple(r for r in self.runs if r.context_use is not None and r.context_use > top)

    @property
    def kind(self) -> str:
        """'interpolation' inside the fitted runs' compute, 'extrapolation' beyond them."""
        top = self.largest_fit_compute
        return "interpolation" if top is not None and self.compute <= top else "extrapolation"

    @property
    def margins(self) -> dict | None:
        """Each neighbour's observed loss minus the optimum run's (positive: the optimum is lower);
        None until all three have finished."""
        losses = {r.position: r.observed for r in self.runs}
        if any(v is None for v in losses.values()):
            return None
        return {p: losses[p] - losses["optimum"] for p in ("smaller", "larger")}

    @property
    def optimum_holds(self) -> bool | None:
        margins = self.margins
        return None if margins is None else min(margins.values()) > 0

    def to_json(self) -> dict:
        out = asdict(self)
        out["runs"] = [{**asdict(r), "inside": r.inside} for r in self.runs]
        out.update(kind=self.kind, margins=self.margins, optimum_holds=self.optimum_holds,
                   new_regime=[r.position for r in self.new_regime])
        return out

    @classmethod
    def from_json(cls, obj: dict) -> Validation:
        """From validate.json's dict; ValueError naming the first entry of the wrong type or range."""
        _check_schema(obj)
        runs = tuple(ValidationRun(**{**{k: v for k, v in r.items() if k != "inside"},
                                      "interval": None if r["interval"] is None else tuple(r["interval"])})
                     for r in obj["runs"])
        for r in runs:
            if r.position not in POSITIONS:
                raise ValueError(f"unknown position {r.position!r}")
        fields = {k: obj[k] for k in cls.__dataclass_fields__ if k not in ("runs", "fit_context_use")}
        fitted = obj.get("fit_context_use")
        return cls(runs=runs, fit_context_use=None if fitted is None else tuple(fitted), **fields)


# validate.json's schema: each entry's test, and what it must be (for the message).
def _num(v: Any) -> bool:
    """A finite number a float holds, within LARGEST (beyond it, sums and products overflow)."""
    return finite_number(v) and abs(v) <= LARGEST


# A validation run's loss (nats per token): no language model's comes near; 1e308 is a hand edit.
MAX_LOSS = 1e4


def _loss_value(v: Any) -> bool:
    return _num(v) and 0 <= v <= MAX_LOSS


def _losses(v: Any) -> bool:
    return _pair(v) and all(_loss_value(x) for x in v)


def _pos(v: Any) -> bool:
    return _num(v) and v > 0


def _whole(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v > 0


def _pair(v: Any) -> bool:
    return isinstance(v, list) and len(v) == 2 and all(_num(x) for x in v) and v[0] <= v[1]


_FIELDS = {"compute": (_pos, "a positive number"),
           "largest_fit_compute": (lambda v: v is None or _pos(v), "a positive number or null"),
           "n_opt": (_pos, "a positive number"), "d_opt": (_pos, "a positive number"),
           "level": (lambda v: _num(v) and 0 < v < 1, "a number in (0, 1)"),
           "runs": (lambda v: isinstance(v, list) and len(v) == len(POSITIONS) and all(isinstance(r, dict) for r in v),
                    f"a list of {len(POSITIONS)} runs"),
           "fit_verdict": (lambda v: v is None or isinstance(v, str), "text or null"),
           "forced": (lambda v: isinstance(v, bool), "true or false"),
           "store": (lambda v: isinstance(v, str), "text"), "fit": (lambda v: isinstance(v, str), "text"),
           "law": (lambda v: isinstance(v, dict) and all(_num(v.get(k)) for k in ("E", "A", "B", "alpha", "beta")),
                   "the constants E, A, B, alpha and beta"),
           "fit_context_use": (lambda v: v is None or _pair(v), "[lowest, highest] or null")}
_RUN_FIELDS = {"position": (lambda v: v in POSITIONS, f"one of {', '.join(POSITIONS)}"),
               "run_id": (lambda v: isinstance(v, str), "text"),
               "d_model": (_whole, "a whole number > 0"), "n_layers": (_whole, "a whole number > 0"),
               "n_heads": (_whole, "a whole number > 0"), "lr": (_pos, "a positive number"),
               "n": (_pos, "a positive number"), "d": (_pos, "a positive number"),
               "predicted": (_loss_value, f"a loss from 0 to {MAX_LOSS:g} nats"),
               "interval": (lambda v: v is None or _losses(v), "[lo, hi] with lo <= hi (losses), or null"),
               "status": (lambda v: isinstance(v, str), "text"),
               "observed": (lambda v: v is None or _loss_value(v), f"a loss from 0 to {MAX_LOSS:g} nats or null"),
               "context_use": (lambda v: v is None or _num(v), "a finite number or null")}
# Entries a validate.json from before they were recorded lacks (their defaults stand).
_OPTIONAL = ("status", "observed", "context_use", "fit_context_use")


def _check_schema(obj: object) -> None:
    if not isinstance(obj, dict):
        raise ValueError(f"expected an object, got {type(obj).__name__}")
    for key, (ok, what) in _FIELDS.items():
        if key in _OPTIONAL and key not in obj:
            continue
        if not ok(obj.get(key)):
            raise ValueError(f"'{key}' must be {what}, got {excerpt(obj.get(key))}")
    for i, run in enumerate(obj["runs"]):
        for key, (ok, what) in _RUN_FIELDS.items():
            if key in _OPTIONAL and key not in run:
                continue
            if not ok(run.get(key)):
                raise ValueError(f"'runs[{i}].{key}' must be {what}, got {excerpt(run.get(key))}")
    if sorted(r["position"] for r in obj["runs"]) != sorted(POSITIONS):
        raise ValueError(f"'runs' must hold one run at each of {', '.join(POSITIONS)}")


def _loss(value: float | None) -> str:
    return "-" if value is None or not math.isfinite(value) else f"{value:.3f}"


def _predicted(run: ValidationRun) -> str:
    if run.interval is None:
        return _loss(run.predicted)
    return f"{_loss(run.predicted)} [{_loss(run.interval[0])}, {_loss(run.interval[1])}]"


def headline(v: Validation) -> str:
    """The one-sentence result: 'at C = 1.2e14: predicted 3.51 [3.47, 3.55], observed 3.50,
    inside; neighbours 3.56 and 3.58, the optimum holds'."""
    best = v.run("optimum")
    text = f"at C = {v.compute:.3g} ({v.kind}): predicted {_predicted(best)}"
    if best.observed is None:
        return text + f", not measured ({best.status})"
    text += f", observed {_loss(best.observed)}, " + ("inside" if best.inside else
                                                       "no interval" if best.inside is None else "OUTSIDE")
    neighbours = [v.run("smaller").observed, v.run("larger").observed]
    margins = v.margins
    if margins is None:
        return text + "; a neighbour did not finish, so the optimum is untested"
    text += f"; neighbours {_loss(neighbours[0])} and {_loss(neighbours[1])}, "
    if v.optimum_holds:
        text += "the optimum holds"
    else:
        worst = min(margins, key=lambda name: margins[name])
        text += f"the optimum does NOT hold: the {worst} model is lower by {-margins[worst]:.3f}"
    return text + _regime(v)


def _regime(v: Validation) -> str:
    """The warning when runs left the fitted runs' regime of context use ('' otherwise)."""
    moved = v.new_regime
    if not moved or v.fit_context_use is None:
        return ""
    uses = ", ".join(f"{r.position} {r.context_use:+.3f}" for r in moved)
    return (f"; but the {' and '.join(r.position for r in moved)} run{'s' if len(moved) > 1 else ''} used "
            f"{'their' if len(moved) > 1 else 'its'} context ({uses} nats) beyond every fitted run (at most "
            f"{v.fit_context_use[1]:+.3f}): a regime the law was not fitted in, whose losses it cannot predict")


def format_validation(v: Validation) -> list[str]:
    """What `scaling validate` prints: the runs' table and the headline, with the fit's verdict."""
    lines = []
    if v.forced:
        lines.append(f"the fit's verdict is '{v.fit_verdict}': validated anyway (--force)")
    lines.append(f"{'run':<9} {'shape':<12} {'N':>9} {'D':>9} {'D/N':>6} {'lr':>8}  "
                 f"{'predicted [' + format(v.level, '.0%') + ' interval]':<28} {'observed':>8}  status")
    for r in v.runs:
        lines.append(f"{r.position:<9} {r.shape:<12} {r.n:>9.3g} {r.d:>9.3g} {r.d / r.n:>6.3g} {r.lr:>8.3g}  "
                     f"{_predicted(r):<28} {_loss(r.observed):>8}  {r.status}")
    lines.append(headline(v))
    return lines


def validation_path(path: Path | str) -> Path:
    """validate.json in `path` (a folder), or `path` itself when it names a .json file."""
    path = Path(path)
    return path / FILENAME if path.suffix != ".json" else path


def write_validation(path: Path, result: Validation) -> Path:
    """validate.json in `path` (a folder, or the file itself)."""
    path = validation_path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps(json_safe(result.to_json()), indent=2, sort_keys=True) + "\n")
    return path


def load_validation(path: Path) -> Validation:
    """The Validation in a validate.json; UsageError naming the file when it is not one (a link
    to nothing or a link loop included: a validation that is there must be read, not left out)."""
    try:
        validation = Validation.from_json(read_json(path))
    except FileNotFoundError:
        raise UsageError(f"cannot read {path}: a link to nothing") from None
    except (KeyError, TypeError, ValueError) as exc:
        raise UsageError(f"{path} is not a validate.json written by `scaling validate` ({exc})") from None
    if Path(validation.fit).name == FILENAME or Path(validation.store).name == FILENAME:
        raise UsageError(f"{path} is not a validate.json written by `scaling validate` ('fit' and 'store' must "
                         f"name a fit and a run store, not a validate.json: {excerpt(validation.fit)})")
    return validation
