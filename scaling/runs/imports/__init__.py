"""Runs trained elsewhere, brought into a run store: TensorBoard, Weights & Biases, MLflow, CSV.

    result = import_runs("tensorboard", "logs/", "runs/theirs")   # then scaling.laws.fitting.readers.from_runs

One file reads each kind of log into `SourceRun`s (a name, hyperparameters, scalar series,
provenance): `tensorboard`, `wandb`, `mlflow`, `csv`, each through the library made for its
format, an optional extra. `resolve` finds N, D and the loss in them, by the names given or the
conventional ones, and says why a run has none; `write` makes the store, as a sweep writes it.
"""

from scaling.runs.imports.write import import_runs

__all__ = ["import_runs"]
