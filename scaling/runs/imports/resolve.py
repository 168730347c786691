"""Find N, D and the loss curve in source runs, by the names given or the conventional ones.

A name the user gives (`Names`) is matched exactly. Without one, each run is searched for the
conventional names (N_KEYS, TOKENS_KEYS, BATCH_KEYS, LOSS_TAGS): a run holding two of them is
ambiguous, and runs that found different ones are mixed; both are errors that ask for the flag,
since picking one would be a guess. A name no run holds is an error too (nothing to import); a
run that lacks what the others hold is kept, not fitted, with the reason.

N is a hyperparameter. D is one of: a logged series of tokens seen (tokens at each evaluation,
and D those at the last one: where the final loss was measured), a hyperparameter holding the
run's total tokens (each evaluation at step s then at D s / S, S the last evaluation's step:
the last evaluation is taken to be the end of training), or a hyperparameter of tokens per step
(steps x batch).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Container, Iterable, Sequence
from dataclasses import dataclass

from scaling.errors import UsageError
from scaling.formats import MAX_COUNT, MAX_LOSS
from scaling.runs.imports.source import LARGEST_STEP, SourceRun, number, plain

N_KEYS = ("n_params", "num_params", "n_parameters", "params", "N")
TOKENS_KEYS = ("tokens", "D", "n_tokens", "num_tokens", "train_tokens")
BATCH_KEYS = ("batch_tokens", "tokens_per_step")
LOSS_TAGS = ("val_loss", "val/loss", "eval/loss", "eval_loss", "validation/loss", "valid/loss", "loss/val")


@dataclass(frozen=True)
class Names:
    """The names N, D and the loss go by in the source (None: search the conventional ones)."""

    n_key: str | None = None
    tokens_key: str | None = None
    batch_tokens_key: str | None = None
    loss_tag: str | None = None


@dataclass(frozen=True)
class Resolved:
    """A source run as the store will hold it: status ('finished', 'diverged' or 'failed'), why
    it is not a fit point, N and D (None where not found), and its curve as metrics records."""

    run: SourceRun
    status: str
    reason: str | None
    n: float | None
    tokens: float | None
    curve: tuple = ()


class MissingNames(UsageError):
    """N, D or the loss not found: `missing` holds which ("n", "d", "loss"), so a caller can
    name its own ways of giving them; the message lists what the runs do hold."""

    def __init__(self, message: str, missing: tuple[str, ...]) -> None:
        super().__init__(message)
        self.missing = missing


def _choose(runs: Sequence[SourceRun], given: str | None, candidates: Sequence[str],
            holds: Callable[[SourceRun], Container[str]], what: str) -> tuple[str | None, str | None]:
    """(the one name `what` goes by, None) or (None, why none was found): `given`, if some run
    holds it, else the conventional name all runs that hold any use."""
    if given is not None:
        if not any(given in holds(r) for r in runs):
            return None, f"{what}: none of the {len(runs)} runs holds {given!r}"
        return given, None
    used: dict[str, list[str]] = {}   # name -> the runs logging it
    for run in runs:
        found = [c for c in candidates if c in holds(run)]
        if len(found) > 1:
            raise UsageError(f"run {run.name!r} logs {what} as both {found[0]!r} and {found[1]!r}; "
                             f"name the one to use")
        if found:
            used.setdefault(found[0], []).append(run.name)
    if len(used) > 1:
        mixed = "; ".join(f"{name!r} ({len(names)} runs, e.g. {names[0]!r})" for name, names in used.items())
        raise UsageError(f"mixed names for {what}: {mixed}; name the one to use")
    if not used:
        return None, f"{what}: under none of {', '.join(candidates)}"
    return next(iter(used)), None


def _held(runs: list[SourceRun]) -> str:
    """What the runs hold, for a message: their hyperparameters and logged scalars (30 of each)."""
    def names(kind: str) -> str:
        found = sorted(set().union(*(getattr(r, kind) for r in runs)))
        shown = ", ".join(map(repr, found[:30])) + (f" and {len(found) - 30} more" if len(found) > 30 else "")
        return shown or "none"
    return f"the runs hold hyperparameters {names('params')}; scalars {names('scalars')}"


def choose_names(runs: list[SourceRun], names: Names) -> Names:
    """The names every run is read by. Every one of N, D and the loss not found is named in one
    MissingNames error, with what the runs hold; two names in one run, or mixed between runs,
    are a UsageError."""
    if names.tokens_key is not None and names.batch_tokens_key is not None:
        raise UsageError("give the tokens key or the batch-tokens key, not both")
    params = lambda r: set(r.params)                       # noqa: E731
    scalars = lambda r: set(r.scalars)                     # noqa: E731
    both = lambda r: set(r.params) | set(r.scalars)        # noqa: E731
    loss, no_loss = _choose(runs, names.loss_tag, LOSS_TAGS, scalars, "the loss (a logged scalar)")
    n, no_n = _choose(runs, names.n_key, N_KEYS, params, "N (a hyperparameter)")
    tokens = batch = no_d = None
    if names.batch_tokens_key is None:
        tokens, no_d = _choose(runs, names.tokens_key, TOKENS_KEYS, both, "D (tokens: a hyperparameter or scalar)")
    if tokens is None and names.tokens_key is None:
        batch, no_batch = _choose(runs, names.batch_tokens_key, BATCH_KEYS, params, "tokens per step")
        no_d = None if batch is not None else no_batch if names.batch_tokens_key else f"{no_d}; nor {no_batch}"
    missing = {key: why for key, why in (("n", no_n), ("d", no_d), ("loss", no_loss)) if why is not None}
    if missing:
        raise MissingNames(f"not found: {'; '.join(missing.values())}; {_held(runs)}", tuple(missing))
    return Names(n_key=n, tokens_key=tokens, batch_tokens_key=batch, loss_tag=loss)


def _series(points: Iterable[tuple[float, float]]) -> dict[int, float]:
    """{step: value}, the last value logged at a step winning (a restarted run logs it again)."""
    return {int(step): float(value) for step, value in points}


def _tokens_at(run: SourceRun, names: Names, steps: list[int]) -> tuple[list[float] | None, str | None]:
    """(tokens at each of `steps`, None) or (None, why not)."""
    key = names.tokens_key
    if key is not None:
        series = _series(run.scalars.get(key, ()))
        if series and (len(set(series.values())) > 1 or key not in run.params):   # tokens seen, step by step
            missing = [s for s in steps if s not in series]
            if missing:
                return None, f"{key!r} is not logged at step {missing[0]}, where the loss is"
            bad = [s for s in steps if not (math.isfinite(series[s]) and series[s] >= 0)]
            if bad:
                return None, f"{key!r} is {series[bad[0]]} at step {bad[0]}"
            return [series[s] for s in steps], None
        total = number(run.params.get(key))
        if key not in run.params:
            return None, f"no {key!r} logged"
        if total is None or total <= 0:
            return None, f"{key!r} is {plain(run.params[key])!r}, not a positive number"
        if steps[-1] <= 0:
            return None, f"its last loss is at step {steps[-1]}, so the tokens of each step are unknown"
        return [total * s / steps[-1] for s in steps], None
    batch = number(run.params.get(names.batch_tokens_key))
    if batch is None or batch <= 0:
        return None, f"no positive {names.batch_tokens_key!r} among its hyperparameters"
    return [batch * s for s in steps], None


def _check_values(run: SourceRun, names: Names, losses: dict[int, float], n: float | None) -> None:
    """UsageError naming the run and the value where one is impossible: a step below 0 or past
    LARGEST_STEP, a loss below 0 or past MAX_LOSS, an N past MAX_COUNT (the bounds a fit holds its
    points to). A NaN or +inf loss is a diverged run's (`resolve`), not refused."""
    where = f"run {run.name!r}"
    step = next((s for s in losses if not 0 <= s <= LARGEST_STEP), None)
    if step is not None:
        raise UsageError(f"{where}: {names.loss_tag!r} is logged at step {step:g}; a step is a whole number from 0 to "
                         f"2^63 - 1")
    low = next(((s, v) for s, v in losses.items() if v < 0 or (math.isfinite(v) and v > MAX_LOSS)), None)
    if low is not None:
        raise UsageError(f"{where}: {names.loss_tag!r} is {low[1]!r} at step {low[0]}; a loss is from 0 to "
                         f"{MAX_LOSS:g} nats per token")
    if n is not None and n > MAX_COUNT:
        raise UsageError(f"{where}: {names.n_key!r} is {n:g}, past {MAX_COUNT:g} parameters (a unit slip?)")


