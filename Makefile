# Two commands: `make run` and `make test` (and `make unit`, its fast part). They install what is
# missing first.
SCRATCH ?= /var/tmp/howfast-scratch
HOWFAST := .venv/bin/howfast
PY := .venv/bin/python

.PHONY: setup setup-test run test lint typecheck unit clean k8s-lab

setup:
	@bash scripts/setup.sh

# The tests also need Chromium (to open HTML reports); `make run` does not.
setup-test:
	@bash scripts/setup.sh test

# Benchmark a scratch directory on this machine's disk with the `quick` plan.
run: setup
	@mkdir -p $(SCRATCH)
	$(HOWFAST) run quick --target $(SCRATCH)

lint: setup
	$(PY) -m ruff check src tests benchmarks
	$(PY) -m ruff format --check src tests benchmarks
	.venv/bin/lint-imports --no-cache

# mypy's cache lives outside the clone (the user's cache directory, one per mypy version):
# a clean clone's cold check took ~55 s of CPU on 2 cores, one with the cache ~2 s. mypy
# checks every cached module's hash against its source, so a cache from another clone or
# commit gives the same result as a cold check; it writes each entry atomically.
MYPY_CACHE := $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/howfast/mypy
typecheck: setup
	MYPY_CACHE_DIR="$(MYPY_CACHE)/$$($(PY) -c 'from mypy.version import __version__; print(__version__)')" \
		$(PY) -m mypy

# The unit tests alone (tests/unit: pure code, recorded outputs, nothing started that takes
# long): about a minute. Run them first. One pytest-xdist worker more than there are cores:
# a worker spends about 30% of its time waiting (time-outs, signals, tools' runs), and two
# workers on 2 cores left that time idle (the longest files go first: tests/conftest.py).
unit: setup-test
	$(PY) -m pytest tests/unit -n $$(($$(nproc) + 1)) -p no:cacheprovider -q

# Every test, the Kubernetes lab tests (tests/k8s: a real two-node cluster on loopback,
# tests/k8s/lab/README.md) beside the others; the first run on a machine builds the lab
# (~15-30 min, cached in ~/.cache/howfast). HOWFAST_K8S_LAB=0 make test skips them.
# scripts/test.sh runs `make lint typecheck` beside the tests and fails if they fail.
test: setup-test
	@bash scripts/test.sh

# The Kubernetes lab tests alone.
k8s-lab: setup
	HOWFAST_K8S_LAB=1 $(PY) -m pytest -m k8s tests/k8s --durations=0

clean:
	rm -rf .venv .tools .pytest_cache .mypy_cache .ruff_cache
