"""Sweep configs: accepted spellings, and errors that name the key, the value and what is allowed."""

from pathlib import Path

import pytest
import yaml

from scaling.config import load_config, parse_config, run_lr
from scaling.errors import UsageError

BASE = {"name": "t", "grid": {"models": [{"d_model": 64, "n_layers": 2, "n_heads": 2}], "tokens": [1000]}}


def with_(path: str, value):
    """BASE with one key replaced, by dotted path ('grid.models[0].n_heads' style via lists)."""
    data = yaml.safe_load(yaml.safe_dump(BASE))
    node, *keys = [data, *path.split(".")]
    for key in keys[:-1]:
        node = node.setdefault(key, {})
    node[keys[-1]] = value
    return data


def test_counts_accept_scientific_and_underscores():
    cfg = parse_config(yaml.safe_load("name: t\ngrid: {models: [{d_model: 8, n_layers: 1, n_heads: 1}], "
                                      "tokens: [1e6, 1_000_000, 2.5e5, 1.0e6]}"))
    assert cfg.grid.tokens == [1_000_000, 1_000_000, 250_000, 1_000_000]


@pytest.mark.parametrize("path, value, expected", [
    ("grid.models", [{"d_model": 64, "n_layers": 2, "n_heads": 3}], "d_model 64 is not divisible by n_heads 3"),
    ("grid.models", [], "grid.models: List should have at least 1 item"),
    ("grid.tokens", [-5], "grid.tokens[0]: Input should be greater than 0"),
    ("grid.tokens", ["lots"], "grid.tokens[0]"),
    ("grid.tokens", [1.5], "whole number"),
    ("train.lr", -1, "train.lr"),
    ("train.schedule", "step", "train.schedule"),
    ("train.batch_tokens", 1000, "not a multiple of model.context_length"),
    ("corpus.source", "web", "corpus.source"),
    ("corpus.source", "files", "needs corpus.paths"),
    ("tokenizer.vocab_size", 100, "tokenizer.vocab_size"),
    ("model.bogus", 1, "model.bogus: unknown key"),
    ("name", "../escape", "name"),
])
def test_bad_values_name_the_key(path, value, expected):
    with pytest.raises(UsageError) as err:
        parse_config(with_(path, value))
    assert expected in str(err.value)


def test_load_config_errors(tmp_path):
    missing = tmp_path / "nope.yaml"
    with pytest.raises(UsageError, match="not found"):
        load_config(missing)
    broken = tmp_path / "broken.yaml"
    broken.write_text("name: [unclosed\n")
    with pytest.raises(UsageError, match="not valid YAML"):
        load_config(broken)
    listy = tmp_path / "list.yaml"
    listy.write_text("- a\n- b\n")
    with pytest.raises(UsageError, match="mapping"):
        load_config(listy)


def test_shipped_configs_load():
    configs = Path(__file__).parent.parent / "configs"
    for path in sorted(configs.glob("*.yaml")):
        cfg = load_config(path)
        design = cfg.grid.isoflop.budgets if cfg.grid.isoflop is not None else cfg.grid.tokens
        assert len(cfg.grid.models) >= 3 and len(design) >= 3, path.name   # enough sizes and budgets to fit
    assert load_config(configs / "tiny.yaml").grid.isoflop is not None       # the demo is an IsoFLOP design


def test_lr_rule():
    cfg = parse_config(with_("train.lr", 0.02))
    shape = cfg.grid.models[0]
    assert run_lr(cfg.train, shape) == pytest.approx(0.02 * 64 / 64)
    wide = shape.model_copy(update={"d_model": 128})
    assert run_lr(cfg.train, wide) == pytest.approx(0.01)
    pinned = shape.model_copy(update={"lr": 3e-3})
    assert run_lr(cfg.train, pinned) == 3e-3
