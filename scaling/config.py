"""Sweep configuration: one YAML file, validated on load into typed objects.

Every key, its type, default and meaning is documented in docs/config.md; keep the two in step.
Errors name the key path, a short excerpt of the value found and what is allowed, and raise
`UsageError` (exit code 2) before anything is written.

Files are read by `scaling.reading` (bounded in size and depth, regular files only).
"""

from __future__ import annotations

import codecs
import difflib
import math
import typing
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    ValidationError,
    field_validator,
    model_serializer,
    model_validator,
)

from scaling.errors import UsageError
from scaling.reading import excerpt, parse_yaml, read_bounded


def _count(value: object) -> object:
    """A positive whole number written as 1000000, 1_000_000, 1e6 or "1e6" (YAML reads 1e6 as text)."""
    if isinstance(value, bool):
        raise ValueError("expected a number, not a boolean")
    if isinstance(value, str):
        try:
            value = float(value.replace("_", ""))
        except ValueError:
            raise ValueError("expected a number such as 1e6 or 1_000_000") from None
    if isinstance(value, float):
        if not math.isfinite(value) or value != int(value):
            raise ValueError("expected a whole number")
        value = int(value)
    return value


def _number(value: object) -> object:
    """A float that may be written as text in YAML ("3e-3")."""
    if isinstance(value, str):
        try:
            return float(value.replace("_", ""))
        except ValueError:
            raise ValueError("expected a number") from None
    return value


def at_most(limit: int, why: str) -> AfterValidator:
    """An upper bound whose message says why it is there (a value past it fails deep inside a
    library: an allocation of hundreds of GB, an overflow in a C extension)."""
    def check(value: int) -> int:
        if value > limit:
            raise ValueError(f"must be at most {limit:,} ({why})")
        return value
    return AfterValidator(check)


