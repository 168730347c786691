"""Issue 29, item 8: names a later command refuses, a token cache that could not recover, folders
that ignored the umask, messages naming flags the command lacks, and outputs found unwritable only
after the training.

Each test runs the real command (through `scaling.cli.main`) or the real library function on
real files; none mocks this package's code.
"""

import argparse
import os
import re
import shutil
import stat
from pathlib import Path

import numpy as np
import pytest
import yaml

from scaling.cli import build_parser, main
from scaling.config import parse_config
from scaling.data.tokens import prepare_tokens
from scaling.errors import UsageError
from scaling.laws import analysis
from scaling.laws.design import simulate
from scaling.laws.forms.law import Law
from scaling.laws.results.fit_file import write_fit
from scaling.tuning.shapes import tuned_config
from tests.conftest import MICRO, micro_config
from tests.test_hardening import TINY, refused

# A law whose optimum at C = 5e9 lies among the micro family's sizes (as in tests/validate).
LAW = Law(E=2.0, A=80.0, B=128.0, alpha=0.4, beta=0.4)
TUNE = ["--lrs", "3e-3,1e-2,3e-2", "--tokens", "256"]


def write_config(folder: Path, name: str = "micro", file: str = "micro.yaml") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / file).write_text(yaml.safe_dump({**MICRO, "name": name}))
    return folder / file


@pytest.fixture(scope="module")
def known_fit(tmp_path_factory) -> Path:
    runs = simulate.isoflop_grid(np.geomspace(5e8, 4e9, 4), LAW, per_budget=5, span=4.0)
    fit = analysis.fit_data(simulate.simulate(LAW, runs, noise=0.005, seed=0), bootstrap=0)
    return write_fit(tmp_path_factory.mktemp("fit") / "fit", fit)


# --------------------------------------------------------------------------------------------
# A name the derived sweeps and configs can carry


def test_tune_refuses_up_front_a_name_its_tuned_config_could_not_carry(tmp_path, capsys):
    # 95 characters: `<name>-tune` fits in 100, `<name>-tuned` (the config tune writes) does not.
    config = write_config(tmp_path, name="n" * 95)
    refused(["tune", config, *TUNE, "--runs-dir", tmp_path / "runs", "--out", tmp_path / "o"], capsys,
            "at most 94 characters")
    assert not (tmp_path / "runs").exists() and not (tmp_path / "o").exists()
    assert main(["tune", str(write_config(tmp_path, name="n" * 94)), *TUNE, "--dry-run"]) == 0
    assert parse_config(tuned_config({**MICRO, "name": "n" * 94}, [])).name == "n" * 94 + "-tuned"


def test_tune_budgets_refuses_up_front_a_name_its_sweep_could_not_carry(tmp_path, capsys):
    config = write_config(tmp_path, name="b" * 88)     # `<name>-tune-budgets`: 101 characters
    for dry in ([], ["--dry-run"]):
        refused(["tune", config, "--budgets", "--runs-dir", tmp_path / "runs", "--out", tmp_path / "o", *dry], capsys,
                "at most 87 characters")
    assert not (tmp_path / "runs").exists() and not (tmp_path / "o").exists()


def test_validate_refuses_a_name_its_validation_sweep_could_not_carry(known_fit, tmp_path, capsys):
    refused(["validate", known_fit, "--compute", "5e9", "--dry-run", "--config",
             write_config(tmp_path, name="v" * 92)], capsys, "at most 91 characters")


# --------------------------------------------------------------------------------------------
# The token cache


def test_a_cache_folder_without_meta_json_is_rebuilt(tmp_path):
    cache = prepare_tokens(micro_config(), tmp_path)
    (cache.path / "meta.json").unlink()
    again = prepare_tokens(micro_config(), tmp_path)
    assert again.path == cache.path and again.meta == cache.meta
    assert np.array_equal(again.train_tokens(), cache.train_tokens())
    assert [p.name for p in cache.path.parent.iterdir() if p.is_dir()] == [cache.path.name]  # no temp folder


def test_a_file_where_the_cache_folder_belongs_is_refused_naming_it(tmp_path):
    cache = prepare_tokens(micro_config(), tmp_path)
    shutil.rmtree(cache.path)
    cache.path.write_text("not a cache")
    with pytest.raises(UsageError, match=re.escape(f"{cache.path} is not a token cache folder")):
        prepare_tokens(micro_config(), tmp_path)


