"""One training run: the GPT model, its parameter and FLOP counts, and the training loop.

Imports torch; nothing after the sweep needs it.
"""
