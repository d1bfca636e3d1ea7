# Two commands a newcomer needs: `make run` (the product with demo data) and `make test` (every test).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# What serving needs only (`make run`); STAMP adds the `dev` extras (`make test` and the checks).
RUN_STAMP := $(VENV)/.installed-runtime
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: run test lint typecheck pytest e2e distributed install bwrap mcp-servers demo clean screenshots

$(RUN_STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q -e .
	touch $(RUN_STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e ".[dev]"
	touch $(STAMP) $(RUN_STAMP)

install: $(STAMP) bwrap mcp-servers

# `shell` runs only inside bubblewrap (docs/tools.md); Debian's package, installed when missing.
bwrap:
	test -x /usr/bin/bwrap || (apt-get update && apt-get install -y bubblewrap)

# Real MCP servers for the tests (docs/tools.md#mcp-tools): the npm ones pinned by
# mcp_servers/package-lock.json, the PyPI ones in a venv of their own. Kept outside the
# repository, so a fresh clone on this machine finds them installed; redone only when the
# pins change.
MCP_SERVERS_DIR ?= $(HOME)/.cache/clawboard/mcp
MCP_PYPI_SERVERS := mcp-server-time==2026.10.19 mcp-server-git==2026.10.19
export MCP_SERVERS_DIR

mcp-servers:
	mkdir -p $(MCP_SERVERS_DIR)
	cmp -s mcp_servers/package-lock.json $(MCP_SERVERS_DIR)/package-lock.json \
	  && test -d $(MCP_SERVERS_DIR)/node_modules/@modelcontextprotocol/server-filesystem \
	  || (cp mcp_servers/package.json mcp_servers/package-lock.json $(MCP_SERVERS_DIR)/ \
	      && npm ci --prefix $(MCP_SERVERS_DIR) --no-audit --no-fund --ignore-scripts)
	test "$$(cat $(MCP_SERVERS_DIR)/venv/.pins 2>/dev/null)" = "$(MCP_PYPI_SERVERS)" \
	  || ($(PYTHON) -m venv $(MCP_SERVERS_DIR)/venv \
	      && $(MCP_SERVERS_DIR)/venv/bin/pip install -q $(MCP_PYPI_SERVERS) \
	      && echo "$(MCP_PYPI_SERVERS)" > $(MCP_SERVERS_DIR)/venv/.pins)

run: $(RUN_STAMP)
	$(BIN)/python manage.py migrate --noinput
	$(BIN)/python manage.py demo
	$(BIN)/python manage.py serve --host $(HOST) --port $(PORT)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports

typecheck: $(STAMP)
	$(BIN)/mypy .

pytest: $(STAMP) bwrap mcp-servers
	$(BIN)/python manage.py makemigrations --check --dry-run
	$(BIN)/pytest

# Browser tests, in their own pytest process (pyproject's addopts leave tests/e2e out of `pytest`).
# Debian's chromium only: never a browser downloaded by Playwright.
e2e: $(STAMP)
	test -x /usr/bin/chromium || (apt-get update && apt-get install -y chromium)
	$(BIN)/pytest tests/e2e -p no:cacheprovider

# Scale-out mode against the PostgreSQL and Redis on 127.0.0.1, with real worker and daphne
# processes (its own pytest process: tests/distributed/pytest.ini). Skips with a reason when the
# services are absent, except under CI=true, where it fails.
distributed: $(STAMP)
	$(BIN)/pytest tests/distributed

test: lint typecheck pytest e2e distributed

clean:
	rm -rf $(VENV) var .mypy_cache .ruff_cache

# Refresh the operator guide's pictures (docs/screenshots) from a real browser run.
screenshots: $(STAMP)
	UPDATE_SCREENSHOTS=1 $(BIN)/pytest tests/e2e -p no:cacheprovider
