"""Text in, tokens out: the corpus (builtin, local files, Hugging Face) and its token cache.

`corpus` reads documents and splits them by document; `tokens` trains the byte-level BPE on
the training split and caches the token arrays every run of a sweep reads.
"""
