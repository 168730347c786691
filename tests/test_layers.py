"""The package's folders follow the data flow: no module imports a later stage, and no cycles.

Read from the source with `ast`, imports inside functions included (a late import is still a
dependency). The order is docs/architecture.md's.
"""

import ast
import glob
import subprocess
import sys
from pathlib import Path

import pytest

from scaling.sweeps.packing import GPU_DEVICE_FILES

PACKAGE = Path(__file__).resolve().parents[1] / "scaling"

# Each stage may import itself and the stages before it.
STAGES = ("errors", "formats", "reading", "schemas", "config", "runs", "data", "train", "sweeps", "laws", "tuning",
          "cost", "validation", "report", "cli")


# The upward imports the package makes on purpose, each with its reason; any other fails the check.
DELIBERATE: dict[tuple[str, str], str] = {}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _type_checking_only(tree: ast.Module) -> set[int]:
    """ids of the nodes under `if TYPE_CHECKING:`: imports for annotations, never run."""
    return {id(n) for block in ast.walk(tree) if isinstance(block, ast.If)
            and isinstance(block.test, ast.Name) and block.test.id == "TYPE_CHECKING"
            for stmt in block.body for n in ast.walk(stmt)}


def imports(path: Path) -> set[str]:
    """The scaling modules `path` imports (for `from scaling.x import y`, y when it is a module),
    leaving out those under `if TYPE_CHECKING:`, which are never imported at run time."""
    found = set()
    tree = ast.parse(path.read_text())
    skip = _type_checking_only(tree)
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("scaling")}
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("scaling"):
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                is_module = (PACKAGE.parent / (sub.replace(".", "/") + ".py")).exists() or \
                    (PACKAGE.parent / sub.replace(".", "/")).is_dir()
                found.add(sub if is_module else node.module)
    return found


def stage(module: str) -> int | None:
    """Rank of the stage a module belongs to; None for the package root (`scaling`, its __main__)."""
    parts = module.split(".")
    return STAGES.index(parts[1]) if len(parts) > 1 and parts[1] in STAGES else None


def graph() -> dict[str, set[str]]:
    return {module_name(p): imports(p) for p in PACKAGE.rglob("*.py")}


def test_every_module_belongs_to_a_stage():
    loose = [m for m in graph() if stage(m) is None and m not in ("scaling", "scaling.__main__")]
    assert not loose, f"modules outside the stages of the data flow: {loose}"


def test_no_module_imports_a_later_stage():
    later = [(m, i) for m, deps in graph().items() for i in deps
             if stage(m) is not None and stage(i) is not None and stage(i) > stage(m) and (m, i) not in DELIBERATE]
    assert not later, f"imports of a later stage: {later}"


def test_no_stage_reaches_a_later_one_through_the_package_root():
    # `import scaling; scaling.fit_figure(...)` would hide an upward import from the check above: the
    # root re-exports every stage. Named imports from the root (`from scaling import cost`) are seen.
    through_root = [module_name(p) for p in PACKAGE.rglob("*.py") if stage(module_name(p)) is not None
                    and any(isinstance(n, ast.Import) and any(a.name == "scaling" for a in n.names)
                            for n in ast.walk(ast.parse(p.read_text())))]
    assert not through_root, f"stage modules importing the package root: {through_root}"


def test_no_import_cycles():
    # A deliberate upward import runs inside a method, after both modules are loaded: not a cycle at
    # import time, and left out here so that every other cycle still fails.
    edges = {m: {i for i in deps if (m, i) not in DELIBERATE} for m, deps in graph().items()}
    state: dict[str, int] = {}   # 1: on the current path, 2: done
    cycles = []

    def visit(module, path):
        state[module] = 1
        for dep in sorted(edges.get(module, ())):
            if dep not in edges or dep == module:
                continue
            if state.get(dep) == 1:
                cycles.append(path[path.index(dep):] + [dep])
            elif dep not in state:
                visit(dep, path + [dep])
        state[module] = 2

    for module in sorted(edges):
        if module not in state:
            visit(module, [module])
    assert not cycles, f"import cycles: {cycles}"


# laws/ in folders that import one way (docs/architecture.md, "Inside laws/"): a module may import its
# own folder and folders of a lower rank. tasks is a leaf the readers ask for metric names.
LAWS_RANKS = {"tasks": 0, "forms": 0, "fitting": 1, "optimal": 2, "checks": 3, "curves": 3, "repeated": 3,
              "results": 4, "analysis": 5, "design": 6, "api": 6}


