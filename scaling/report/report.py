"""Build a report and write it: the three calls `scaling report` makes.

    inputs = load_inputs("runs/tiny", bootstrap=1000)          # scaling.report.inputs
    report = build_report(inputs)                              # figures, hold-out, the document
    paths = write_report(report, "fits/tiny/report", fmt="md") # report.md, figures/*.png|svg
    report, paths = make_report("runs/tiny", out="fits/tiny/report")   # all three

Same inputs, same bytes: no timestamps, seeded resampling, sorted tables, and figures saved
without dates or random ids (`scaling.report.style.save`). A report of a fit.json refits nothing:
its numbers, resamples and hold-out check are the file's (`scaling.report.inputs`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from scaling.errors import UsageError
from scaling.laws.optimal.allocation import check_allocatable
from scaling.laws.results.fit_file import FILENAME, FIT_SIDE_FILES, write_fit
from scaling.report import beyond, decisions, literature, sections, tasks
from scaling.report.curves import curves_section
from scaling.report.document import FIGURE_DIR
from scaling.report.inputs import Inputs, load_inputs
from scaling.report.page import Report
from scaling.report.style import save
from scaling.runs.outputs import check_replaceable, replace_folder
from scaling.runs.store import write_atomic

FORMATS = ("md", "html")
# A folder holding one of these is a report's: the fit.json in it is the report's own (it fitted
# here). A folder with a fit.json and no report is a fit's, which a report never replaces.
REPORT_FILES = tuple(f"report.{fmt}" for fmt in FORMATS)
FIT_FILES = (FILENAME, *FIT_SIDE_FILES)
WHAT = "the report"
# Decisions first (the verdict, what to train at a few budgets with intervals, whether the
# recommendation held when trained), then the evidence behind them, then the detail.
SECTIONS = (sections.summary, decisions.plan, decisions.validation, sections.left_out, sections.fitted_law,
            sections.diagnostics, sections.holdout_check, beyond.backtest_section, beyond.forms_section,
            decisions.repeated_data, literature.allocation_exponents, literature.published_laws,
            literature.kaplan_laws, curves_section, tasks.task_metrics, sections.sweep, sections.closing)


def build_report(inputs: Inputs, *, holdout_fraction: float | None = None, compute: Sequence[float] = ()) -> Report:
    """Analyses, figures and the document, section by section (nothing is written; see `write_report`).
    holdout_fraction: None for the fit's own hold-out check (fit.json's), else one refitted here.
    A law with no compute-optimal allocation (an exponent <= 0) is refused, as plan and compare
    refuse it: every figure and table of optima would be undefined. compute: budgets (FLOPs, as the fit
    counts them) the plan adds to its own, 1x-30x the largest fitted run."""
    check_allocatable(inputs.fit.law, f"fit {inputs.fit_path or inputs.name}")
    report = Report.start(inputs, holdout_fraction, compute)
    for section in SECTIONS:
        section(report)
    return report


def _check_format(fmt: str) -> None:
    if fmt not in FORMATS:
        raise UsageError(f"the report's format must be one of {', '.join(FORMATS)}; got {fmt!r}")


def write_report(report: Report, out: str | Path, fmt: str = "md") -> list[Path]:
    """Write the figures (PNG and SVG), fit.json when fitted here, and report.md or report.html;
    return the paths, the report last.

    The set is built in a fresh folder beside `out` and swapped in as one unit
    (`scaling.runs.outputs.replace_folder`): a kill or a full disk leaves the old report or the new
    one, never new figures beside old text; a link in the old folder (figures/ to elsewhere) is
    replaced, never written through; two reports into one folder at once leave one of them whole."""
    _check_format(fmt)
    out = Path(out)
    _check_out(report.inputs, out)
    if out.is_file():
        raise UsageError(f"{out} is a file; the report needs a folder")
    owned = (FIGURE_DIR, f"report.{fmt}", *FIT_FILES)

    def build(folder: Path) -> list[str]:
        written, images = [], {}
        for name, fig in report.figures.items():
            written += save(fig, folder / FIGURE_DIR, name)
            images[name] = (folder / FIGURE_DIR / f"{name}.png").read_bytes()
        if report.inputs.fitted_here:
            written.append(write_fit(folder / FILENAME, report.inputs.fit))
        path = folder / f"report.{fmt}"
        write_atomic(path, report.doc.markdown() if fmt == "md" else report.doc.html(report.title, images))
        return [str(p.relative_to(folder)) for p in written + [path]]

    return [out / name for name in replace_folder(out, build, owned, what=WHAT, marks=REPORT_FILES,
                                                             shared=FIT_FILES)]


def make_report(source: str | Path | None = None, *, out: str | Path, fmt: str = "md", dataset: str | None = None,
                fit: str | Path | None = None, bootstrap: int | None = None, seed: int = 0,
                holdout_fraction: float | None = None, drop_highest_loss: int = 0, param_convention: str | None = None,
                curves: bool = False, compute: Sequence[float] = ()) -> tuple[Report, list[Path]]:
    """load_inputs + build_report + write_report: what `scaling report` does."""
    _check_format(fmt)
    check_replaceable(Path(out), WHAT, REPORT_FILES, FIT_FILES)     # before the inputs' fit, not after it
    inputs = load_inputs(source, dataset=dataset, fit=fit, bootstrap=bootstrap, seed=seed,
                         drop_highest_loss=drop_highest_loss, param_convention=param_convention, curves=curves)
    _check_out(inputs, Path(out))      # before the figures are drawn
    report = build_report(inputs, holdout_fraction=holdout_fraction, compute=compute)
    return report, write_report(report, out, fmt)


def _check_out(inputs: Inputs, out: Path) -> None:
    """UsageError for an output folder that holds the fit.json reported, where it is a report's
    folder (one that fitted here; any other folder with a fit.json, or a run store, is refused
    before the work: outputs.check_replaceable): the new report would remove the fit it was made from."""
    if not inputs.fitted_here and inputs.fit_path is not None and inputs.fit_path.resolve().parent == out.resolve():
        raise UsageError(f"the report's folder {out} holds the fit it reports, {inputs.fit_path}, which writing the "
                         "report there would remove: give another folder (default: FIT_DIR/report)")
