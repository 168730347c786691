"""bench/bench_backtest.py's tables: every CSV in bench/data/backtest belongs to exactly one group of
HALVES (a table added without a group would never be run; one in two groups would be seen twice),
and each reads through the bench's own loader into positive, finite runs. Reading only: no fit is
made here (the "fresh2" and "fresh3" groups are run-once tests)."""

from __future__ import annotations

import importlib.util
from collections import Counter
from pathlib import Path
from types import ModuleType

import numpy as np

SCRIPT = Path(__file__).parents[1] / "bench" / "bench_backtest.py"


def _bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_backtest", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_table_is_in_exactly_one_group_and_reads() -> None:
    bench = _bench()
    tables = {p.stem for p in bench.DATA.glob("*.csv")}
    grouped = Counter(name for names in bench.HALVES.values() for name in names)
    assert set(grouped) == tables
    assert max(grouped.values()) == 1
    for name in sorted(tables):
        data = bench.load(name)
        values = np.concatenate([data.n, data.d, data.loss])
        assert len(data.n) >= 15 and np.all(np.isfinite(values)) and np.all(values > 0), name


# The run-once group: each table's runs and model sizes as extracted, and whether it has IsoFLOP budgets.
FRESH3 = {"marin_optsweep_adamw": (18, 4, False), "marin_optsweep_muon": (18, 4, False),
          "oellm_dense": (51, 6, False), "pile_scaling_neox": (16, 4, False)}


def test_fresh3_tables_are_as_extracted_and_documented() -> None:
    """Each "fresh3" table has its runs, one row per (N, D), at least four sizes, compute spanning
    the 30x cut, and a provenance row in the data README. Reading only: nothing is fitted."""
    bench = _bench()
    assert bench.HALVES["fresh3"] == tuple(FRESH3)
    readme = (bench.DATA / "README.md").read_text()
    for name, (runs, sizes, has_budgets) in FRESH3.items():
        data = bench.load(name)
        pairs = set(zip(data.n.tolist(), data.d.tolist(), strict=True))
        assert len(data.n) == runs and len(pairs) == runs, name
        assert len(np.unique(data.n)) == sizes, name
        assert (data.budgets is not None) == has_budgets, name
        assert data.compute.max() / data.compute.min() >= 30, name
        assert np.all((data.loss > 1) & (data.loss < 10)), name
        assert f"| {name}.csv |" in readme, name
