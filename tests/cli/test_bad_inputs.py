"""Bad input, tried systematically: each case runs one command line (in this process, through
`scaling.cli.main`) and must exit with code 2, print a message naming the problem and no
traceback, and leave every file already on disk as it was (and write nothing into the run store).

Each case is (id, setup, expected): setup(case) prepares files under case.tmp and returns the
arguments; `expected` is a fragment of the message.
"""

import contextlib
import hashlib
import io
import json
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from scaling.cli import main
from scaling.data.corpus import Document, load_split, split_documents
from scaling.data.tokens import cache_key
from scaling.runs import store
from tests.conftest import MICRO, micro_config
from tests.hardening.helpers import FLAT_POINTS


@dataclass
class Case:
    tmp: Path
    cache: Path       # a copy of the session's token cache (the micro corpus, already tokenized)
    store: Path       # a copy of the micro sweep's run store: runs/micro
    micro_dir: Path   # the micro sweep's store itself, to copy from

    @property
    def runs(self) -> Path:
        return self.store.parent

    def sweep(self, config: Path) -> list:
        return ["sweep", config, "--runs-dir", self.runs, "--cache-dir", self.cache]

    def config(self, text: str | bytes | None = None, **overrides) -> Path:
        """A sweep config: the micro sweep with overrides, or the given text."""
        path = self.tmp / "sweep.yaml"
        if text is None:
            text = yaml.safe_dump({**MICRO, **overrides})
        path.write_bytes(text if isinstance(text, bytes) else text.encode())
        return path

    def corpus(self, *files: tuple[str, str | bytes], **corpus) -> list:
        """A sweep of local corpus files given as (name, content)."""
        for name, content in files:
            self.write(name, content)
        paths = [str(self.tmp / name) for name, _ in files]
        return self.sweep(self.config(corpus={"source": "files", "paths": paths, **corpus}))

    def write(self, name: str, content: str | bytes) -> None:
        (self.tmp / name).write_bytes(content if isinstance(content, bytes) else content.encode())

    def fit_csv(self, content: str | bytes, *extra) -> list:
        """`scaling fit` of a table, --bootstrap 0 and --out tmp/fit unless `extra` gives them (an
        option given twice is refused)."""
        self.write("points.csv", content)
        defaults = [flag for flag in (["--bootstrap", "0"], ["--out", self.tmp / "fit"]) if flag[0] not in extra]
        return ["fit", "--csv", self.tmp / "points.csv", "--n-col", "N", "--d-col", "D", "--loss-col", "loss",
                *(v for flag in defaults for v in flag), *extra]

    def fit_table(self, content: str, *columns) -> list:
        """`scaling fit` of a table whose columns are found by name unless `columns` names them."""
        self.write("points.csv", content)
        return ["fit", "--csv", self.tmp / "points.csv", "--bootstrap", "0", "--out", self.tmp / "fit", *columns]

    def edit_summaries(self, **changes) -> None:
        for path in self.store.glob(f"*/{store.SUMMARY}"):
            summary = json.loads(path.read_text())
            path.write_text(json.dumps({**summary, **changes}))

    @property
    def micro_cache(self) -> Path:
        """The micro sweep's own token cache folder (other tests may leave caches of other corpora)."""
        cfg = micro_config()
        return self.cache / "tokens" / cache_key(cfg, load_split(cfg.corpus, cfg.seed))

    def empty(self) -> Path:
        """An empty folder."""
        (self.tmp / "empty").mkdir(exist_ok=True)
        return self.tmp / "empty"

    def write_to(self, path: Path, content: str) -> None:
        path.write_text(content)

    def cache_meta(self, **changes) -> None:
        meta_path = self.micro_cache / "meta.json"
        meta_path.write_text(json.dumps({**json.loads(meta_path.read_text()), **changes}))


def overwrite_same_size(path: Path) -> None:
    """Every token id of a cache file set to the largest its type holds, the size unchanged."""
    path.write_bytes(b"\xff" * path.stat().st_size)


def overwrite(folder: Path, pattern: str, content: bytes) -> None:
    """Replace the first file matching `pattern` under `folder`, as a hand edit or a bad disk would."""
    next(folder.glob(pattern)).write_bytes(content)


GOOD_POINTS = "N,D,loss\n" + "".join(f"{n},{d},{2 + 1e3 / n ** 0.3 + 1e3 / d ** 0.3}\n"
                                     for n in (1e6, 1e7, 1e8) for d in (1e8, 1e9))
BIG_TEXT = "\n".join(f"Line {i}: the committee met on the {i}th day and talked of bread, coal and rain."
                     for i in range(600))


def val_too_small(case: Case) -> list:
    """Two documents, the short one held out: a validation split shorter than one window."""
    docs = [Document("a", BIG_TEXT), Document("b", "Thanks.")]
    seed = next(s for s in range(20) if split_documents(docs, 0.1, s).val[0].id == "b")
    case.write("a.txt", BIG_TEXT)
    case.write("b.txt", "Thanks.")
    return case.sweep(case.config(seed=seed, corpus={"source": "files", "paths": [str(case.tmp / "*.txt")]}))


