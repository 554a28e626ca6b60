# `make demo` and `make test` work on a fresh machine: they create .venv when missing.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
export OPENBLAS_NUM_THREADS ?= 1

.PHONY: demo test test-all bench clean lapack export-example docs fuzz interop-range autograd-suite

# `jitad.export` links the system's LAPACK for linear algebra and OpenBLAS for large matrix
# products; its tests need them (Debian: liblapack-dev, libopenblas-dev)
LAPACK := $(firstword $(wildcard /usr/lib/*/liblapack.so /usr/lib64/liblapack.so /usr/lib/liblapack.so))
OPENBLAS := $(firstword $(wildcard /usr/lib/*/libopenblas.so /usr/lib64/libopenblas.so /usr/lib/libopenblas.so))

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

# `make test`: the everyday suite (under 5 minutes on 2 cores); `make test-all` adds the tests
# marked `slow`: every generated case, the corpus of ported programs, the fuzz profile
test: $(VENV)/.installed-test,mpi,docs lapack
	$(PY) -m pytest -q -x -n 2 -m "not slow" --durations=10

test-all: test
	$(PY) -m pytest -q -n 2 -m slow --durations=20

lapack:
ifeq ($(LAPACK),)
	command -v apt-get >/dev/null && (apt-get update -qq && apt-get install -y -qq liblapack-dev >/dev/null) \
		|| echo "no LAPACK installed: the export test of a linear-algebra program will fail"
endif
ifeq ($(OPENBLAS),)
	command -v apt-get >/dev/null && (apt-get update -qq && apt-get install -y -qq libopenblas-dev >/dev/null) \
		|| echo "no OpenBLAS installed: exported libraries run large products in jitad's own loops"
endif

export-example: $(VENV)/.installed-base
	$(MAKE) -C examples/export_c PY=$(abspath $(PY))

bench: $(VENV)/.installed-bench
	$(PY) -m bench

# the site (mkdocs.yml, docs/) in build/site; --strict: a broken link or reference fails it
docs: $(VENV)/.installed-docs
	$(PY) -m mkdocs build --strict

# the differential fuzzer against JAX for MINUTES minutes (docs/debugging.md); each finding
# is printed as a runnable reproducer
# (PROFILE=models: model-shaped programs at the sizes the newest passes take, tests/reliability/fuzz_models.py)
MINUTES ?= 10
PROFILE ?= ops
fuzz: $(VENV)/.installed-test,mpi,docs
	$(PY) -m tests.reliability.fuzz --minutes $(MINUTES) --profile $(PROFILE)

# HIPS autograd's own test suite with its imports renamed to jitad (tests/compat/autograd_suite.py;
# AUTOGRAD_REPO: a checkout of autograd), outside make test-all: it takes tens of minutes
autograd-suite: $(VENV)/.installed-test,mpi,docs
	JITAD_AUTOGRAD_SUITE=1 $(PY) -m pytest -q -p no:cacheprovider tests/compat/test_autograd_suite.py

# the interop tests again with the oldest JAX the interop extra admits (the test extra pins the
# newest), in a venv of their own
JAX_LOWEST := 0.6.0
interop-range:
	test -x build/venv-jax-$(JAX_LOWEST)/bin/python || $(PYTHON) -m venv build/venv-jax-$(JAX_LOWEST)
	build/venv-jax-$(JAX_LOWEST)/bin/pip install -q -e '.[interop]' 'jax[cpu]==$(JAX_LOWEST)' pytest hypothesis
	build/venv-jax-$(JAX_LOWEST)/bin/python -m pytest -q -p no:cacheprovider tests/interop/test_interop.py tests/reliability/test_interop_edges.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .hypothesis

# GradBench's evals and its C++ tools (hand-written "manual", CoDiPack, ADOL-C; finite
# differences for particle and saddle, which none of those has) against jitad,
# outside `make test`: needs g++, nlohmann-json3-dev, libadolc-dev and libboost-dev (ADOL-C's
# ht) from apt, CoDiPack's headers (CODIPACK_INCLUDE) and, for GradBench's eval scripts,
# pydantic and dataclasses-json. GRADBENCH_REPO / CODIPACK_REPO may name local clones or
# the local mirrors, where GitHub is out of reach (this machine's build/ was made with
# GRADBENCH_REPO=/work/.mirror/gradbench+gradbench/repo
# CODIPACK_REPO=/work/.mirror/SciCompKL+CoDiPack/repo); files whose contents a partial mirror
# lacks are left out of the checkout (bench/gradbench/native.py makes a synthetic lstm text in
# their place). From another worktree, pass `--gradbench` to bench/gradbench's scripts.
GRADBENCH_REPO ?= https://github.com/gradbench/gradbench
CODIPACK_REPO ?= https://github.com/SciCompKL/CoDiPack
CODIPACK_INCLUDE ?= build/CoDiPack/include
GRADBENCH_EVALS = det lse llsq ode kmeans gmm lstm ba ht
gradbench-native:
	test -d build/gradbench || { git clone -q --no-checkout $(GRADBENCH_REPO) build/gradbench && \
	  git -C build/gradbench ls-tree -r HEAD --format='%(objectname) %(path)' \
	  | while read o p; do git -C build/gradbench cat-file -e $$o 2>/dev/null && echo "$$p"; done \
	  | git -C build/gradbench checkout HEAD --pathspec-from-file=- ; }
	test -d $(CODIPACK_INCLUDE) || git clone -q --depth 1 --branch v2.3.1 $(CODIPACK_REPO) build/CoDiPack
	test -f build/gradbench/cpp/json.hpp || echo '#include <nlohmann/json.hpp>' > build/gradbench/cpp/json.hpp
	for t in manual codipack adol-c; do \
	  CPATH=$(abspath $(CODIPACK_INCLUDE)) $(MAKE) -k -C build/gradbench/tools/$$t EXECUTABLES="$(GRADBENCH_EVALS)" || true; done
	$(MAKE) -k -C build/gradbench/tools/finite EXECUTABLES="particle saddle" || true
	@echo "run: python -m bench.gradbench.native --repeats 3   (see bench/gradbench/native.py)"
.PHONY: gradbench-native
