.DEFAULT_GOAL := help
VENV ?= .venv
PY := $(VENV)/bin/python
BATON := $(VENV)/bin/baton
TASK ?= Research the history of the Ray project, check the facts, and calculate 17 * 23 + 4

export LITELLM_LOCAL_MODEL_COST_MAP := True

.PHONY: help setup run check test lint bench

help: ## Show this help
	@grep -hE '^[a-z-]+:.*?## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*?## "}; {printf "  %-8s %s\n", $$1, $$2}'

$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[dev]"
	touch $@

setup: $(VENV)/.installed ## Create .venv and install Baton with its dev tools

run: setup ## Validate the default team and run a task on local Ray with the offline model
	$(BATON) check configs/default.yaml
	$(BATON) run "$(TASK)"

check: setup ## Validate configs/default.yaml
	$(BATON) check configs/default.yaml

test: lint ## Lint, then run the test suite (starts one local Ray instance)
	$(PY) -m pytest

lint: setup ## Ruff (lint and format) and mypy --strict on the packages
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

bench: setup ## Run the benchmarks and print their figures
	$(PY) bench/delegation_overhead.py
	$(PY) bench/fanout.py
