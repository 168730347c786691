"""One training run: the GPT model, its parameter and FLOP counts, and the training loop.

`model` (the GPT) and `counts` (its parameters and FLOPs per token, from the shape alone); `spec`
(`RunSpec`: what a run is), `schedule` (its learning rate, step by step), `batches` (its training
batches, and the validation loss and bits per byte), `checkpoint` (saving and resuming) and
`loop` (`train_run`: one run, start to summary). Imports torch; nothing after the sweep needs it.
"""