def _check_tokens(run: SourceRun, tokens: list[float] | None) -> None:
    if tokens and not all(math.isfinite(t) and t <= MAX_COUNT for t in tokens):
        worst = next(t for t in tokens if not (math.isfinite(t) and t <= MAX_COUNT))
        raise UsageError(f"run {run.name!r}: its tokens reach {worst:g}, past {MAX_COUNT:g} (a unit slip?)")


def resolve(run: SourceRun, names: Names) -> Resolved:
    """The run's N, D, final loss and curve by `names` (see choose_names), or why it has none;
    UsageError for an impossible value (`_check_values`)."""
    losses = _series(run.scalars.get(names.loss_tag, ()))
    value = run.params.get(names.n_key)
    n = number(value)
    _check_values(run, names, losses, n)
    problems = []
    if not losses:
        problems.append(f"no {names.loss_tag!r} logged")
    if names.n_key not in run.params:
        problems.append(f"no hyperparameter {names.n_key!r}")
    elif n is None or n <= 0:
        problems.append(f"{names.n_key!r} is {plain(value)!r}, not a positive number")
        n = None
    steps = sorted(losses)
    tokens, why = _tokens_at(run, names, steps) if steps else (None, None)
    _check_tokens(run, tokens)
    if why:
        problems.append(why)
    curve = tuple({"step": s, **({"tokens": int(round(tokens[i]))} if tokens else {}),
                   "val_loss": losses[s] if math.isfinite(losses[s]) else None} for i, s in enumerate(steps))
    d = tokens[-1] if tokens else None
    if d is not None and d <= 0:
        problems.append(f"its last evaluation is at {d:g} tokens")
        d = None
    if run.problem:
        return Resolved(run, "failed", run.problem, n, d, curve)
    if problems:
        return Resolved(run, "failed", "not a fit point: " + "; ".join(problems), n, d, curve)
    last = losses[steps[-1]]
    if not math.isfinite(last):
        return Resolved(run, "diverged", f"its last {names.loss_tag!r} is {last} (step {steps[-1]})", n, d, curve)
    return Resolved(run, "finished", None, n, d, curve)
