# The two commands a newcomer needs: `make run` and `make test`. Everything else is set up by them.
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON     ?= python3
VENV       := .venv
PY         := $(VENV)/bin/python
STAMP      := $(VENV)/.installed
CONSTRAINTS := constraints.txt
LOCK_VENV  := .venv-lock
BUF_DIR    := tools/buf
BUF        := $(BUF_DIR)/node_modules/.bin/buf
CACHE      ?= $(HOME)/.cache/sidecar
JAEGER_VERSION := v1.76.0
# The contract as first released: every change since is an addition (buf breaking checks it).
CONTRACT_BASE  := 90fcf78
# buf clones the repository to look for that ref, 50 commits deep unless told: the depth that reaches it.
CONTRACT_DEPTH  = $(shell echo $$(( $$(git rev-list --count $(CONTRACT_BASE)..HEAD 2>/dev/null || echo 0) + 1 )))
JAEGER     := $(CACHE)/jaeger-$(JAEGER_VERSION)
export SIDECAR_JAEGER_BIN := $(abspath $(JAEGER))
GRPCURL_VERSION := v1.9.3
GRPCURL    := $(CACHE)/grpcurl-$(GRPCURL_VERSION)
export SIDECAR_GRPCURL_BIN := $(abspath $(GRPCURL))

-include clients/clients.mk
-include bench/bench.mk

.PHONY: help
help:
	@echo "make run     set up and start the sidecar on the embedded default (no keys, no network)"
	@echo "make test    set up and run the whole test suite (lint, generated-code checks, all clients)"
	@echo "make proto   regenerate the stubs of every language from protos/"
	@echo "make bench   run the benchmarks (not part of make test; BENCHMARKS.md)"
	@echo "make soak    faults, SIGTERM drain, kill -9 and restart (not part of make test; docs/reliability.md)"
	@echo "make constraints  re-resolve the Python dependencies and rewrite the pins of constraints.txt"
	@echo "make peers-latest  run the peer tests against the newest SDKs and frameworks (docs/peers.md)"

# ---------------------------------------------------------------- setup

