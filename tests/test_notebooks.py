"""notebooks/: each guided notebook runs end to end, shows its figures, and warns of nothing.

Its code cells run in order in one namespace, as a kernel runs them, with the cell tagged
"parameters" replaced by the test's own (as papermill does): a small bootstrap, and the session's
micro sweep, already trained, in place of the notebook's minute of training. No Jupyter needed:
a cell's last expression is shown as IPython's display hook shows it, an image where the object
has a `_repr_png_` (the outputs Jupyter writes: image/png beside text/plain), else its repr; the
warnings are those Python shows by default, with IPython's rule that the notebook's own
DeprecationWarnings show too.
"""

import ast
import json
import subprocess
import warnings
from pathlib import Path

import matplotlib
import matplotlib.pyplot as plt
import yaml

from scaling.config import load_config
from tests.conftest import MICRO, MICRO_RUNS

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
GUIDE = NOTEBOOKS / "scaling.ipynb"
PNG = b"\x89PNG\r\n\x1a\n"


def code_cells(path: Path) -> list[tuple[str, list]]:
    """(source, tags) of each code cell, in order."""
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return [("".join(c["source"]), c.get("metadata", {}).get("tags", [])) for c in cells if c["cell_type"] == "code"]


def shown(value) -> dict:
    """The data of the output Jupyter writes for a cell whose last expression is `value`."""
    data = {"text/plain": repr(value)}
    if callable(getattr(value, "_repr_png_", None)):
        data["image/png"] = value._repr_png_()
    return data


def run_cell(source: str, name: str, namespace: dict) -> dict | None:
    """Run one cell; the output of its last expression (None for a statement, or a None value)."""
    tree = ast.parse(source)
    last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
    exec(compile(tree, name, "exec"), namespace)
    if last is None:
        return None
    value = eval(compile(ast.Expression(last.value), name, "eval"), namespace)
    return None if value is None else shown(value)


def run_notebook(path: Path, parameters: str) -> tuple[dict, list, list]:
    """(namespace, each code cell's output or None, the warnings shown)."""
    matplotlib.use("Agg")
    namespace, outputs = {"__name__": "__main__"}, []
    with warnings.catch_warnings(record=True) as caught:
        warnings.resetwarnings()                        # Python's defaults, as a kernel has them
        warnings.simplefilter("default")
        warnings.filterwarnings("ignore", category=DeprecationWarning)
        warnings.filterwarnings("default", category=DeprecationWarning, module="__main__")
        for i, (source, tags) in enumerate(code_cells(path)):
            source = parameters if "parameters" in tags else source
            outputs.append(run_cell(source, f"{path.name}, code cell {i}", namespace))
    plt.close("all")
    return namespace, outputs, [f"{w.category.__name__}: {w.message} ({w.filename}:{w.lineno})" for w in caught]


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


def test_the_guides_run_store_is_one_git_ignores():
    # Jupyter runs the notebook in notebooks/: its sweep's runs go where git ignores them (the
    # repository's runs/), not into an untracked notebooks/runs/ beside it.
    params = next(source for source, tags in code_cells(GUIDE) if "parameters" in tags)
    defaults: dict = {}
    exec(params, defaults)
    store = NOTEBOOKS / defaults["RUNS_DIR"] / load_config(NOTEBOOKS / defaults["CONFIG"]).name / "runs.csv"
    ignored = subprocess.run(["git", "check-ignore", "-q", "--no-index", str(store)], cwd=NOTEBOOKS)
    assert ignored.returncode == 0, f"{store} is not ignored by git"


def test_the_guide_runs_end_to_end(micro_sweep, tmp_path, capsys):
    cfg, trained = micro_sweep
    config = tmp_path / "micro.yaml"
    config.write_text(yaml.safe_dump(MICRO))
    parameters = f"CONFIG = {str(config)!r}\nRUNS_DIR = {str(trained.sweep_dir.parent)!r}\nBOOTSTRAP = 50\n"
    ns, outputs, warned = run_notebook(GUIDE, parameters)
    f = ns["f"]
    assert round(f.alpha, 4) == 0.3473 and f.verdict == "use with caution"
    assert ns["plan"].intervals.n[0] < ns["plan"].n < ns["plan"].intervals.n[1]
    assert ns["budgets"].n.shape == (4,) and (ns["budgets"].intervals.n[0] < ns["budgets"].n).all()
    assert ns["result"].trained == []            # the store's runs had finished: nothing trained again
    assert ns["mine"].data.n_points == MICRO_RUNS and ns["mine"].verdict is not None
    # Its figures show as images (the fit's and the micro sweep's), none as "<Figure size ...>" alone.
    images = [o["image/png"] for o in outputs if o is not None and "image/png" in o]
    assert len(images) == 2 and all(png.startswith(PNG) for png in images)
    assert not [o for o in outputs if o is not None and o["text/plain"].startswith("<Figure") and "image/png" not in o]
    # And nothing warns: no warning raised, none printed to stderr.
    assert warned == []
    assert "Warning" not in capsys.readouterr().err
