"""notebooks/: each guided notebook runs end to end.

Its code cells run in order in one namespace, as a kernel runs them, with the cell tagged
"parameters" replaced by the test's own (as papermill does): a small bootstrap, and the session's
micro sweep, already trained, in place of the notebook's minute of training. No Jupyter needed.
"""

import json
from pathlib import Path

import matplotlib
import matplotlib.pyplot as plt
import yaml

from scaling.config import load_config
from tests.conftest import MICRO, MICRO_RUNS

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
GUIDE = NOTEBOOKS / "scaling.ipynb"


def code_cells(path: Path) -> list[tuple[str, list]]:
    """(source, tags) of each code cell, in order."""
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return [("".join(c["source"]), c.get("metadata", {}).get("tags", [])) for c in cells if c["cell_type"] == "code"]


def run_notebook(path: Path, parameters: str) -> dict:
    matplotlib.use("Agg")
    namespace = {"__name__": "__main__"}
    for i, (source, tags) in enumerate(code_cells(path)):
        source = parameters if "parameters" in tags else source
        exec(compile(source, f"{path.name}, code cell {i}", "exec"), namespace)
    plt.close("all")
    return namespace


def test_the_notebooks_are_clean_and_parameterised():
    # Committed without outputs, and with one parameters cell whose defaults point at real files.
    for path in NOTEBOOKS.glob("*.ipynb"):
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        assert all(not c.get("outputs") for c in cells if c["cell_type"] == "code"), path
    params = [source for source, tags in code_cells(GUIDE) if "parameters" in tags]
    assert len(params) == 1
    defaults = {}
    exec(params[0], defaults)
    assert load_config(NOTEBOOKS / defaults["CONFIG"]).name == "notebook"


def test_the_guide_runs_end_to_end(micro_sweep, tmp_path):
    cfg, trained = micro_sweep
    config = tmp_path / "micro.yaml"
    config.write_text(yaml.safe_dump(MICRO))
    ns = run_notebook(GUIDE, f"CONFIG = {str(config)!r}\nRUNS_DIR = {str(trained.sweep_dir.parent)!r}\n"
                             "BOOTSTRAP = 50\n")
    f = ns["f"]
    assert round(f.alpha, 4) == 0.3473 and f.verdict == "use with caution"
    assert ns["plan"].intervals.n[0] < ns["plan"].n < ns["plan"].intervals.n[1]
    assert ns["result"].trained == []            # the store's runs had finished: nothing trained again
    assert ns["mine"].data.n_points == MICRO_RUNS and ns["mine"].verdict is not None
