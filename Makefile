# Two commands a newcomer needs: `make run` (the product with demo data) and `make test` (every test).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: run test lint typecheck pytest e2e distributed install demo clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e ".[dev]"
	touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	$(BIN)/python manage.py migrate --noinput
	$(BIN)/python manage.py demo
	$(BIN)/python manage.py serve --host $(HOST) --port $(PORT)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy .

pytest: $(STAMP)
	$(BIN)/python manage.py makemigrations --check --dry-run
	$(BIN)/pytest

# Browser tests, in their own pytest process (pyproject's addopts leave tests/e2e out of `pytest`).
# Debian's chromium only: never a browser downloaded by Playwright.
e2e: $(STAMP)
	test -x /usr/bin/chromium || (apt-get update && apt-get install -y chromium)
	$(BIN)/pytest tests/e2e -p no:cacheprovider

test: lint typecheck pytest e2e

clean:
	rm -rf $(VENV) var .mypy_cache .ruff_cache
