# `make demo` and `make test` work on a fresh machine: they create .venv when missing.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
export OPENBLAS_NUM_THREADS ?= 1

.PHONY: demo test bench clean

$(VENV)/.installed-%: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[$*]'
	touch $@

$(VENV)/.installed-base: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q -e .
	touch $@

demo: $(VENV)/.installed-base
	$(PY) examples/quickstart.py

test: $(VENV)/.installed-test,mpi
	$(PY) -m pytest -q -x -n 2 --durations=10

bench: $(VENV)/.installed-bench
	$(PY) -m bench

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .hypothesis
