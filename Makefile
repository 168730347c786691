# The two commands of the README: `make demo` (tiny sweep on the builtin corpus, its fit and verdict,
# then a validation of the law at 3x the sweep's largest compute) and `make test`. Both create .venv and install the package the first time.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
TORCH ?= torch==2.13.0
# torch is the [train] extra (pyproject.toml): installed here first, from TORCH_INDEX when given, so
# that the extra's requirement is already met. Where torch comes from. Empty: the default index (on this project's CI machines that is a
# CPU build). Elsewhere, on a machine without a GPU, point it at PyTorch's CPU wheel index:
# an open torch requirement otherwise pulls a CUDA build of several GB.
TORCH_INDEX ?=

.PHONY: install demo test study bench clean

install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q $(TORCH) $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX))
	$(BIN)/pip install -q -e '.[test,train]'
	touch $@

# validate --force: a law called `not identified` is refused without it. The demo's is `use with
# caution` here (a's interval 0.22 wide); another machine's floating point could still move it
# across a line; the validation shows what its allocation is worth one budget beyond the
# sweep either way (here it holds).
demo: install
	$(BIN)/scaling sweep configs/tiny.yaml
	$(BIN)/scaling fit runs/tiny
	$(BIN)/scaling validate fits/tiny --compute 6e12 --force

# The study past the change to using context (configs/study.yaml: 7 two-layer shapes at 8e12,
# 1.6e13 and 3.2e13 exact FLOPs, 21 runs, 3.9e14 FLOPs), its fit, and the validation of its law at
# 3x its largest budget (3 runs of about 9.6e13 each). About 3.5 h on 2 CPU cores; on a GPU:
# docs/performance.md. `scaling sweep configs/study.yaml --dry-run` prints the plan first. Like
# the demo, it resumes where it stopped. --force: a `not identified` law is validated too, and
# the output says so.
study: install
	$(BIN)/scaling sweep configs/study.yaml
	$(BIN)/scaling fit runs/study
	$(BIN)/scaling validate fits/study --compute 9.6e13 --force

# One worker per core (pytest-xdist), each test file on one worker: a file's module fixtures (its
# sweeps and fits) are made once; the trainings and fits are single-threaded enough that two
# workers on 2 cores take about half the time of one (tests/conftest.py gives each its share of
# threads, and hands out the slowest files first: --no-loadscope-reorder keeps that order).
test: install
	$(BIN)/python -m pytest -q -n auto --dist loadfile --no-loadscope-reorder

clean:
	rm -rf $(VENV) .pytest_cache
