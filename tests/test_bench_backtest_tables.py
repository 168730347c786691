"""bench/bench_backtest.py's tables: every CSV in bench/data/backtest belongs to exactly one group of
HALVES (a table added without a group would never be run; one in two groups would be seen twice),
and each reads through the bench's own loader into positive, finite runs; each has its source, and
`--loso`'s rescoring of a dumped split (bench_backtest_loso.py) reproduces the fit (one split
fitted, of a table every group of which has now been seen)."""

from __future__ import annotations

import importlib.util
from collections import Counter
from pathlib import Path
from types import ModuleType

import numpy as np

BENCH = Path(__file__).parents[1] / "bench"


def _script(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _bench() -> ModuleType:
    return _script("bench_backtest")


def _loso() -> ModuleType:
    """bench_backtest_loso.py, `--loso`'s script (it imports bench_backtest's tables)."""
    return _script("bench_backtest_loso")


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


# The run-once groups: each table's runs and model sizes as extracted, and whether it has IsoFLOP budgets.
RUN_ONCE = {"fresh3": {"marin_optsweep_adamw": (18, 4, False), "marin_optsweep_muon": (18, 4, False),
                       "oellm_dense": (51, 6, False), "pile_scaling_neox": (16, 4, False)},
            "fresh4": {"marin_moe_lrsweep": (26, 6, False), "olmo_core_gdn_ladder": (16, 6, False)},
            "fresh5": {"olmo_amberish_ladder": (20, 5, False), "olmoe_ladder_moe_a0": (17, 4, False)}}


def test_run_once_tables_are_as_extracted_and_documented() -> None:
    """Each run-once table ("fresh3" to "fresh5") has its runs, one row per (N, D), at least four sizes,
    compute spanning the 30x cut, and a provenance row in the data README. Reading only: nothing is
    fitted."""
    bench = _bench()
    readme = (bench.DATA / "README.md").read_text()
    for group, tables in RUN_ONCE.items():
        assert bench.HALVES[group] == tuple(tables), group
    for name, (runs, sizes, has_budgets) in ((k, v) for tables in RUN_ONCE.values() for k, v in tables.items()):
        data = bench.load(name)
        pairs = set(zip(data.n.tolist(), data.d.tolist(), strict=True))
        assert len(data.n) == runs and len(pairs) == runs, name
        assert len(np.unique(data.n)) == sizes, name
        assert (data.budgets is not None) == has_budgets, name
        assert data.compute.max() / data.compute.min() >= 30, name
        assert np.all((data.loss > 1) & (data.loss < 10)), name
        assert f"| {name}.csv |" in readme, name


def test_every_table_has_its_source() -> None:
    """Leave-one-source-out leaves a source's tables out together: Marin 2026's three corpora are one
    source, the Marin optimizer study (other models, other loss) another, the Marin MoE sweep a third;
    of AI2's four ladders, OLMo 2's and the earlier "amberish" one (the same ladder script and team)
    are one source, OLMo-core's hybrid one and the OLMoE architecture-search one two more; 17 in all."""
    bench, loso = _bench(), _loso()
    names = [name for group in bench.HALVES.values() for name in group]
    sources = {name: loso.source(name) for name in names}
    assert len(set(sources.values())) == 17
    assert sources["olmo_amberish_ladder"] == sources["olmo_ladder"] != sources["olmo_core_gdn_ladder"]
    assert sources["marin_dclm"] == sources["marin_comma"] != sources["marin_optsweep_muon"]
    assert len({sources["marin_dclm"], sources["marin_optsweep_muon"], sources["marin_moe_lrsweep"]}) == 3
    assert sources["marin_optsweep_adamw"] == sources["marin_optsweep_muon"]
    assert len({sources[n] for n in names if n.startswith("porian_")}) == 1


def test_rescoring_a_dump_reproduces_the_fit_and_moves_only_the_rule() -> None:
    """`--loso` rescores dumped splits with no fit: with the frozen fallback it gives the fit's own
    predictions exactly; with another fallback and no gate, a split whose cuts measured nothing
    (the fallback alone) is moved by exactly that fallback's bias at each run's distance."""
    bench, loso = _bench(), _loso()
    key = "fresh3|oellm_dense|30"
    split = bench.predict_split(bench.load("oellm_dense"), 30.0, "after", bootstrap=20)
    xp = bench.extrapolation
    same = loso.rescore(key, split, xp.PRIOR, xp.WELL_TRAINED_TPP)
    assert [r["center"] for r in same["rows"]] == [r["center"] for r in split["rows"]]
    assert [(r["lo"], r["hi"]) for r in same["rows"]] == [(r["lo"], r["hi"]) for r in split["rows"]]
    assert split["backtest"]["extrapolation"]["n_cuts"] == 0          # 14 runs below the cut: no cut of its own
    moved = loso.rescore(key, split, bench.replace(xp.PRIOR, bias=-0.03), float("inf"))
    for new, old in zip(moved["rows"], split["rows"], strict=True):
        assert old["far"] > 1.0
        assert np.isclose(new["center"], old["law"] * np.exp(-0.03 * old["far"]), rtol=1e-12)
        assert new["center"] < old["center"]


def test_scaled_intervals_report_the_scale_that_holds_the_share_asked(capsys) -> None:
    """`bench_thirty.py --scaled`: 20 runs with one half-width (2%) and errors 0.1%..2.0% all sit inside
    as they are; the scale that holds 95% is the 95th percentile of error / half-width, 0.9525 (numpy's
    linear interpolation between 0.95 and 1.00), and the ratio then 0.9525 x 2% / 1.05% = 1.81."""
    thirty = _script("bench_thirty")
    rows = [{"error": 0.001 * k * (-1) ** k, "half_width": 0.02} for k in range(1, 21)]
    thirty.scaled({"rule": {"dev|x|3": {"rows": rows}}}, unseen=())
    out = capsys.readouterr().out
    assert "3x (20 runs; as is 100%, ratio 1.90): x0.95, ratio 1.81;" in out