def test_a_full_disk_while_tokenizing_names_the_cache_folder(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("SCALING_FAULT", "oserror_at=rename:tokens:1,errno=ENOSPC")
    assert main(["sweep", str(write_config(tmp_path)), "--runs-dir", str(tmp_path / "runs"),
                 "--cache-dir", str(tmp_path / "cache")]) == 2
    err = capsys.readouterr().err
    assert f"No space left on device: {tmp_path / 'cache' / 'tokens'}/" in err, err
    assert [p for p in (tmp_path / "cache" / "tokens").iterdir() if p.is_dir()] == []   # no half cache left


@pytest.mark.parametrize("mask", [0o022, 0o002, 0o077])
def test_cache_folders_follow_the_umask(tmp_path, mask):
    old = os.umask(mask)
    try:
        cache = prepare_tokens(micro_config(), tmp_path)
    finally:
        os.umask(old)
    for folder in (cache.path, cache.path.parent):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o777 & ~mask, folder


# --------------------------------------------------------------------------------------------
# Messages name the flags of the command that prints them


def command_flags(argv) -> set[str]:
    """The --flags of the (sub)command `argv` runs."""
    parser = build_parser()
    for word in argv:
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if not subs or word not in subs[0].choices:
            break
        parser = subs[0].choices[word]
    return {o for a in parser._actions for o in a.option_strings if o.startswith("--")}


def named_flags(text: str) -> set[str]:
    return set(re.findall(r"(?<![\w-])--[a-zA-Z][\w-]*", text))


@pytest.mark.parametrize("argv", [
    ["design", "--fit", "FIT", "--law", "chinchilla", TINY],
    ["design", "--law", "kaplan", TINY],
    ["plan", "--fit", "FIT", "--law", "chinchilla", "--compute", "1e21"],
    ["cost", "rules", "--law", "kaplan", "--compute", "1e21"],
    ["cost", "inference-aware", "--fit", "FIT", "--law", "chinchilla", "--loss", "3", "--inference-tokens", "0"],
])
def test_a_refusal_names_only_flags_its_command_has(known_fit, capsys, argv):
    argv = [str(known_fit) if a == "FIT" else str(a) for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert named_flags(err) and named_flags(err) <= command_flags(argv), err


def test_designs_default_prior_names_designs_flag(capsys):
    assert main(["design", str(TINY), "--sims", "1", "--bootstrap", "10"]) == 0
    out = capsys.readouterr().out
    assert "--fit FIT" in out and named_flags(out) <= command_flags(["design"]), out


# --------------------------------------------------------------------------------------------
# The output location checked before any training


def test_tune_refuses_an_out_it_cannot_write_before_training(tmp_path, capsys):
    config = write_config(tmp_path)
    (tmp_path / "o").write_text("a file, not a folder")
    refused(["tune", config, *TUNE, "--runs-dir", tmp_path / "runs", "--out", tmp_path / "o"], capsys,
            f"{tmp_path / 'o'} is not a folder")
    assert not (tmp_path / "runs").exists()


def test_tune_budgets_checks_its_output_before_training(tmp_path, capsys):
    config = write_config(tmp_path)
    (tmp_path / "o").write_text("a file, not a folder")
    refused(["tune", config, "--budgets", "--runs-dir", tmp_path / "runs", "--out", tmp_path / "o"], capsys,
            f"{tmp_path / 'o'} is not a folder")
    assert not (tmp_path / "runs").exists()


def test_tune_never_replaces_its_input_config(tmp_path, capsys):
    # A config kept where tune writes its tuned config, under the very name tune would give it.
    config = write_config(tmp_path / "o", file="micro-tuned.yaml")
    before = config.read_bytes()
    for force in ([], ["--force"]):
        refused(["tune", config, *TUNE, "--runs-dir", tmp_path / "runs", "--out", tmp_path / "o", *force], capsys,
                "would replace its input config")
    assert config.read_bytes() == before and not (tmp_path / "runs").exists()


def test_tune_refuses_to_replace_a_users_file_before_training(tmp_path, capsys):
    config = write_config(tmp_path)
    mine = tmp_path / "o" / "micro-tuned.yaml"
    mine.parent.mkdir()
    mine.write_text("# my own tuned config\nname: micro-tuned\n")
    refused(["tune", config, *TUNE, "--runs-dir", tmp_path / "runs", "--out", mine.parent], capsys,
            f"{mine} exists and was not written by `scaling tune`; force to replace it, or give another output "
            "folder (--force, --out)")
    assert mine.read_text().startswith("# my own") and not (tmp_path / "runs").exists()


@pytest.mark.parametrize("blocker", ["out", "validate.json"])
def test_validate_refuses_an_output_it_cannot_write_before_training(known_fit, tmp_path, capsys, blocker):
    config = write_config(tmp_path)
    if blocker == "out":
        (tmp_path / "o").write_text("a file, not a folder")
        expected = f"{tmp_path / 'o'} is not a folder"
    else:
        (tmp_path / "o" / "validate.json").mkdir(parents=True)
        expected = f"{tmp_path / 'o' / 'validate.json'} is a folder"
    refused(["validate", known_fit, "--compute", "5e9", "--config", config, "--runs-dir", tmp_path / "runs",
             "--cache-dir", tmp_path / "cache", "--out", tmp_path / "o"], capsys, expected)
    assert not (tmp_path / "runs").exists()


def test_validate_never_writes_over_its_fit(known_fit, tmp_path, capsys):
    before = known_fit.read_bytes()
    refused(["validate", known_fit, "--compute", "5e9", "--config", write_config(tmp_path), "--runs-dir",
             tmp_path / "runs", "--cache-dir", tmp_path / "cache", "--out", known_fit], capsys,
            "would replace the fit it validates")
    assert known_fit.read_bytes() == before and not (tmp_path / "runs").exists()
