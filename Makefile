.DEFAULT_GOAL := help
VENV ?= .venv
PY := $(VENV)/bin/python
BATON := $(VENV)/bin/baton
TASK ?= Research the history of the Ray project, check the facts, and calculate 17 * 23 + 4

# Debian packages the test suite talks to: a real PostgreSQL server, and headless Chromium (the
# web UI's browser tests, and rendering diagrams to SVG/PNG).
SYSTEM_PACKAGES := postgresql chromium
WEB := orchestrator/web

.PHONY: help setup system-deps run eval check test test-heavy conformance deploy-check lint docs schema bench lock

help: ## Show this help
	@grep -hE '^[a-z-]+:.*?## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*?## "}; {printf "  %-12s %s\n", $$1, $$2}'

# Exactly the versions the suite passed with (requirements.lock, hashes checked), then Baton
# itself on top of them.
$(VENV)/.installed: pyproject.toml requirements.lock
	python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet --require-hashes -r requirements.lock
	$(PY) -m pip install --quiet --no-deps -e .
	touch $@

# The web UI's browser dependencies (the npm mermaid package), exactly as locked.
$(WEB)/node_modules/.package-lock.json: $(WEB)/package.json $(WEB)/package-lock.json
	@command -v npm >/dev/null 2>&1 || { echo "npm is needed for the web UI's diagrams (apt-get install npm)"; exit 1; }
	npm ci --prefix $(WEB) --no-audit --no-fund --loglevel=error

setup: $(VENV)/.installed $(WEB)/node_modules/.package-lock.json ## Create .venv and install Baton, its dev tools and the UI's npm packages

system-deps: ## Install the Debian packages the tests need (as root, or with sudo)
	@missing=""; for p in $(SYSTEM_PACKAGES); do \
		dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -z "$$missing" ]; then exit 0; fi; \
	if [ "$$(id -u)" = 0 ]; then sudo=""; \
	elif command -v sudo >/dev/null 2>&1; then sudo="sudo"; \
	else echo "missing Debian packages:$$missing (install them with apt-get)"; exit 0; fi; \
	echo "installing$$missing"; \
	$$sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -qq --no-install-recommends $$missing >/dev/null

run: setup ## Validate the default team and run a task on local Ray with the offline model
	$(BATON) check configs/default.yaml
	$(BATON) run "$(TASK)"

eval: setup ## Run the shipped datasets through their teams, offline (baton eval)
	$(BATON) eval configs/datasets/default.yaml
	$(BATON) eval configs/datasets/support.yaml -c configs/support.yaml

check: setup ## Validate configs/default.yaml
	$(BATON) check configs/default.yaml

test: lint docs system-deps ## Lint, build the docs, then run the test suite (local Ray, PostgreSQL, Chromium)
	$(PY) -m pytest -n 2 --dist loadfile --no-loadscope-reorder -m "not heavy" --durations=15

test-heavy: setup system-deps ## The heavy suites: kills, store outages, floods, fuzzing on PostgreSQL, clusters of their own; then the soak, alone
	$(PY) -m pytest -n 2 --dist loadfile --no-loadscope-reorder -m "heavy and not soak" --durations=15
	$(PY) -m pytest -m soak --durations=1

# The deployment's checkers, in a virtualenv of their own (checkov's pins cannot share Baton's).
.venv-deploy/.installed: deploy/tools.lock
	python3 -m venv .venv-deploy
	.venv-deploy/bin/python -m pip install --quiet --upgrade pip
	.venv-deploy/bin/python -m pip install --quiet --require-hashes -r deploy/tools.lock
	touch $@

deploy-check: .venv-deploy/.installed ## Render the Kubernetes manifests and validate them offline (schemas, checkov), lint the Dockerfile
	.venv-deploy/bin/python deploy/check.py

conformance: setup ## The protocols' own test kits against baton serve: the A2A TCK and the MCP conformance suite
	$(PY) -m tests.conformance.run all

lint: setup ## Ruff (lint and format), mypy --strict on the packages, a note on modules past 600 lines
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	$(PY) .ci/module_sizes.py

docs: setup ## Build the documentation site into site/ strictly (a broken link or a missing page fails)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet

lock: setup ## Resolve the newest versions pyproject.toml allows into requirements.lock (and the image's and deploy tools' locks), install them, run the suite
	$(VENV)/bin/uv pip compile pyproject.toml --extra dev --generate-hashes --python-version 3.11 \
		--upgrade --no-annotate --custom-compile-command "make lock" -o requirements.lock -q
	$(VENV)/bin/uv pip compile pyproject.toml -c requirements.lock --generate-hashes --python-version 3.11 \
		--no-annotate --custom-compile-command "make lock" -o deploy/image.lock -q
	$(VENV)/bin/uv pip compile deploy/tools.in --generate-hashes --python-version 3.11 --upgrade \
		--no-annotate --custom-compile-command "make lock" -o deploy/tools.lock -q
	$(MAKE) test

schema: setup ## Regenerate the UI's copy of the event schema from agents/core/events.py
	$(PY) -m agents.core.event_schema > $(WEB)/static/events.schema.json

bench: setup ## Run the benchmarks and print their figures
	$(PY) bench/delegation_overhead.py
	$(PY) bench/fanout.py
	$(PY) bench/http_throughput.py
	$(PY) bench/diagram_generation.py
	$(PY) bench/ui_waterfall.py
	$(PY) bench/step_log.py
	$(PY) bench/scale_out.py
	$(PY) bench/thread_turn.py 30
	$(PY) bench/soak.py 10 10