def fit_with_law(case: Case, **params) -> Path:
    """A fit.json of GOOD_POINTS whose law's constants are then edited by hand to `params`."""
    assert main([str(a) for a in case.fit_csv(GOOD_POINTS)]) == 0
    path = case.tmp / "fit" / "fit.json"
    fit = json.loads(path.read_text())
    path.write_text(json.dumps({**fit, "params": {**fit["params"], **params}}))
    return path


def edited_fit(case: Case, edit, *flags, points: str = GOOD_POINTS) -> Path:
    """A fit.json of `points` (fitted with `flags`) edited by hand, or left by an older version:
    `edit(fit)` changes the parsed dict in place."""
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        assert main([str(a) for a in case.fit_csv(points, *flags)]) == 0
    path = case.tmp / "fit" / "fit.json"
    fit = json.loads(path.read_text())
    edit(fit)
    path.write_text(json.dumps(fit))
    return path


def kaplan_entry(fit: dict, **changes) -> None:
    fit["form"] = "kaplan"
    next(e for e in fit["forms"]["entries"] if e["name"] == "kaplan").update(changes)


def edit_summary(case: Case, drop: str | None = None, **changes) -> None:
    """One run's summary.json edited by hand: keys changed, or one removed."""
    path = next(case.store.glob(f"*/{store.SUMMARY}"))
    summary = {**json.loads(path.read_text()), **changes}
    summary.pop(drop, None)
    path.write_text(json.dumps(summary))


