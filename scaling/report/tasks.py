"""The report's section on metrics beyond the loss: per-token accuracy, the continuation's
log-probability and exact match of 1, 4 and 16 tokens across the sweep; which of them looks
"emergent" and why (Schaeffer et al. 2023); and exact match predicted from the loss, both as the
per-token accuracy to the k-th power and by a fitted two-step link (N, D) -> loss -> metric
(Bhagia et al. 2024), with its error on the hold-out check's runs.

The numbers come from runs.csv's task columns (scaling.train.metrics records them) and the math
from scaling.laws.tasks; a store from before they were recorded gets one paragraph saying so.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
from matplotlib import colormaps
from matplotlib.figure import Figure

from scaling.laws import tasks
from scaling.report.page import Report
from scaling.report.prose import bounds, number
from scaling.report.style import OTHER_CMAP, log_axis, new_figure, with_rc

if TYPE_CHECKING:
    from scaling.laws.forms.law import Law

FIGURE = "task_metrics"
SMOOTH = ("token_accuracy", "continuation_logprob")
EXACT = tuple(f"exact_match_{k}" for k in tasks.TASK_KS)
LINKED = ("token_accuracy", *EXACT)          # the metrics in [0, 1] the link predicts
RESAMPLES = 200
FLOOR_PROMPTS = 3          # an exact-match metric that never exceeds this many prompts in a run is at its floor


def task_frame(r: Report) -> pd.DataFrame | None:
    """One row per fitted run that recorded every task metric: id, n, d, compute, loss and the metrics
    (by their names in tasks.METRICS). None when there are no runs (a dataset or table)."""
    runs, data = r.inputs.runs, r.inputs.data
    if runs is None or data is None:
        return None
    points = pd.DataFrame({"id": list(map(str, data.ids)), "n": data.n, "d": data.d, "compute": data.compute,
                           "loss": data.loss})
    table = runs.set_index(runs.run_id.astype(str))
    for name, metric in tasks.METRICS.items():
        column = table[metric.column] if metric.column in table else pd.Series(dtype=float)
        points[name] = pd.to_numeric(column.reindex(points.id), errors="coerce").to_numpy(float)
    return points[np.isfinite(points[list(tasks.METRICS)]).all(axis=1)].reset_index(drop=True)


def task_metrics(r: Report) -> None:
    frame = task_frame(r)
    if frame is None:
        return
    r.doc.h(2, "Beyond the loss: per-token and exact-match metrics")
    if len(frame) < 3 or frame.compute.nunique() < 3:
        r.doc.p(f"{len(frame)} fitted runs recorded the metrics beyond the loss (per-token accuracy, exact match, "
                "the continuation's log-probability); this section needs 3 or more at different compute. Runs "
                "trained before they were recorded have none: retrain them to see the section.")
        r.missing_figures[FIGURE] = "fewer than 3 runs recorded the metrics beyond the loss"
        return
    r.doc.p(f"Each run's final evaluation also scores {tasks.TASK_PROMPTS} fixed validation prompts (the same for "
            "every run, drawn "
            "with a fixed seed): per-token top-1 accuracy on their 16-token continuations, the log-probability of "
            "a whole continuation, and exact match of k = 1 ... 16 tokens (the model's greedy continuation equals "
            "the text). Smooth metrics move a little with every improvement of the model; exact match scores a "
            "continuation only when all k tokens are right.")
    rises = {name: tasks.rise(frame.compute, frame[name], tasks.METRICS[name].trials) for name in (*SMOOTH, *EXACT)}
    power = tasks.independent_tokens(frame.token_accuracy, max(tasks.TASK_KS))
    rises["accuracy^16"] = tasks.rise(frame.compute, power, tasks.TASK_PROMPTS)
    labels = {**{name: m.label for name, m in tasks.METRICS.items()},
              "accuracy^16": "per-token accuracy^16 (tokens independent)"}
    r.doc.table(["metric", "kind", "rise across the sweep", "share of it in the upper half of log C", "reads as"],
                [(labels[name], "exact match" if name in EXACT else "smooth" if name in SMOOTH else "prediction",
                  f"{x.rise:+.3g}", "-" if x.late_share is None else f"{100 * x.late_share:.0f}%",
                  x.kind)
                 for name, x in rises.items()], align=["l", "l", "r", "r", "l"])
    r.doc.p(emergence_text(rises, labels, frame))
    prediction = _holdout_prediction(r, frame)
    r.figure(FIGURE, task_figure(frame, r.fit.law, prediction),
             "Left: the smooth metrics against compute (per-token accuracy, and the geometric-mean per-token "
             "probability of the continuation, exp(log-probability / 16)). Middle: exact match of 1, 4 and 16 tokens "
             "against compute (filled), the per-token accuracy to the k-th power (hollow), and the two-step "
             "prediction along the law's compute-optimal frontier (lines, with 95% bands: the best loss the law "
             "expects at each C, mapped through the link fitted to every run). Right: exact match against the "
             "loss with the fitted links; stars: the hold-out runs, predicted from the law refitted without them.")


def emergence_text(rises: dict, labels: dict, frame: pd.DataFrame) -> str:
    """Which metric looks emergent, and why, in plain words."""
    sharp = [name for name in (*SMOOTH, *EXACT) if rises[name].kind == "sharp"]
    gradual = [name for name in SMOOTH if rises[name].kind == "gradual"]
    flat = [name for name in EXACT if rises[name].kind == "flat"]
    k = max(tasks.TASK_KS)
    names = ", ".join(labels[n] for n in sharp)
    if any(n in EXACT for n in sharp) and gradual:
        text = (f"**Looks emergent: {names}** ("
                + "; ".join(f"{labels[n]}: {rises[n].reason}" for n in sharp if n in EXACT)
                + f"), **while {' and '.join(labels[n] for n in gradual)} rise"
                + ("s" if len(gradual) == 1 else "") + " gradually** ("
                + "; ".join(f"{labels[n]}: {rises[n].reason}" for n in gradual)
                + "). The jump is the metric's, not the model's (Schaeffer et al. 2023): exact match scores a "
                  "continuation only when all k tokens are right, so it is about p^k for a per-token accuracy p, "
                  "which stays near 0 until p is close to 1 and then climbs steeply"
                + (f" (the per-token accuracy to the {k}th power reads as {rises['accuracy^16'].kind}, as exact "
                   f"match of {k} tokens does)" if rises["accuracy^16"].kind == rises[f"exact_match_{k}"].kind else "")
                + ". Judge progress by the loss and the smooth metrics; expect exact match to lag, then rise fast.")
    elif sharp:
        text = (f"**Sharp: {names}** ({'; '.join(rises[n].reason for n in sharp)}). A smooth metric rises late as "
                "well, so the sweep's largest runs simply improve most: no metric here looks emergent by its "
                "construction alone.")
    else:
        text = "**No metric looks emergent across this sweep**: none rises mostly late in compute."
    floor = [n for n in flat if frame[n].max() <= FLOOR_PROMPTS / tasks.TASK_PROMPTS]
    if floor:
        top = frame.iloc[frame.compute.argmax()]
        p = float(top.token_accuracy)
        listed = " and ".join(labels[n] for n in floor)
        text += (f" {listed[0].upper() + listed[1:]} stay{'s' * (len(floor) == 1)} at the floor across the sweep "
                 f"(at most {FLOOR_PROMPTS} of {tasks.TASK_PROMPTS} prompts in any run; at the largest compute, "
                 f"per-token accuracy p = {p:.3f}, so p^{k} = {p ** k:.2g}). Such a metric leaves its floor only once "
                 "p is close to 1, and then climbs steeply: it would look emergent at a larger scale without any "
                 "sudden change in the model (Schaeffer et al. 2023), while the smooth metrics show the progress now.")
    noisy = [n for n in flat if n not in floor]
    if noisy:
        listed = " and ".join(labels[n] for n in noisy)
        text += (f" {listed[0].upper() + listed[1:]}: off the floor, but "
                 f"{'its' if len(noisy) == 1 else 'their'} rise across the sweep is within the noise of "
                 f"{tasks.TASK_PROMPTS} prompts (" + "; ".join(rises[n].reason for n in noisy) + ").")
    return text


def _holdout_prediction(r: Report, frame: pd.DataFrame) -> dict | None:
    """On the hold-out check's runs: each metric predicted from the law refitted without them, through the
    link fitted to the other runs (two-step), and as the predicted accuracy to the k-th power."""
    check = r.holdout
    if check is None or check.law is None or not check.rows:
        r.doc.p("No hold-out prediction of the metrics: the hold-out check has no refit (see above).")
        return None
    held = frame.id.isin([row.id for row in check.rows]).to_numpy()
    train = frame[~held]
    test = frame[held]
    if len(train) < 3 or test.empty:
        r.doc.p(f"No hold-out prediction of the metrics: {len(train)} training runs and {len(test)} held-out runs "
                "recorded them (the link needs 3 and 1).")
        return None
    predicted_loss = check.law.loss(test.n.to_numpy(), test.d.to_numpy())
    steps = {name: tasks.two_step(train.loss, train[name], predicted_loss, resamples=RESAMPLES)
             for name in LINKED}
    accuracy = steps["token_accuracy"]
    rows, errors = [], {}
    for name in LINKED:
        step, observed = steps[name], test[name].to_numpy()
        k = tasks.METRICS[name].k
        power = tasks.independent_tokens(accuracy.predicted, k) if k else None
        errors[name] = (np.mean(np.abs(step.predicted - observed)),
                        None if power is None else np.mean(np.abs(power - observed)))
        for i, run in enumerate(test.id):
            rows.append((run, tasks.METRICS[name].label, f"{predicted_loss[i]:.4f}", f"{observed[i]:.3f}",
                         f"{step.predicted[i]:.3f} {bounds((step.lo[i], step.hi[i]), '.3f')}",
                         "-" if power is None else f"{power[i]:.3f}"))
    runs, them = ("largest-compute run", "it") if len(test) == 1 else (f"{len(test)} largest-compute runs", "them")
    r.doc.p(f"**Predicted from the loss, on the hold-out check's {runs}.** Step 1: the law "
            f"refitted without {them} predicts the loss; step 2: a sigmoid link from loss to metric, fitted to the "
            f"other {len(train)} runs (OLMo's ladder, Bhagia et al. 2024, with the floor fixed at 0), maps it to "
            f"the metric, with 95% intervals from {RESAMPLES} refits of the link on resampled runs (the law's own "
            "uncertainty is not included). Beside it: the per-token accuracy predicted the same way, to the k-th "
            "power (exact match if each token were right independently).")
    r.doc.table(["held-out run", "metric", "predicted loss", "observed", "two-step [95%]", "accuracy^k"], rows,
                align=["l", "l", "r", "r", "r", "r"])
    r.doc.ul(f"{tasks.METRICS[name].label}: mean absolute error {number(two, '.3f')} (two-step)"
             + ("" if power is None else f", {number(power, '.3f')} (accuracy^k)")
             for name, (two, power) in errors.items())
    return {"test": test, "loss": predicted_loss, "steps": steps}


@with_rc
def task_figure(frame: pd.DataFrame, law: Law, prediction: dict | None) -> Figure:
    fig, axes = new_figure(1, 3, size=(13.5, 4.4))
    smooth, exact, by_loss = axes[0]
    c, order = frame.compute.to_numpy(), np.argsort(frame.compute.to_numpy())
    smooth.plot(c, frame.token_accuracy, "o", color="#1f77b4", label="per-token accuracy")
    smooth.plot(c, np.exp(frame.continuation_logprob / max(tasks.TASK_KS)), "s", color="#2ca02c",
                label="per-token probability, exp(log p / 16)")
    smooth.set_ylabel("per-token metric")
    smooth.set_title("Smooth metrics")
    cmap = colormaps[OTHER_CMAP]
    colours = {k: cmap(0.1 + 0.7 * i / max(1, len(tasks.TASK_KS) - 1)) for i, k in enumerate(tasks.TASK_KS)}
    grid = np.geomspace(c.min(), c.max(), 60)
    for k in tasks.TASK_KS:
        name, colour = f"exact_match_{k}", colours[k]
        exact.plot(c, frame[name], "o", color=colour, label=f"exact match, k = {k}")
        exact.plot(c[order], tasks.independent_tokens(frame.token_accuracy, k)[order], "o", mfc="none",
                   color=colour, alpha=0.8)
        frontier = tasks.two_step(frame.loss, frame[name], law.optimal_loss(grid), resamples=RESAMPLES)
        exact.plot(grid, frontier.predicted, color=colour, lw=1.2)
        exact.fill_between(grid, frontier.lo, frontier.hi, color=colour, alpha=0.15, lw=0)
        losses = np.linspace(frame.loss.min(), frame.loss.max(), 60)
        by_loss.plot(frame.loss, frame[name], "o", color=colour, label=f"k = {k}")
        by_loss.plot(losses, frontier.link(losses), color=colour, lw=1.2)
        if prediction is not None:      # the hold-out runs: predicted (stars, at the law's loss) and observed (rings)
            step, test = prediction["steps"][name], prediction["test"]
            by_loss.errorbar(prediction["loss"], step.predicted, yerr=[step.predicted - step.lo,
                                                                       step.hi - step.predicted],
                             fmt="*", ms=11, color=colour, mec="black", mew=0.5)
            by_loss.plot(test.loss, test[name], "o", mfc="none", mec="black", ms=9)
    exact.set_title("Exact match of k tokens")
    exact.set_ylabel("exact match")
    exact.plot([], [], "o", mfc="none", color="black", label="accuracy^k")
    by_loss.set_title("Exact match against the loss, with the link")
    by_loss.set_xlabel("validation loss (nats/token)")
    by_loss.set_ylabel("exact match")
    by_loss.invert_xaxis()          # lower loss to the right, as more compute is
    for ax in (smooth, exact):
        ax.set_xlabel("training compute C (FLOPs)")
        log_axis(ax, "x", counts=False)
        ax.legend(loc="best", frameon=True, framealpha=0.85)
    by_loss.legend(loc="best", frameon=True, framealpha=0.85)
    return fig
