"""The map of the code says what the code is: docs/architecture.md's share of laws/ and its one
upward import, docs/diagnostics.md's homes of the thresholds, and the test files the package's
docstrings cite. Each reads the code and the page, so a change to either that leaves the other
behind fails here."""

import importlib
import re
from pathlib import Path

import pytest

from tests.test_layers import DELIBERATE

ROOT = Path(__file__).resolve().parents[1]
ARCHITECTURE = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
DIAGNOSTICS = (ROOT / "docs" / "diagnostics.md").read_text(encoding="utf-8")


def lines(folder: Path) -> int:
    return sum(len(p.read_text(encoding="utf-8").splitlines()) for p in folder.rglob("*.py"))


def test_the_share_of_laws_is_the_codes():
    stated = re.search(r"`laws/` holds (\d+)% of the code", ARCHITECTURE)
    assert stated, "docs/architecture.md no longer states laws/' share of the code"
    share = 100 * lines(ROOT / "scaling" / "laws") / lines(ROOT / "scaling")
    page = int(stated.group(1))
    assert abs(share - page) <= 5, f"laws/ is {share:.0f}% of scaling/, the page says {page}%"


def test_the_upward_imports_the_page_names_are_the_deliberate_ones():
    # "`A` imports `B`" in the layer rule: exactly the exceptions tests/test_layers.py allows.
    named = set(re.findall(r"`(scaling\.[\w.]+)` imports `(scaling\.[\w.]+)`", ARCHITECTURE))
    assert named == set(DELIBERATE)


def threshold_homes() -> list[tuple[str, list[str]]]:
    """(module, [constant, ...]) of each row of docs/diagnostics.md's table of where thresholds live."""
    rows = re.findall(r"^\| `(scaling\.laws\.checks\.\w+)` \| ([^|]+) \|", DIAGNOSTICS, flags=re.M)
    return [(module, re.findall(r"`(\w+)`", names)) for module, names in rows]


def test_the_thresholds_live_where_the_page_says():
    homes = threshold_homes()
    assert len(homes) >= 2 and all(names for _, names in homes)
    for module, names in homes:
        missing = [n for n in names if not hasattr(importlib.import_module(module), n)]
        assert not missing, f"{module} has no {missing}"


@pytest.mark.parametrize("folder", ["scaling", "bench"])
def test_every_test_file_a_docstring_cites_exists(folder):
    cited = {m for p in (ROOT / folder).rglob("*.py") for m in re.findall(r"tests/[\w/]+\.py", p.read_text())}
    assert cited and not [c for c in sorted(cited) if not (ROOT / c).exists()]
