# Strata policy engine: one task runner. `make help` lists the targets.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
BUF := node_modules/.bin/buf
RUNTIME := $(VENV)/.runtime
STAMP := $(VENV)/.installed
PIP := $(PY) -m pip install --quiet --disable-pip-version-check
PROTOS := $(wildcard protos/strata/policy/v1/*.proto)

.DEFAULT_GOAL := help
.PHONY: help serve test lint typecheck protos bench fmt lock node clean e2e-kube

help: ## List the targets
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-10s %s\n", $$1, $$2}'

# Runtime only (make serve): the hashed runtime lock, then the project itself, built with the
# lock's setuptools (no build isolation: nothing is fetched that the lock does not pin).
$(RUNTIME): pyproject.toml requirements.lock
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) --require-hashes -r requirements.lock
	$(PIP) --no-deps --no-build-isolation -e .
	touch $(RUNTIME)

# Everything (make test and the other targets): both hashed locks in one resolution.
$(STAMP): $(RUNTIME) requirements-dev.lock
	$(PIP) --require-hashes -r requirements.lock -r requirements-dev.lock
	touch $(STAMP)

node_modules/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	touch node_modules/.installed

serve: $(RUNTIME) ## Start the server with its embedded defaults (127.0.0.1:50051, in memory)
	$(VENV)/bin/strata-policy serve

# The tests marked `nojit` (kernel twins, placement cases and properties, the fast lane and batch,
# the records) run a second time with numba off: every kernel then runs as the plain Python it is
# written in, which catches what only the interpreter trips on (a numpy int64 where an int is
# needed, an overflow numba would wrap). About 3 minutes on 2 cores.
test: $(STAMP) node_modules/.installed ## Lint, type-check and run every test (Python and Node.js)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	$(PY) -m pytest -q
	NUMBA_DISABLE_JIT=1 $(PY) -m pytest -q -m nojit
	node --test tests/node/

lint: $(STAMP) node_modules/.installed ## ruff, buf lint and buf format
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(BUF) lint
	$(BUF) format --diff --exit-code

typecheck: $(STAMP) ## mypy --strict on the package
	$(VENV)/bin/mypy

protos: $(STAMP) ## Regenerate generated/ from protos/
	$(PY) scripts/gen_protos.py generated

bench: $(STAMP) ## Run the benchmarks and print ratios (docs/benchmarks.md has the latest)
	$(PY) -m benchmarks

e2e-kube: $(STAMP) ## Kube controllers against the real cluster in KUBECONFIG (kind/k3d); skips without
	STRATA_E2E_KUBE=1 $(PY) -m pytest -q -p no:randomly -rs tests/kube_e2e

fmt: $(STAMP) ## Format Python and protos
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .
	$(BUF) format -w

lock: $(STAMP) ## Regenerate requirements.lock and requirements-dev.lock (hashed) from pyproject.toml
	$(PY) scripts/lock.py

clean: ## Remove the virtual environment and node_modules
	rm -rf $(VENV) node_modules