Count = Annotated[int, BeforeValidator(_count), Field(gt=0)]
Number = Annotated[float, BeforeValidator(_number), Field(allow_inf_nan=False)]
Threads = Annotated[Count, at_most(1024, "threads of one process; more than any machine's cores")]
Width = Annotated[Count, at_most(65_536, "5x the widest published model; its weights would not fit in memory")]
Depth = Annotated[Count, at_most(1024, "10x the deepest published transformer")]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class CorpusConfig(Strict):
    source: Literal["builtin", "files", "hf"] = "builtin"
    paths: list[str] = Field(default_factory=list, description="files: paths or globs of .txt/.jsonl/.parquet")
    text_field: str = "text"
    dataset: str | None = Field(None, description="hf: dataset name, e.g. roneneldan/TinyStories")
    dataset_config: str | None = None
    split: str = "train"
    streaming: bool = False
    max_bytes: Count | None = None
    max_documents: Count | None = None
    val_fraction: Annotated[Number, Field(gt=0, lt=0.5)] = 0.05
    # files: how text is decoded. Older corpora (Gutenberg's) hold a few Latin-1 bytes; 'replace'
    # puts U+FFFD for each undecodable byte and says how many. Written into run ids and cache
    # keys only when set (below), so that stores from before these keys keep their ids.
    encoding: str = "utf-8"
    decode_errors: Literal["strict", "replace"] = "strict"

    @model_serializer(mode="wrap")
    def _dump_only_set_decoding(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data = handler(self)
        for key, default in (("encoding", "utf-8"), ("decode_errors", "strict")):
            if data.get(key) == default:
                data.pop(key)
        return data

    @field_validator("encoding")
    @classmethod
    def _known_encoding(cls, value: str) -> str:
        try:
            return codecs.lookup(value).name
        except LookupError:
            raise ValueError(f"unknown text encoding {excerpt(value)} (e.g. utf-8, latin-1, cp1252)") from None

    @model_validator(mode="after")
    def _source_needs(self) -> CorpusConfig:
        if self.source == "files" and not self.paths:
            raise ValueError("corpus.source 'files' needs corpus.paths (a list of files or globs)")
        if self.source == "hf" and not self.dataset:
            raise ValueError("corpus.source 'hf' needs corpus.dataset (a Hugging Face dataset name)")
        return self


class TokenizerConfig(Strict):
    vocab_size: Annotated[Count, Field(ge=260), at_most(
        2**20, "4x the largest vocabulary in use; the BPE trainer's tables grow with it")] = 1024
    min_frequency: Count = 2


class ModelConfig(Strict):
    context_length: Annotated[Count, at_most(2**20, "a million tokens; attention's memory grows with its square")] = 128
    tied_embeddings: bool = True
    mlp_ratio: Annotated[Count, at_most(64, "16x the usual 4")] = 4


class Shape(Strict):
    d_model: Width
    n_layers: Depth
    n_heads: Width
    lr: Annotated[Number, Field(gt=0)] | None = None

    @model_validator(mode="after")
    def _heads_divide_width(self) -> Shape:
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model {self.d_model} is not divisible by n_heads {self.n_heads}")
        return self


class IsoFLOPConfig(Strict):
    """Chinchilla's Approach-2 design: at each compute budget C (FLOPs counted by `measure`), the
    model family's shapes whose N lies within a factor `span` of the expected optimum, where
    D / N = k (`tokens_per_param`: the prior, Chinchilla's 20 or D_opt/N_opt from an earlier fit),
    at most `per_budget` of them, each on D = C / (FLOPs per token of its shape).

    measure (scaling.train.counts.COMPUTE_MEASURES): "exact" (the default: the FLOPs each run
    spends, output layer and attention included, so the runs of one budget are iso-compute),
    "6n_total" (C = 6 N_total D, Chinchilla's count) or "6n_non_embedding" (C = 6 N D with Kaplan's
    N, the only measure before it could be chosen: at vocabulary 1,024 it gives a budget's smallest
    model up to 1.8x the real FLOPs of its largest). N and k are counted in total parameters,
    except for 6n_non_embedding."""

    budgets: Annotated[list[Annotated[Number, Field(gt=0, allow_inf_nan=False)]], Field(min_length=2)]
    tokens_per_param: Annotated[Number, Field(gt=0, allow_inf_nan=False)] = 20.0
    span: Annotated[Number, Field(gt=1, allow_inf_nan=False)] = 4.0
    per_budget: Annotated[Count, Field(ge=3)] = 5
    measure: Literal["exact", "6n_total", "6n_non_embedding"] = "exact"


# The most runs one sweep may plan: a planned run is a folder, a claim and a line of runs.csv, and
# a design is checked run by run; 10,000 is past any sweep a person trains (Chinchilla's 400) and
# planned in seconds, where 1000 x 1000 would take an hour before a single step.
MAX_RUNS = 10_000
# The most tokens one run may train: 1e15, 70x the largest published training run's (15e12).
MAX_TOKENS = 10**15


class GridConfig(Strict):
    """The runs of a sweep: every model on every token count (`tokens`, a cross grid), or an
    IsoFLOP design (`isoflop`) picking models and tokens per compute budget."""

    models: Annotated[list[Shape], Field(min_length=1)]
    tokens: Annotated[list[Annotated[Count, at_most(MAX_TOKENS, "70x the largest training run's tokens")]],
                      Field(min_length=1)] | None = None
    isoflop: IsoFLOPConfig | None = None

    @model_validator(mode="after")
    def _one_design(self) -> GridConfig:
        if (self.tokens is None) == (self.isoflop is None):
            raise ValueError("give grid.tokens (every model on every token count) or grid.isoflop "
                             "(compute budgets), not both and not neither")
        planned = len(self.models) * len(self.tokens) if self.tokens is not None else \
            len(self.isoflop.budgets) * self.isoflop.per_budget if self.isoflop is not None else 0
        if planned > MAX_RUNS:
            raise ValueError(f"plans {planned:,} runs, more than {MAX_RUNS:,} (a sweep is trained run by run: "
                             "sample fewer models or token counts)")
        return self


Seed = Annotated[int, Field(ge=0), at_most(2**32 - 1, "random generators are seeded with 32 bits")]


class LRLaw(Strict):
    """lr = coefficient * N^n_exponent * D^d_exponent, N the run's non-embedding parameters and D its
    tokens: the learning-rate law `scaling tune --budgets` fits over the sweep's own cells. It sets
    the rate of every shape without one of its own."""

    coefficient: Annotated[Number, Field(gt=0)]
    n_exponent: Annotated[Number, Field(ge=-3, le=3)]
    d_exponent: Annotated[Number, Field(ge=-3, le=3)] = 0.0

    def lr(self, n_non_embedding: int, tokens: int) -> float:
        return float(f"{self.coefficient * n_non_embedding ** self.n_exponent * tokens ** self.d_exponent:.3g}")


class TrainConfig(Strict):
    batch_tokens: Count = 1024
    lr: Annotated[Number, Field(gt=0)] = 1e-2
    lr_rule: Literal["constant", "inverse_width"] = "inverse_width"
    lr_base_width: Count = 64
    # Set by `scaling tune --budgets`; before the width rule, after a shape's own lr. Dumped only
    # when set, so that runs' config.yaml files keep their bytes.
    lr_law: LRLaw | None = None
    warmup_fraction: Annotated[Number, Field(ge=0, lt=1)] = 0.05
    # Warmup in tokens per (total) parameter, the same for every budget of a shape, in place of
    # warmup_fraction: a fraction of each run's steps gives the short runs of a large shape a few
    # dozen warmup steps, which cost them up to 8.5% of their loss on the demo (bench_curve_warmup).
    # Dumped only when set, so that runs' config.yaml files keep their bytes.
    warmup_tokens_per_param: Annotated[Number, Field(gt=0, le=1e6)] | None = None
    schedule: Literal["cosine", "linear", "wsd"] = "cosine"
    min_lr_ratio: Annotated[Number, Field(ge=0, le=1)] = 0.1
    # wsd (warmup-stable-decay, Hagele et al. 2024): the decay over the last cooldown_fraction of
    # each budget, in the shape cooldown_shape. Part of the run id only when schedule is wsd.
    cooldown_fraction: Annotated[Number, Field(gt=0, lt=1)] = 0.2
    cooldown_shape: Literal["linear", "1-sqrt", "cosine"] = "1-sqrt"
    weight_decay: Annotated[Number, Field(ge=0)] = 0.1
    beta1: Annotated[Number, Field(ge=0, lt=1)] = 0.9
    beta2: Annotated[Number, Field(ge=0, lt=1)] = 0.95
    grad_clip: Annotated[Number, Field(ge=0)] = 1.0
    eval_interval: Count = 100
    eval_tokens: Count = 65536
    log_interval: Count = 10
    checkpoint_interval: Count = 200
    device: Literal["auto", "cpu", "cuda", "mps"] = "auto"
    threads: Threads | None = None
    # torch.compile the training step's model. Off by default: on CPU it measured from 11% slower
    # to 7% faster than eager for the tiny shapes, and compiling costs seconds per run, which
    # short runs do not win back. An execution setting, like device and threads.
    compile: bool = False
    # Replicates: each planned run is trained once per seed (initialisation and batch order) on the
    # same tokens and evaluation windows; the data seed (split, tokenizer) stays the config's
    # `seed`. None: one run, with the config's seed. The scatter between replicates is the pure
    # error of the fit's lack-of-fit test (scaling.laws.checks.lack_of_fit).
    seeds: Annotated[list[Seed], Field(min_length=1, max_length=64)] | None = None
    divergence_factor: Annotated[Number, Field(gt=1)] = 3.0
    retries: Annotated[int, Field(ge=0)] = 0
    retry_lr_factor: Annotated[Number, Field(gt=0, lt=1)] = 0.5
    # Viewers each run's curves are also written for as it trains (scaling.train.logs); the run
    # store is the same with or without them. Dumped only when set, so that runs' config.yaml
    # files keep their bytes.
    log_to: list[Literal["tensorboard"]] = Field(default_factory=list)

    @field_validator("log_to")
    @classmethod
    def _each_viewer_once(cls, value: list[str]) -> list[str]:
        if len(set(value)) != len(value):
            raise ValueError(f"lists a viewer twice: {value}")
        return value

    @model_serializer(mode="wrap")
    def _dump_optional_when_set(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data = handler(self)
        for key in ("log_to", "lr_law", "warmup_tokens_per_param"):
            if not data.get(key):
                data.pop(key, None)
        return data

    @field_validator("seeds")
    @classmethod
    def _seeds_differ(cls, value: list[int] | None) -> list[int] | None:
        if value is not None and len(set(value)) != len(value):
            raise ValueError(f"the training seeds repeat ({value}): a replicate needs its own seed")
        return value


class ExecutorConfig(Strict):
    kind: Literal["local", "ray"] = "local"
    # runs in flight at once; None: the rule in scaling.sweeps.packing.workers_and_threads
    workers: Annotated[Count, at_most(1024, "worker processes at once")] | None = None
    threads_per_run: Threads | None = None  # torch threads per run (None: train.threads, else 1)
    # runs sharing one GPU when train.device is cuda
    runs_per_gpu: Annotated[Count, at_most(256, "each run holds its own CUDA context")] = 4
    address: str | None = None    # ray: the cluster to join; None starts a local one
    max_retries: Annotated[int, Field(ge=0)] = 3  # ray: reschedules of a run whose worker died

    @model_validator(mode="after")
    def _address_is_for_ray(self) -> ExecutorConfig:
        if self.address is not None and self.kind != "ray":
            raise ValueError("executor.address applies to kind 'ray' only")
        return self


NAME_MAX = 100   # characters of a sweep's name (a folder of the run store)


class SweepConfig(Strict):
    name: Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$", max_length=NAME_MAX)]
    seed: Seed = 0
    corpus: CorpusConfig = CorpusConfig()
    tokenizer: TokenizerConfig = TokenizerConfig()
    model: ModelConfig = ModelConfig()
    grid: GridConfig
    train: TrainConfig = TrainConfig()
    executor: ExecutorConfig = ExecutorConfig()

    @model_validator(mode="after")
    def _batch_holds_a_sequence(self) -> SweepConfig:
        if self.train.batch_tokens % self.model.context_length:
            raise ValueError(f"train.batch_tokens {self.train.batch_tokens} is not a multiple of "
                             f"model.context_length {self.model.context_length}")
        return self

    @model_validator(mode="after")
    def _wsd_has_token_counts(self) -> SweepConfig:
        if self.train.schedule == "wsd" and self.grid.isoflop is not None:
            raise ValueError("train.schedule 'wsd' needs grid.tokens (one stable run a shape, a branch a "
                             "token count); an IsoFLOP design trains each run on its own")
        return self

    @model_validator(mode="after")
    def _wsd_has_no_retries(self) -> SweepConfig:
        # A retry trains at a lower learning rate, which would need a stable run of its own.
        if self.train.schedule == "wsd" and self.train.retries:
            raise ValueError("train.retries is not supported with train.schedule 'wsd' (a retry at a "
                             "lower learning rate would need its own stable run); set it to 0")
        return self

    @model_validator(mode="after")
    def _log_to_stays_local(self) -> SweepConfig:
        # A Ray task trains in a scratch folder of its node, and only metrics and checkpoints
        # travel back: its event files would be lost.
        if self.train.log_to and self.executor.kind == "ray":
            raise ValueError("train.log_to is not supported with executor.kind 'ray' (runs train in a "
                             "scratch folder on their node, and only metrics and checkpoints travel back)")
        return self


MAX_ERRORS_SHOWN = 20   # a list of a million bad values is one problem, not a million lines


def _model_in(annotation: Any) -> Any:
    """The config model a field's type holds (itself, or inside list[...] or X | None); None for a value."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return next((m for m in map(_model_in, typing.get_args(annotation)) if m is not None), None)


def _closest_key(loc: tuple) -> str | None:
    """The allowed key nearest a misspelt one at `loc` (difflib's, as `errors.unknown_name`), or None."""
    model: Any = SweepConfig
    for part in loc[:-1]:
        if isinstance(part, int):            # an item of a list: the list's model, found at its key
            continue
        field = getattr(model, "model_fields", {}).get(part)
        model = None if field is None else _model_in(field.annotation)
    close = difflib.get_close_matches(str(loc[-1]), list(getattr(model, "model_fields", {})), n=1)
    return close[0] if close else None


def _format_error(source: str, exc: ValidationError) -> str:
    lines = [f"{source}: invalid configuration"]
    # A misspelt key is one problem, not two: its "unknown key" names the key meant, and the "Field
    # required" of that key (a required one's misspelling leaves it missing) is not repeated.
    closest = {tuple(err["loc"]): _closest_key(err["loc"]) for err in exc.errors() if err["type"] == "extra_forbidden"}
    meant = {(*loc[:-1], key) for loc, key in closest.items() if key is not None}
    errors = [err for err in exc.errors() if not (err["type"] == "missing" and tuple(err["loc"]) in meant)]
    for err in errors[:MAX_ERRORS_SHOWN]:
        path = ".".join(f"[{p}]" if isinstance(p, int) else str(p) for p in err["loc"]).replace(".[", "[")
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            key = closest[tuple(err["loc"])]
            hint = "" if key is None else f"; did you mean {key!r}?"
            msg = f"unknown key{hint} (see docs/config.md for the allowed keys)"
        where = f"{path}: " if path else ""
        # A whole section as the value says less than the message, which names what is wrong in it.
        hide = err["type"] in ("missing", "extra_forbidden") or isinstance(err["input"], dict)
        value = "" if hide else f" (got {excerpt(err['input'])})"
        lines.append(f"  {where}{msg}{value}")
    if len(errors) > MAX_ERRORS_SHOWN:
        lines.append(f"  ... and {len(errors) - MAX_ERRORS_SHOWN} more")
    return "\n".join(lines)


def parse_config(data: dict, source: str = "config") -> SweepConfig:
    if data is None:
        raise UsageError(f"{source}: the file is empty; a sweep needs at least 'name' and 'grid' "
                         "(see docs/config.md)")
    if not isinstance(data, dict):
        raise UsageError(f"{source}: expected a mapping of keys at the top level, got {type(data).__name__}")
    try:
        return SweepConfig.model_validate(data)
    except ValidationError as exc:
        raise UsageError(_format_error(source, exc)) from None


def load_config(path: str | Path) -> SweepConfig:
    """Read and validate a sweep YAML file."""
    path = Path(path)
    try:
        text = read_bounded(path, what="config").decode("utf-8")
    except FileNotFoundError:
        raise UsageError(f"config file not found: {path}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read config {path}: {exc}") from None
    return parse_config(parse_yaml(text, str(path)), str(path))


def derived_name(name: str, suffix: str, what: str) -> str:
    """`name + suffix`, the name of a sweep or config a command derives from the user's (`what`
    says which), refused in one line before any work when it would be longer than a name may be:
    found later, it is a config that `sweep` refuses, or training done for nothing."""
    if len(name) + len(suffix) > NAME_MAX:
        raise UsageError(f"config name {name[:20]}... is {len(name)} characters: {what} is named "
                         f"'<name>{suffix}', so the name must be at most {NAME_MAX - len(suffix)} characters")
    return name + suffix


def run_lr(train: TrainConfig, shape: Shape, n_non_embedding: int | None = None, tokens: int | None = None) -> float:
    """The learning rate of one run: the shape's own, else the lr law's at the run's N and D (which
    it then needs), else the sweep's scaled by the width rule."""
    if shape.lr is not None:
        return shape.lr
    if train.lr_law is not None:
        if n_non_embedding is None or tokens is None:
            raise ValueError("train.lr_law needs the run's N and D")
        return train.lr_law.lr(n_non_embedding, tokens)
    if train.lr_rule == "inverse_width":
        # Wider models take smaller steps (muP-style 1/width scaling of Adam's lr).
        return train.lr * train.lr_base_width / shape.d_model
    return train.lr