DEEP_JSON = "[" * 100_000 + "]" * 100_000
def bomb(levels: int) -> str:
    lines = ["name: micro", "grid: {models: [{d_model: 16, n_layers: 1, n_heads: 2}], tokens: [8192]}",
             "a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, levels)]
    return "\n".join(lines + [f"corpus: {{source: files, paths: [*a{levels - 1}]}}", ""])


def shape(**fields):
    return {"models": [{"d_model": 16, "n_layers": 1, "n_heads": 2, **fields}], "tokens": [8192]}


CASES = [
    # --- the sweep config
    ("config missing", lambda c: c.sweep(c.tmp / "nope.yaml"), "config file not found"),
    ("config is a folder", lambda c: c.sweep(c.tmp), "cannot read config"),
    ("malformed YAML", lambda c: c.sweep(c.config("name: micro\ngrid: [models\n")), "not valid YAML"),
    ("empty YAML", lambda c: c.sweep(c.config("")), "the file is empty"),
    ("YAML list at the top", lambda c: c.sweep(c.config("- name: micro\n")), "expected a mapping"),
    ("config not UTF-8", lambda c: c.sweep(c.config(b"name: caf\xe9\n")), "'utf-8' codec can't decode"),
    ("unknown key", lambda c: c.sweep(c.config(trian={})), "trian: unknown key"),
    ("unknown nested key", lambda c: c.sweep(c.config(train={"lrr": 1e-3})), "train.lrr: unknown key"),
    # a misspelt key: the key meant, and a required one's "Field required" not said as a second problem
    ("misspelt required key", lambda c: c.sweep(c.config(yaml.safe_dump(
        {"gird" if k == "grid" else k: v for k, v in MICRO.items()}))),
     "invalid configuration; gird: unknown key; did you mean 'grid'? (see docs/config.md"),
    ("misspelt key of a list's item", lambda c: c.sweep(c.config(grid=shape(lrr=1e-3))),
     "grid.models[0].lrr: unknown key; did you mean 'lr'?"),
    ("text for a number", lambda c: c.sweep(c.config(train={"lr": "fast"})),
     "train.lr: expected a number (got 'fast')"),
    ("text for a count", lambda c: c.sweep(c.config(grid={**MICRO["grid"], "tokens": ["lots"]})),
     "grid.tokens[0]: expected a number such as 1e6 or 1_000_000 (got 'lots')"),
    ("boolean for a count", lambda c: c.sweep(c.config(model={"context_length": True})),
     "model.context_length: expected a number, not a boolean (got True)"),
    ("list for a mapping", lambda c: c.sweep(c.config(train=[1, 2])), "train: Input should be a valid dictionary"),
    ("negative budget", lambda c: c.sweep(c.config(grid={**MICRO["grid"], "tokens": [-8192]})),
     "grid.tokens[0]: Input should be greater than 0"),
    ("fractional budget", lambda c: c.sweep(c.config(grid={**MICRO["grid"], "tokens": [1000.5]})),
     "grid.tokens[0]: expected a whole number (got 1000.5)"),
    ("missing grid", lambda c: c.sweep(c.config("name: micro\n")), "grid: Field required"),
    ("name with ..", lambda c: c.sweep(c.config(name="../escape")), "name: String should match pattern"),
    ("name with a separator", lambda c: c.sweep(c.config(name="a/b")), "name: String should match pattern"),
    ("absolute name", lambda c: c.sweep(c.config(name="/tmp/escape")), "name: String should match pattern"),
    ("heads do not divide width", lambda c: c.sweep(c.config(grid=shape(n_heads=3))),
     "d_model 16 is not divisible by n_heads 3"),
    ("batch not whole sequences", lambda c: c.sweep(c.config(train={"batch_tokens": 100})),
     "train.batch_tokens 100 is not a multiple of model.context_length"),
    ("val_fraction too large", lambda c: c.sweep(c.config(corpus={"val_fraction": 0.7})), "corpus.val_fraction"),
    ("vocab below bytes", lambda c: c.sweep(c.config(tokenizer={"vocab_size": 100})), "tokenizer.vocab_size"),
    ("divergence factor below 1", lambda c: c.sweep(c.config(train={"divergence_factor": 0.5})),
     "train.divergence_factor: Input should be greater than 1"),
    ("retry factor above 1", lambda c: c.sweep(c.config(train={"retries": 1, "retry_lr_factor": 2})),
     "train.retry_lr_factor"),
    ("negative retries", lambda c: c.sweep(c.config(train={"retries": -1})), "train.retries"),
    ("unknown executor", lambda c: c.sweep(c.config(executor={"kind": "slurm"})), "executor.kind"),
    # issue 15, case 8: upper bounds, with the reason
    ("vocabulary of 2^31", lambda c: c.sweep(c.config(tokenizer={"vocab_size": 2**31})),
     "tokenizer.vocab_size: must be at most 1,048,576 (4x the largest vocabulary in use"),
    ("seed of 2^70", lambda c: c.sweep(c.config(seed=2**70)), "seed: must be at most 4,294,967,295"),
    ("a billion threads", lambda c: c.sweep(c.config(executor={"threads_per_run": 10**9})),
     "executor.threads_per_run: must be at most 1,024"),
    ("d_model of 2^40", lambda c: c.sweep(c.config(grid=shape(d_model=2**40, n_heads=2))),
     "grid.models[0].d_model: must be at most 65,536"),
    ("infinite learning rate", lambda c: c.sweep(c.config("name: micro\ngrid: {models: [{d_model: 16, n_layers: 1, "
                                                          "n_heads: 2}], tokens: [8192]}\ntrain: {lr: .inf}\n")),
     "train.lr: Input should be a finite number"),
    # issue 15, cases 6 and 7, and duplicate keys: the bounded YAML reader
    ("YAML nested 100,000 deep", lambda c: c.sweep(c.config("name: " + DEEP_JSON + "\n")),
     "nested deeper than 64 levels"),
    ("YAML alias bomb", lambda c: c.sweep(c.config(bomb(9))), "more than 1,000,000 values"),
    ("YAML alias bomb under the size limit", lambda c: c.sweep(c.config(bomb(5))),
     "corpus.paths[0]: Input should be a valid string (got [["),
    ("duplicate YAML key", lambda c: c.sweep(c.config("name: micro\nname: other\n")), "duplicate key 'name'"),
    # --- the corpus
    ("files source without paths", lambda c: c.sweep(c.config(corpus={"source": "files"})),
     "needs corpus.paths"),
    ("corpus file missing", lambda c: c.sweep(c.config(corpus={"source": "files", "paths": ["/no/such.txt"]})),
     "/no/such.txt does not exist"),
    ("corpus glob matches nothing", lambda c: c.sweep(c.config(corpus={"source": "files", "paths": ["/no/*.txt"]})),
     "matches no file"),
    ("empty corpus files", lambda c: c.corpus(("a.txt", ""), ("b.txt", "   \n")), "0 non-empty document(s)"),
    ("one document", lambda c: c.corpus(("a.txt", BIG_TEXT)), "1 non-empty document(s); at least 2"),
    ("corpus not UTF-8", lambda c: c.corpus(("a.txt", BIG_TEXT), ("b.txt", b"caf\xe9 au lait")),
     "b.txt: not UTF-8 text (byte 3"),
    ("corpus JSONL line broken", lambda c: c.corpus(("a.jsonl", '{"text": "hi"}\n{"text": "cut\n')),
     "a.jsonl:2 is not valid JSON"),
    ("corpus JSONL line nested 100,000 deep", lambda c: c.corpus(("a.jsonl", '{"text": "hi"}\n' + DEEP_JSON + "\n")),
     "a.jsonl:2: nested deeper than 64 levels"),
    ("corpus JSONL without the field", lambda c: c.corpus(("a.jsonl", '{"body": "hi"}\n')),
     "a.jsonl:1: no text field 'text'"),
    ("corpus of the wrong kind", lambda c: c.corpus(("a.csv", "text\nhi\n")), "has suffix '.csv'"),
    ("vocabulary larger than the corpus allows", lambda c: c.corpus(("a.txt", "ab ab ab"), ("b.txt", "ba ba")),
     "larger than this corpus allows"),
    ("validation split shorter than a window", val_too_small,
     "the validation split has"),
    # --- the token cache
    ("token cache of another key", lambda c: c.cache_meta(key="0123456789abcdef") or c.sweep(c.config(name="other")),
     "does not match its settings"),
    ("token cache of another tokenizer", lambda c: c.cache_meta(tokenizer={"vocab_size": 999, "min_frequency": 2})
     or c.sweep(c.config(name="other")), "was built with tokenizer"),
    ("token cache of float16", lambda c: c.cache_meta(dtype="float16") or c.sweep(c.config(name="other")),
     "meta.json's vocab_size"),
    ("token cache with ids outside the vocabulary", lambda c: overwrite_same_size(c.micro_cache / "val.bin")
     or c.sweep(c.config(name="other")), "outside the vocabulary of"),
    ("token cache meta.json nested 100,000 deep", lambda c: c.write_to(c.micro_cache / "meta.json", DEEP_JSON)
     or c.sweep(c.config(name="other")), "does not match its settings"),
    ("token cache truncated", lambda c: overwrite(c.micro_cache, "train.bin", b"\0" * 10)
     or c.sweep(c.config(name="other")), "train.bin has 10 bytes"),
    # --- the run store, edited by hand
    ("summary.json not JSON", lambda c: overwrite(c.store, "*/summary.json", b'{"status": "fini')
     or c.sweep(c.config()), "summary.json is not valid JSON"),
    ("summary.json with an unknown status", lambda c: c.edit_summaries(status="done") or c.sweep(c.config()),
     "is not a run summary"),
    ("summary.json a list", lambda c: overwrite(c.store, "*/summary.json", b"[]") or ["runs", c.store],
     "is not a run summary"),
    ("summary.json nested 100,000 deep", lambda c: overwrite(c.store, "*/summary.json", DEEP_JSON.encode())
     or ["runs", c.store], "nested deeper than 64 levels"),
    # issue 15, case 5: hand-edited summaries
    ("runs: a summary without run_id", lambda c: edit_summary(c, drop="run_id") or ["runs", c.store],
     "'run_id' must be the run folder's name"),
    ("runs: d_model as text", lambda c: edit_summary(c, d_model="abc") or ["runs", c.store],
     "'d_model' must be a number or null, got 'abc'"),
    ("runs: loss as text", lambda c: edit_summary(c, final_val_loss="low") or ["runs", c.store],
     "'final_val_loss' must be a number or null, got 'low'"),
    ("runs: tokens as a list", lambda c: edit_summary(c, tokens=[1, 2]) or ["runs", c.store],
     "'tokens' must be a number or null, got [1, 2]"),
    ("runs of a missing store", lambda c: ["runs", c.tmp / "nowhere"], "no run store at"),
    # a folder with no run in it is a mistaken path (it printed "no runs", exit code 0), and the
    # root runs/ that holds the stores is named as one, with the stores to give instead
    ("runs of an empty folder", lambda c: c.empty() and ["runs", c.empty()],
     "empty has no runs (no <run-id>/config.yaml): not a run store runs/<sweep> made by `scaling sweep`"),
    ("runs --json of a folder that is no run store", lambda c: ["runs", "--json", c.cache], "cache has no runs"),
    ("runs of the folder holding the run stores", lambda c: ["runs", c.runs],
     "runs holds run stores, not runs: give one of them ("),
    ("fit of the folder holding the run stores", lambda c: ["fit", c.runs, "--bootstrap", "0", "--out", c.tmp / "fit"],
     "runs holds run stores, not runs: give one of them ("),
    ("report of an empty folder", lambda c: ["report", c.empty(), "--bootstrap", "0", "--out", c.tmp / "report"],
     "empty has no runs (no <run-id>/config.yaml): not a run store runs/<sweep> made by `scaling sweep` or "
     "`scaling import`; nor is it a fit folder (no fit.json)"),
    ("runs directory inside a file", lambda c: c.write("file", "x") or
     ["sweep", c.config(), "--runs-dir", c.tmp / "file" / "runs", "--cache-dir", c.cache], "is not a folder"),
    ("fit of a store whose runs all diverged", lambda c: c.edit_summaries(status="diverged", reason="lr")
     or ["fit", c.store, "--bootstrap", "0", "--out", c.tmp / "fit"], "none of its 6 runs finished"),
    ("fit of a store with a hand-edited loss", lambda c: c.edit_summaries(final_val_loss="low")
     or ["fit", c.store, "--bootstrap", "0", "--out", c.tmp / "fit"], "'final_val_loss' must be a number or null"),
    # --- fit on a table
    ("fit without data", lambda c: ["fit"], "give exactly one data source"),
    ("fit CSV missing", lambda c: ["fit", "--csv", c.tmp / "none.csv"], "none.csv does not exist"),
    ("fit CSV without a column", lambda c: c.fit_csv("N,D,lost\n1e6,1e9,3\n"),
     "column(s) 'loss' (for loss) not found; the columns present are: 'N', 'D', 'lost'"),
    ("fit CSV with a header typo", lambda c: c.fit_table("paramss,tokens,val_los\n1e6,1e9,3\n"),
     "; did you mean 'val_los'?); the columns present are: 'paramss', 'tokens', 'val_los'; name the "
                      "columns to use (--n, --loss)"),
    ("fit CSV with a column named with a typo", lambda c: c.fit_table("N,D,lost\n1e6,1e9,3\n", "--loss", "los"),
     "'los' (for loss; did you mean 'lost'?) not found"),
    ("fit of a missing run store", lambda c: ["fit", c.runs / "tinyy"], "made by `scaling sweep` or `scaling import`"),
    ("compare of a run store", lambda c: ["compare", c.store], "is a run store, not a fit: fit it first: `scaling fit"),
    ("plan with a negative budget in exponent form", lambda c: ["plan", "--compute", "1e21", "-1e21"],
     "--compute (FLOPs, e.g. 1e21) must be a positive, finite number, got '-1e21'"),
    ("fit CSV with NaN", lambda c: c.fit_csv(GOOD_POINTS + "1e9,1e9,nan\n"),
     "column 'loss' must be positive and finite, but 1 of 7 rows are not (first at row index 6: nan)"),
    ("fit CSV with an empty cell", lambda c: c.fit_csv(GOOD_POINTS + "1e9,,3.1\n"), "column 'D' must be positive"),
    ("fit CSV with a negative N", lambda c: c.fit_csv(GOOD_POINTS + "-1e9,1e9,3.1\n"), "column 'N' must be positive"),
    ("fit CSV with a zero D", lambda c: c.fit_csv(GOOD_POINTS + "1e9,0,3.1\n"), "column 'D' must be positive"),
    ("fit CSV with text", lambda c: c.fit_csv(GOOD_POINTS + "1e9,many,3.1\n"), "(first at row index 6: 'many')"),
    ("fit CSV with no rows", lambda c: c.fit_csv("N,D,loss\n"), "the table has no rows"),
    ("fit CSV empty", lambda c: c.fit_csv(""), "cannot read"),
    ("fit CSV not UTF-8", lambda c: c.fit_csv(b"N,D,loss\n1e6,1e9,3\xe9\n"), "cannot read"),
    ("fit with fewer points than parameters", lambda c: c.fit_csv("N,D,loss\n1e6,1e9,3\n1e7,1e9,2.8\n1e8,1e9,2.7\n"),
     "3 point(s), fewer than the 5 free parameters"),
    ("fit with one model size", lambda c: c.fit_csv("N,D,loss\n" + "".join(f"1e6,{d},{3 - i / 10}\n" for i, d in
                                                                         enumerate((1e8, 2e8, 4e8, 8e8, 1e9, 2e9)))),
     "have the same model size"),
    # issue 15, cases 2, 3, 9 and 14
    ("fit with one token count", lambda c: c.fit_csv("N,D,loss\n" + "".join(
        f"{n},1e9,{3 - i / 10}\n" for i, n in enumerate((1e6, 1e7, 1e8, 1e9, 1e10, 1e11)))),
     "have the same token count (D = 1e+09)"),
    ("fit with N D beyond a float", lambda c: c.fit_csv(GOOD_POINTS + "1e200,1e108,3.1\n"),
     "N (parameters) must be at most 1e+30"),
    # --- an option given twice: argparse kept the last (plan --compute 1e21 --compute 1e22 planned 1e22 alone)
    ("plan with --compute twice", lambda c: ["plan", "--compute", "1e21", "--compute", "1e22"],
     "scaling plan: error: argument --compute: given twice (1e21, then 1e22); give it once"),
    ("fit with --out twice", lambda c: c.fit_csv(GOOD_POINTS, "--out", c.tmp / "a", "--out", c.tmp / "b"),
     "argument --out: given twice ("),
    ("fit with E under both spellings", lambda c: c.fit_csv(GOOD_POINTS, "--E", "1", "--fixed-e", "1.5"),
     "argument --fixed-e/--E: given twice (1.0, then 1.5); give it once"),
    ("cost with two negative values twice", lambda c: ["cost", "memory", "--params", "-1", "--params", "-2"],
     "argument --params: given twice (-1, then -2); give it once"),
    # --- a count past 1e30 (a fitted point's bound): plan stated N = 1.8e135 for --compute 1e300
    ("plan with compute past 1e30", lambda c: ["plan", "--compute", "1e300"],
     "compute must be at most 1e+30 FLOPs, got 1e+300: past it a count is a unit slip"),
    ("plan of a fit with compute past 1e30", lambda c: ["plan", "--fit", edited_fit(c, lambda f: None),
                                                        "--compute", "1e31"], "compute must be at most 1e+30 FLOPs"),
    ("cost inference-aware past 1e30", lambda c: ["cost", "inference-aware", "--compute", "1e300"],
     "compute must be at most 1e+30 FLOPs"),     # was: 'target loss must be above E = 1.69, got 1.69'
    ("cost of a model of 1e40 tokens", lambda c: ["cost", "train", "--model", "m:7e9:1e40", "--flops-per-gpu", "4e14"],
     "--model m: D must be at most 1e+30, got 1e+40"),
    ("plan with compute '1e'", lambda c: ["plan", "--compute", "1e"], "got '1e' (not a number)"),
    ("plan with compute nan", lambda c: ["plan", "--compute", "nan"], "must be a positive, finite number, got 'nan'"),
    ("plan with zero compute", lambda c: ["plan", "--compute", "0"], "must be a positive, finite number, got '0'"),
    ("fit with a billion resamples", lambda c: c.fit_csv(GOOD_POINTS, "--bootstrap", "1000000000"),
     "--bootstrap must be at most 100,000"),
    ("fit with E above every loss", lambda c: c.fit_csv(GOOD_POINTS, "--fixed-E", "100"),
     "fixed E = 100 must be below the lowest loss observed"),
    ("fit with a negative delta", lambda c: c.fit_csv(GOOD_POINTS, "--delta", "-1"), "--delta must be a positive"),
    ("fit dropping every point", lambda c: c.fit_csv(GOOD_POINTS, "--drop-highest-loss", "6"),
     "would drop all 6 remaining points"),
    ("fit of an unknown dataset", lambda c: ["fit", "--dataset", "gopher"], "unknown dataset 'gopher'"),
    ("fit output inside a file", lambda c: c.write("file", "x") or
     c.fit_csv(GOOD_POINTS, "--out", c.tmp / "file" / "fit"), "is not a folder"),
    # a malformed command line: argparse's error in one line, not its whole usage first
    ("fit with an unknown form", lambda c: c.fit_csv(GOOD_POINTS, "--form", "kaplann"),
     "argument --form: invalid choice: 'kaplann' (choose from 'chinchilla'"),
    ("fit with a negative E prior read as a flag", lambda c: c.fit_csv(GOOD_POINTS, "--E-prior", "-1,0.1"),
     "argument --E-prior: expected one argument (a value that begins with '-' goes as --flag=VALUE)"),
    ("fit with text for the reference compute", lambda c: c.fit_csv(GOOD_POINTS, "--reference-compute", "lots"),
     "argument --reference-compute: invalid float value: 'lots'; see `scaling fit --help`"),
    ("cost inference without its numbers", lambda c: ["cost", "inference"],
     "scaling cost inference: error: the following arguments are required: --params"),
    # the options of the law, each given once and whole (a second --form was taken silently)
    ("fit with two forms", lambda c: c.fit_csv(GOOD_POINTS, "--form", "kaplan", "--form", "farseer"),
     "argument --form: given twice (kaplan, then farseer); give it once"),
    ("fit with two values of E", lambda c: c.fit_csv(GOOD_POINTS, "--E", "1", "--E", "1.5"),
     "given twice (1.0, then 1.5); give it once"),
    ("fit with a negative SD in the E prior", lambda c: c.fit_csv(GOOD_POINTS, "--E-prior", "1,-0.1"),
     "--E-prior's SD must be a positive, finite number; got -0.1"),
    # an SD past the whole range of E (0 to the lowest loss, 7.976 here) said nothing, yet was reported
    # as holding E, and each resample drew its prior's mean from N(1, 1e300)
    ("fit with an SD of 1e300 in the E prior", lambda c: c.fit_csv(GOOD_POINTS, "--E-prior", "1,1e300"),
     "the prior's standard deviation for E, 1e+300, is wider than the whole range E can take, 0 to the lowest "
     "loss observed, 7.976: it says nothing about E; give one of at most 7.976, or no prior to leave E free "
     "(--E-prior)"),
    ("fit with an SD just past the lowest loss", lambda c: c.fit_csv(GOOD_POINTS, "--E-prior", "1,7.98"),
     "the prior's standard deviation for E, 7.98, is wider than the whole range E can take"),
    ("fit with an infinite SD in the E prior", lambda c: c.fit_csv(GOOD_POINTS, "--E-prior", "1,inf"),
     "--E-prior's SD must be a positive, finite number; got inf"),
    ("fit with a NaN SD in the E prior", lambda c: c.fit_csv(GOOD_POINTS, "--E-prior", "1,nan"),
     "--E-prior's SD must be a positive, finite number; got nan"),
    ("fit with a zero SD in the E prior", lambda c: c.fit_csv(GOOD_POINTS, "--E-prior", "1,0"),
     "--E-prior's SD must be a positive, finite number; got 0.0"),
    ("fit with a zero mean in the E prior", lambda c: c.fit_csv(GOOD_POINTS, "--E-prior", "0,0.1"),
     "--E-prior's MEAN must be a positive, finite number; got 0.0"),
    ("fit with an E prior's mean above the lowest loss", lambda c: c.fit_csv(GOOD_POINTS, "--E-prior", "9,0.1"),
     "the prior's mean for E, 9, must be below the lowest loss observed, 7.98"),
    ("fit with an E prior of one number", lambda c: c.fit_csv(GOOD_POINTS, "--E-prior", "1.7"),
     "--E-prior takes MEAN,SD (two numbers, e.g. 1.7,0.05); got '1.7'"),
    ("fit with two E priors", lambda c: c.fit_csv(GOOD_POINTS, "--E-prior", "1,0.1", "--E-prior", "1,0.2"),
     "argument --E-prior: given twice (1,0.1, then 1,0.2); give it once"),
    ("fit with a form its points cannot determine", lambda c: c.fit_csv(GOOD_POINTS, "--form", "farseer"),
     "6 point(s) cannot determine the farseer form's 6 constants, which predictions and plans would use; choose "
     "another form (--form)"),
    ("fit CSV naming a column twice", lambda c: c.fit_csv(GOOD_POINTS.replace("loss\n", "loss,loss\n", 1)
                                                          .replace("\n", ",9\n").replace("loss,9", "loss")),
     "points.csv: the column 'loss' appears twice in the header"),
    # --- a fit.json of an older version or edited by hand, read by plan, compare and cost
    ("plan with a fit whose form has no forms", lambda c: ["plan", "--compute", "1e21", "--fit", edited_fit(
        c, lambda f: f.update(form="kaplan") or f.pop("forms"), "--forms")],
     "fit.json: 'form' is 'kaplan' but the file has no 'forms'"),
    ("plan with a fit whose form is not among its forms", lambda c: ["plan", "--compute", "1e21", "--fit", edited_fit(
        c, lambda f: f.update(form="kaplan") or f["forms"].update(
            entries=[e for e in f["forms"]["entries"] if e["name"] != "kaplan"]), "--forms")],
     "fit.json: 'form' is 'kaplan' but 'forms' has no entry of that name (its entries: chinchilla, tied"),
    ("plan with a form's constants edited", lambda c: ["plan", "--compute", "1e21", "--fit", edited_fit(
        c, lambda f: kaplan_entry(f, params={"alpha_N": 0.1}), "--forms")],
     "'forms.entries[2]': the kaplan form's 'params' must be N_c, D_c, alpha_N, alpha_D; got alpha_N"),
    ("compare a fit whose backtest is text", lambda c: ["compare", edited_fit(c, lambda f: f.update(backtest="yes"))],
     "fit.json: 'backtest' must be a JSON object {...}, got 'yes'"),
    ("cost of a fit that plans with the kaplan form", lambda c: ["cost", "rules", "--compute", "1e21", "--fit",
                                                                edited_fit(c, lambda f: None, "--form", "kaplan")],
     "`scaling cost` needs a law of the Chinchilla form, E + A/N^alpha + B/D^beta; the fit "),
    ("plan with a fit of a flat table", lambda c: ["plan", "--compute", "1e21", "--fit",
                                                  edited_fit(c, lambda f: None, points=FLAT_POINTS)],
     "the law's optimum at C = 1e+21 falls at N = 4.61e+183, D = 3.62e-164: no model (alpha 0.00128, beta 0.000592"),
    # --- import of a table with the wrong columns
    ("import CSV naming a column twice", lambda c: c.write("log.csv", "run,N,N,D,loss\nr1,1e6,2e6,1e8,3\n") or
     ["import", "csv", c.tmp / "log.csv", "--runs-dir", c.tmp / "imported", "--loss", "loss"],
     "log.csv: the column 'N' appears twice in the header"),
    ("import CSV of no rows", lambda c: c.write("log.csv", "run,N,D,loss\n") or
     ["import", "csv", c.tmp / "log.csv", "--runs-dir", c.tmp / "imported"], "log.csv holds no csv runs"),
    ("import CSV without its run column", lambda c: c.write("log.csv", "N,D,loss\n1e6,1e8,3\n") or
     ["import", "csv", c.tmp / "log.csv", "--runs-dir", c.tmp / "imported"],
     "no run column 'run or run_id or name'; columns: N, D, loss: name the column of run names as the run key, "
     "or fit a table of final losses as a table, without importing it (--run)"),
    # --- design: a scatter of 1e300 overflowed every simulated loss (two lines, one a numpy warning);
    # 1e8 simulated sweeps, each a full fit, ran for days
    ("design with a scatter of 1e300", lambda c: ["design", c.config(), "--noise", "1e300"],
     "--noise is a final loss's relative scatter (0.01: 1%), at most 1; got 1e300"),
    ("design with 1e8 simulated sweeps", lambda c: ["design", c.config(), "--sims", "100000000"],
     "--sims must be a whole number >= 1 and <= 1,000; got 100000000"),
    # --- an output folder that holds the input: the input was replaced or removed
    ("fit output over the table it fits", lambda c: c.write("fit.points.csv", GOOD_POINTS) or
     ["fit", "--csv", c.tmp / "fit.points.csv", "--bootstrap", "0", "--out", c.tmp],
     "would overwrite the table being fitted"),
    ("fit output into the run store", lambda c: ["fit", c.store, "--bootstrap", "0", "--out", c.store],
     "is the run store itself: a fit goes in a folder of its own"),
    ("report into the folder of the fit it reports", lambda c: ["report", (f := edited_fit(c, lambda f: None)).parent,
                                                                "--out", f.parent],
     "holds fit.json, not the report's (no report.md or report.html beside it)"),   # was: replaced, fit.json and all
    ("report into the run store it reports", lambda c: ["report", c.store, "--bootstrap", "0", "--out", c.store],
     "holds a run store: the report goes in a folder of its own"),
    # --- report: its output folder checked before the work
    ("report output inside a file", lambda c: c.write("file", "x") or
     ["report", c.store, "--bootstrap", "0", "--out", c.tmp / "file" / "report"], "cannot be made: "),
    # --- compare and plan
    ("compare a missing fit", lambda c: ["compare", c.tmp / "fit.json"], "does not exist"),
    ("compare a fit that is not JSON", lambda c: c.write("fit.json", "{") or ["compare", c.tmp / "fit.json"],
     "is not valid JSON"),
    ("compare a JSON that is no fit", lambda c: c.write("fit.json", '{"kind": "report"}') or
     ["compare", c.tmp / "fit.json"], "is not a fit.json"),
    ("plan with text for compute", lambda c: ["plan", "--compute", "lots"], "got 'lots' (not a number)"),
    ("plan with negative compute", lambda c: ["plan", "--compute=-1e21"], "must be a positive, finite number"),
    ("plan with an unknown law", lambda c: ["plan", "--compute", "1e21", "--law", "moore"], "moore"),
    # --- cost
    ("cost inference-aware with alpha, beta < 0", lambda c: ["cost", "inference-aware", "--fit",
     fit_with_law(c, alpha=-0.1, beta=-0.2), "--compute", "1e21", "--inference-tokens", "0"],
     "has alpha = -0.1, beta = -0.2; a compute-optimal allocation needs A, B, alpha and beta positive"),
    ("cost inference-aware with alpha = beta = 0", lambda c: ["cost", "inference-aware", "--fit",
     fit_with_law(c, alpha=0, beta=0), "--loss", "3", "--inference-tokens", "0"], "has alpha = 0, beta = 0"),
    ("cost of a negative model", lambda c: ["cost", "train", "--model", "m:-7e9:1e12", "--flops-per-gpu", "4e14"],
     "must be"),
    ("cost with MFU above 1", lambda c: ["cost", "train", "--model", "m:7e9:1e12", "--gpu", "h100", "--mfu", "1.5"],
     "MFU must be a fraction in (0, 1]"),
    ("cost with no GPUs", lambda c: ["cost", "train", "--model", "m:7e9:1e12", "--flops-per-gpu", "4e14",
                                     "--gpus", "0"], "number of GPUs must be a positive whole number"),
    ("cost with a negative price", lambda c: ["cost", "train", "--model", "m:7e9:1e12", "--flops-per-gpu", "4e14",
                                              "--price", "-3"], "price per GPU-hour must be a positive"),
    ("cost with infinite tokens", lambda c: ["cost", "train", "--model", "m:7e9:inf", "--flops-per-gpu", "4e14"],
     "must be"),
    ("cost with a malformed model", lambda c: ["cost", "train", "--model", "7e9", "--flops-per-gpu", "4e14"],
     "NAME:N:D"),
]


def tree(folder: Path) -> dict:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture
def case(tmp_path, micro_sweep, cache_dir):
    _, result = micro_sweep
    shutil.copytree(cache_dir, tmp_path / "cache")
    shutil.copytree(result.sweep_dir, tmp_path / "runs" / "micro",
                    ignore=shutil.ignore_patterns(store.LOCK, store.TABLE_LOCK))
    return Case(tmp_path, tmp_path / "cache", tmp_path / "runs" / "micro", result.sweep_dir)


@pytest.mark.parametrize("setup, expected", [pytest.param(s, e, id=name) for name, s, e in CASES])
def test_bad_input_exits_2_naming_the_problem_and_changes_nothing(case, setup, expected, capsys):
    argv = [str(a) for a in setup(case)]
    before = tree(case.tmp)
    store_before = set(tree(case.runs))
    try:
        code = main(argv)
    except SystemExit as exc:          # argparse's own refusal of a malformed command line
        code = exc.code
    out, err = capsys.readouterr()
    assert code == 2, (out, err)
    assert expected in err and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert "Warning" not in err and len(err) < 3000, err[:3000]   # no numpy warnings, no echo of a huge value
    after = tree(case.tmp)
    assert {k: after.get(k) for k in before} == before   # nothing overwritten or deleted
    assert set(tree(case.runs)) == store_before           # nothing new in the run store


def test_debug_shows_the_traceback(tmp_path):
    plain = subprocess.run([sys.executable, "-m", "scaling", "runs", tmp_path / "nowhere"],
                           capture_output=True, text=True)
    debug = subprocess.run([sys.executable, "-m", "scaling", "--debug", "runs", tmp_path / "nowhere"],
                           capture_output=True, text=True)
    assert plain.returncode == 2 and "Traceback" not in plain.stderr and "no run store at" in plain.stderr
    assert "Traceback" in debug.stderr and "UsageError: no run store at" in debug.stderr