CONTRACT_PY := $(wildcard protos/python/sidecar_contract/v1/*.py*)

# Every package at the version constraints.txt pins, the build backend too (a fresh machine
# builds the same venv); a package the install pulls in that constraints.txt does not pin fails it.
# The contract (protos/python) is a dependency of both the client (sidecar-contract==its version,
# as a package index takes it) and the server (by its path); it is installed from its folder, named
# first, so pip never looks for it on an index, and reinstalled whenever `make proto` regenerates it.
# The venv is cleared first: a package an older pin pulled in (mcp 1.x's pydantic-settings) is not
# left behind to fail the check below on a machine that had the old venv.
$(STAMP): pyproject.toml clients/python/pyproject.toml clients/python/hatch_build.py protos/python/pyproject.toml $(CONSTRAINTS) $(CONTRACT_PY)
	$(PYTHON) -m venv --clear $(VENV)
	$(PY) -m pip install --quiet --upgrade pip -c $(CONSTRAINTS)
	$(PY) -m pip install --quiet -c $(CONSTRAINTS) --build-constraint $(CONSTRAINTS) ./protos/python -e clients/python -e ".[dev]"
	$(PY) -m pip install --quiet --build-constraint $(CONSTRAINTS) --force-reinstall --no-deps ./protos/python
	@unpinned=$$($(PY) -m pip freeze --exclude-editable | grep -v '^sidecar-contract @' | grep -vixF -f <(grep -v '^#' $(CONSTRAINTS) | grep .)); \
	if [ -n "$$unpinned" ]; then \
		echo "installed but not pinned in $(CONSTRAINTS) (run make constraints, review the diff):"; \
		echo "$$unpinned"; exit 1; \
	fi
	touch $@

.PHONY: venv
venv: $(STAMP)

# Re-resolve pyproject.toml's ranges in a scratch venv and rewrite constraints.txt from it
# (setuptools: the newest the build-system's range allows, as a build without a pin would take).
.PHONY: constraints
constraints:
	rm -rf $(LOCK_VENV)
	$(PYTHON) -m venv $(LOCK_VENV)
	$(LOCK_VENV)/bin/python -m pip install --quiet --upgrade pip "setuptools>=68"
	$(LOCK_VENV)/bin/python -m pip install --quiet ./protos/python -e clients/python -e ".[dev]"
	{ grep '^#' $(CONSTRAINTS); $(LOCK_VENV)/bin/python -m pip freeze --all --exclude-editable | grep -v '^sidecar-contract @'; } > $(CONSTRAINTS).new
	mv $(CONSTRAINTS).new $(CONSTRAINTS)
	rm -rf $(LOCK_VENV)
	@git diff --stat -- $(CONSTRAINTS)

$(BUF): $(BUF_DIR)/package.json $(BUF_DIR)/package-lock.json
	cd $(BUF_DIR) && npm ci --no-audit --no-fund --loglevel=error
	touch $@

# Jaeger v2 is built from source once per machine and cached (see tools/jaeger/go.mod).
$(JAEGER): tools/jaeger/go.mod tools/jaeger/go.sum
	mkdir -p $(CACHE)
	cd tools/jaeger && go build -o $(abspath $(JAEGER)) github.com/jaegertracing/jaeger/cmd/jaeger

.PHONY: jaeger
jaeger: $(JAEGER)

# grpcurl (tests/fronts/test_admin_grpc.py lists the Admin service with it), built from source once per machine (tools/grpcurl/go.mod).
$(GRPCURL): tools/grpcurl/go.mod tools/grpcurl/go.sum
	mkdir -p $(CACHE)
	cd tools/grpcurl && go build -o $(abspath $(GRPCURL)) github.com/fullstorydev/grpcurl/cmd/grpcurl

.PHONY: grpcurl
grpcurl: $(GRPCURL)

# A real Redis for the fleet tests (tests/fleet/ starts and kills it on a free loopback port):
# Debian's redis-server, installed when missing (CI is a fresh machine; apt-get needs root or sudo).
.PHONY: redis-server
redis-server:
	@command -v redis-server >/dev/null || { \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq redis-server >/dev/null; \
		systemctl disable --now redis-server >/dev/null 2>&1 || true; \
		command -v redis-server; }

# ---------------------------------------------------------------- the two commands

.PHONY: run
run: $(STAMP)
	$(VENV)/bin/sidecar serve $(if $(CONFIG),--config $(CONFIG),)

.PHONY: test
test: $(STAMP) $(BUF) $(JAEGER) $(GRPCURL) redis-server lint proto-check python-test python-packages clients-test-if-any deploy-check

# The Vercel AI SDK peer (tests/peers/test_peer_vercel_ai.py): ai and its provider packages at its lock's pins.
PEERS_VERCEL       := tests/peers/vercel
PEERS_VERCEL_STAMP := $(PEERS_VERCEL)/node_modules/.installed

$(PEERS_VERCEL_STAMP): $(PEERS_VERCEL)/package.json $(PEERS_VERCEL)/package-lock.json
	cd $(PEERS_VERCEL) && npm ci --no-audit --no-fund --loglevel=error
	touch $@

# The LlamaIndex peer (tests/peers/test_peer_llamaindex.py, tests/peers/llamaindex/agent.py): a venv of its own, as
# the Vercel peer has its own node_modules, since LlamaIndex's OpenAI LLM requires openai<3 and .venv pins
# openai 3 for the other peers. Every package at its requirements.txt's pins; one it pulls in unpinned fails it.
PEERS_LLAMAINDEX       := .venv-peers/llamaindex
PEERS_LLAMAINDEX_PINS  := tests/peers/llamaindex/requirements.txt
PEERS_LLAMAINDEX_STAMP := $(PEERS_LLAMAINDEX)/.installed

$(PEERS_LLAMAINDEX_STAMP): $(PEERS_LLAMAINDEX_PINS)
	$(PYTHON) -m venv --clear $(PEERS_LLAMAINDEX)
	$(PEERS_LLAMAINDEX)/bin/python -m pip install --quiet --upgrade pip -c $(CONSTRAINTS)
	$(PEERS_LLAMAINDEX)/bin/python -m pip install --quiet -r $(PEERS_LLAMAINDEX_PINS)
	@unpinned=$$($(PEERS_LLAMAINDEX)/bin/python -m pip freeze --all | grep -v '^pip==' | grep -vixF -f <(grep -v '^#' $(PEERS_LLAMAINDEX_PINS) | grep .)); \
	if [ -n "$$unpinned" ]; then \
		echo "installed but not pinned in $(PEERS_LLAMAINDEX_PINS):"; \
		echo "$$unpinned"; exit 1; \
	fi
	touch $@

.PHONY: peers-deps
peers-deps: $(PEERS_VERCEL_STAMP) $(PEERS_LLAMAINDEX_STAMP)

# The peer tests against the newest releases of the SDKs and frameworks, in a scratch venv and npm
# folder under .cache/peers-latest (never .venv or tests/peers); prints a table of what broke.
# Not part of make test (it reaches the registries for whatever is newest); docs/peers.md.
.PHONY: peers-latest
peers-latest:
	$(PYTHON) tools/peers_latest.py

.PHONY: python-test
python-test: $(STAMP) $(JAEGER) $(GRPCURL) redis-server $(PEERS_VERCEL_STAMP) $(PEERS_LLAMAINDEX_STAMP)
	$(PY) -m pytest -q -p no:cacheprovider

# The two Python distributions a user installs from a package index: sidecar-contract
# (protos/python) and sidecar-client (clients/python, which pins sidecar-contract==its version).
# Each is built as an sdist and a wheel built from that sdist; both wheels go into a clean venv
# (their dependencies at constraints.txt's pins, nothing else of this repository), where
# tests/installed_wheels.py imports them and calls a real sidecar (harness.py exec starts it).
PACKAGES_DIR := .cache/python-packages

.PHONY: python-packages
python-packages: $(STAMP)
	rm -rf $(PACKAGES_DIR)
	$(PY) -m build -q --outdir $(PACKAGES_DIR) protos/python
	$(PY) -m build -q --outdir $(PACKAGES_DIR) clients/python
	$(PYTHON) -m venv $(PACKAGES_DIR)/venv
	$(PACKAGES_DIR)/venv/bin/python -m pip install --quiet -c $(CONSTRAINTS) \
		$(PACKAGES_DIR)/sidecar_contract-*.whl $(PACKAGES_DIR)/sidecar_client-*.whl
	$(PY) tests/conformance/harness.py exec -- $(PACKAGES_DIR)/venv/bin/python -I tests/installed_wheels.py

.PHONY: lint
lint: $(STAMP) $(BUF)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check sidecar clients/python/sidecar_client tests tools/protogen.py tools/peers_latest.py
	$(VENV)/bin/mypy
	cd protos && ../$(BUF) lint
	cd protos && ../$(BUF) breaking --against '../.git#ref=$(CONTRACT_BASE),depth=$(CONTRACT_DEPTH),subdir=protos'

.PHONY: proto
proto: $(STAMP) $(BUF)
	$(PY) tools/protogen.py
	@if [ -x tools/gen_clients.sh ]; then tools/gen_clients.sh; fi

.PHONY: proto-check
proto-check: $(STAMP)
	$(PY) tools/protogen.py --check

.PHONY: clients-test-if-any
clients-test-if-any:
	@if grep -q '^clients-test:' clients/clients.mk 2>/dev/null; then $(MAKE) --no-print-directory clients-test; fi

# The Kubernetes manifests (deploy/kubernetes), decoded strictly into the official API types and
# checked for what the deployment rests on: deploy/kubernetes/validate. Modules are fetched by
# `go mod download` alone; vet and test run with GOPROXY=off and -mod=readonly, so nothing is
# fetched (nor go.mod rewritten) while testing.
DEPLOY_CHECK := deploy/kubernetes/validate
GO           ?= go

.PHONY: deploy-check
deploy-check:
	cd $(DEPLOY_CHECK) && $(GO) mod download
	cd $(DEPLOY_CHECK) && GOPROXY=off $(GO) vet -mod=readonly ./...
	cd $(DEPLOY_CHECK) && GOPROXY=off $(GO) test -mod=readonly -count=1 ./...

.PHONY: clean
clean:
	rm -rf $(VENV) $(LOCK_VENV) $(BUF_DIR)/node_modules $(PEERS_VERCEL)/node_modules .venv-peers .mypy_cache .ruff_cache