def laws_part(module: str) -> str | None:
    parts = module.split(".")
    return parts[2] if parts[:2] == ["scaling", "laws"] and len(parts) > 2 else None


def test_the_laws_folders_import_one_way():
    assert {laws_part(m) for m in graph()} - {None} == set(LAWS_RANKS)     # every folder ranked
    upward = [(m, i) for m, deps in graph().items() for i in deps
              if laws_part(m) and laws_part(i) and laws_part(i) != laws_part(m)
              and LAWS_RANKS[laws_part(i)] >= LAWS_RANKS[laws_part(m)]]
    assert not upward, f"laws/ imports against its folders' order: {upward}"


def test_the_check_sees_a_later_stage_import(tmp_path):
    # The rules above would pass vacuously if `imports` found nothing: it must see these.
    source = tmp_path / "example.py"
    source.write_text("from scaling.laws.fitting import fit\nimport scaling.cost.estimates\n"
                      "def late():\n    from scaling.runs.store import read_runs\n")
    assert imports(source) == {"scaling.laws.fitting.fit", "scaling.cost.estimates", "scaling.runs.store"}


def test_the_check_leaves_out_imports_for_annotations_only(tmp_path):
    source = tmp_path / "example.py"
    source.write_text("from typing import TYPE_CHECKING\nfrom scaling.laws.forms import law\n"
                      "if TYPE_CHECKING:\n    from scaling.laws.results.lawfit import LawFit\n")
    assert imports(source) == {"scaling.laws.forms.law"}


def test_fitting_and_reporting_do_not_load_torch():
    # A notebook that fits, plans or reports, and the report's reading of a validation, stay off the
    # training stack (it takes seconds to import); validation.run and the sweep are what load it.
    code = ("import sys, scaling.laws.analysis, scaling.report.report, scaling.validation.result; "
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def _loads_torch(code: str, cwd=None) -> bool:
    out = subprocess.run([sys.executable, "-c", f"{code}; import sys; print('torch' in sys.modules)"],
                         capture_output=True, text=True, check=True, cwd=cwd)
    return out.stdout.strip().splitlines()[-1] == "True"


def test_planning_does_not_load_torch():
    # The grid, its estimates and a design need the shapes' counts (scaling.train.shape), not the model.
    assert not _loads_torch("import scaling.sweeps.plan, scaling.sweeps.estimates, scaling.tuning.shapes, "
                            "scaling.cli.design")


@pytest.mark.skipif(any(glob.glob(p) for p in GPU_DEVICE_FILES),
                    reason="a GPU device file: device auto asks torch which device the runs would use")
def test_a_dry_run_does_not_load_torch(tmp_path):
    config = PACKAGE.parent / "configs" / "tiny.yaml"
    assert not _loads_torch(f"from scaling.cli import main; main(['sweep', {str(config)!r}, '--dry-run', "
                            f"'--runs-dir', {str(tmp_path / 'runs')!r}, '--cache-dir', {str(tmp_path / 'cache')!r}])")
    assert not (tmp_path / "runs").exists()


# An install without torch (`pip install -e .`, no [train] extra): importing it fails as it would there.
NO_TORCH = '''
import sys
class NoTorch:
    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, NoTorch())
from scaling.cli import main
'''


def test_without_torch_a_table_fits_and_training_says_what_to_install(tmp_path):
    # torch is the [train] extra: a table fits without it, and a command that trains refuses in one line,
    # exit 2, naming the extra to install.
    (tmp_path / "points.csv").write_text("N,D,loss\n" + "".join(
        f"{n},{d},{2 + 1e3 / n ** 0.3 + 1e3 / d ** 0.3}\n" for n in (1e6, 1e7, 1e8) for d in (1e8, 1e9)))
    config = PACKAGE.parent / "configs" / "tiny.yaml"
    code = NO_TORCH + (f"fit = main(['fit', '--csv', {str(tmp_path / 'points.csv')!r}, '--bootstrap', '0', '--out', "
                       f"{str(tmp_path / 'fit')!r}])\n"
                       f"sweep = main(['sweep', {str(config)!r}, '--runs-dir', {str(tmp_path / 'runs')!r}])\n"
                       "print(fit, sweep, 'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "0 2 False", out.stderr
    assert (tmp_path / "fit" / "fit.json").is_file() and not (tmp_path / "runs").exists()
    error = [line for line in out.stderr.splitlines() if "error" in line]
    assert error == ["scaling sweep: error: `scaling sweep` trains models and needs torch, which is not installed: "
                     "pip install -e '.[train]' (or `make install`)"]
