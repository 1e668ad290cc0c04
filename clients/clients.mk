# clients/clients.mk — the Go, TypeScript and Java clients, their examples and the
# conformance suite. Included by the top-level Makefile; also usable alone from the
# repository root: `make -f clients/clients.mk clients-test`.
#
#   clients-deps         install every tool and dependency (fresh machine: registries only)
#   clients-gen          regenerate the Go/TypeScript/Java stubs from protos/ (tools/gen_clients.sh)
#   clients-gen-check    fail when a committed stub is stale
#   clients-test         gen-check, vet/type-check, unit tests of every client and example,
#                        the conformance suite in every language, the examples against a real sidecar
#   clients-conformance  only the conformance suite (CLIENTS_CONFORMANCE_LANGS=go,python to narrow)
#   clients-examples     only the examples (called and streamed), against a real sidecar
#   clients-http-peers   the openai npm package against the sidecar's HTTP port (tests/http_peer.py)
#
# Needs go, node/npm, mvn and java on PATH; the conformance suite and the live examples
# also need the project's venv (.venv, made by the top-level Makefile).

GO        ?= go
NPM       ?= npm
NODE      ?= node
MVN       ?= mvn

# Pinned generators, installed into the project-local .cache/bin by `tools/gen_clients.sh deps`.
CLIENTS_BIN          ?= $(CURDIR)/.cache/bin
PROTOC_GEN_GO        := $(CLIENTS_BIN)/protoc-gen-go         # v1.36.12
PROTOC_GEN_GO_GRPC   := $(CLIENTS_BIN)/protoc-gen-go-grpc    # v1.6.2
PROTOC               := $(CLIENTS_BIN)/protoc                # 36.2 (Maven com.google.protobuf:protoc:4.36.2)
PROTOC_GEN_GRPC_JAVA := $(CLIENTS_BIN)/protoc-gen-grpc-java  # 1.83.1
GEN_CLIENTS          := tools/gen_clients.sh

CLIENTS_TS_DIR       := clients/typescript
EXAMPLES_TS_DIR      := examples/typescript
PROTOC_GEN_ES        := $(CLIENTS_TS_DIR)/node_modules/.bin/protoc-gen-es  # @bufbuild/protoc-gen-es 2.17.0
TSC                  := $(CLIENTS_TS_DIR)/node_modules/.bin/tsc            # typescript 5.9.3
CLIENTS_PY           ?= .venv/bin/python
CLIENTS_CONFORMANCE_LANGS ?= go,typescript,java,python

CLIENTS_TS_STAMP     := $(CLIENTS_TS_DIR)/node_modules/.clients-mk-installed
CLIENTS_TS_BUILT     := $(CLIENTS_TS_DIR)/dist/src/index.js
EXAMPLES_TS_STAMP    := $(EXAMPLES_TS_DIR)/node_modules/.clients-mk-installed
HTTP_PEER_TS_DIR     := $(EXAMPLES_TS_DIR)/openai-sdk
HTTP_PEER_TS_STAMP   := $(HTTP_PEER_TS_DIR)/node_modules/.clients-mk-installed

.PHONY: clients-deps clients-gen clients-gen-check clients-test clients-conformance clients-examples \
	clients-test-go clients-test-typescript clients-test-java clients-deps-go clients-deps-tools clients-http-peers

# ---------------------------------------------------------------- deps

$(CLIENTS_TS_STAMP): $(CLIENTS_TS_DIR)/package.json $(CLIENTS_TS_DIR)/package-lock.json
	cd $(CLIENTS_TS_DIR) && $(NPM) ci --no-audit --no-fund --loglevel=error
	touch $@

$(CLIENTS_TS_BUILT): $(CLIENTS_TS_STAMP) $(wildcard $(CLIENTS_TS_DIR)/src/*.ts $(CLIENTS_TS_DIR)/src/gen/*/*/*.ts) $(CLIENTS_TS_DIR)/tsconfig.json
	cd $(CLIENTS_TS_DIR) && $(NPM) run --silent build
	touch $@

# The example depends on the built client (a file: dependency), so it installs after the build.
$(EXAMPLES_TS_STAMP): $(EXAMPLES_TS_DIR)/package.json $(EXAMPLES_TS_DIR)/package-lock.json $(CLIENTS_TS_BUILT)
	cd $(EXAMPLES_TS_DIR) && $(NPM) ci --no-audit --no-fund --loglevel=error
	touch $@

$(HTTP_PEER_TS_STAMP): $(HTTP_PEER_TS_DIR)/package.json $(HTTP_PEER_TS_DIR)/package-lock.json
	cd $(HTTP_PEER_TS_DIR) && $(NPM) ci --no-audit --no-fund --loglevel=error
	touch $@

clients-deps-go:
	cd clients/go && $(GO) mod download
	cd examples/go && $(GO) mod download

clients-deps-tools: $(CLIENTS_TS_STAMP)
	$(GEN_CLIENTS) deps

clients-deps: clients-deps-tools clients-deps-go $(CLIENTS_TS_BUILT) $(EXAMPLES_TS_STAMP) $(HTTP_PEER_TS_STAMP)

# ---------------------------------------------------------------- generation

clients-gen: clients-deps-tools
	$(GEN_CLIENTS) gen

clients-gen-check: clients-deps-tools
	$(GEN_CLIENTS) check

# ---------------------------------------------------------------- tests

clients-test-go: clients-deps-go
	cd clients/go && $(GO) vet ./... && $(GO) test -count=1 ./...
	cd examples/go && $(GO) vet ./... && $(GO) test -count=1 ./...

clients-test-typescript: $(CLIENTS_TS_BUILT) $(EXAMPLES_TS_STAMP)
	cd $(CLIENTS_TS_DIR) && $(NPM) run --silent typecheck && $(NPM) test --silent
	cd $(EXAMPLES_TS_DIR) && node_modules/.bin/tsc -p tsconfig.json --noEmit && $(NPM) test --silent

clients-test-java:
	$(MVN) -q -B -f clients/java/pom.xml test

clients-conformance: clients-deps
	@test -x $(CLIENTS_PY) || { echo "clients-conformance: $(CLIENTS_PY) is missing (make venv)"; exit 1; }
	$(CLIENTS_PY) tests/conformance/harness.py --lang $(CLIENTS_CONFORMANCE_LANGS)

# Each example's loop against one real sidecar, called and streamed (StreamModel): Go's and
# TypeScript's real tests, Java's AgentLoopTest (its real test runs when SIDECAR_ADDR is set),
# Python's parametrized [False, True].
clients-examples: clients-deps
	@test -x $(CLIENTS_PY) || { echo "clients-examples: $(CLIENTS_PY) is missing (make venv)"; exit 1; }
	$(CLIENTS_PY) tests/conformance/harness.py exec -- sh -c \
		'(cd examples/go && $(GO) test -count=1 -run Real -v ./...) && (cd examples/typescript && $(NPM) test --silent) && \
		$(MVN) -q -B -f clients/java/pom.xml test -Dtest=AgentLoopTest -Dsurefire.failIfNoSpecifiedTests=false && \
		$(CLIENTS_PY) -m pytest -q -p no:cacheprovider "tests/processes/test_example_python.py::test_the_loop_against_a_real_sidecar"'

clients-http-peers: $(HTTP_PEER_TS_STAMP)
	@test -x $(CLIENTS_PY) || { echo "clients-http-peers: $(CLIENTS_PY) is missing (make venv)"; exit 1; }
	$(CLIENTS_PY) tests/http_peer.py exec -- sh -c 'cd $(HTTP_PEER_TS_DIR) && $(NPM) test --silent'

clients-test: clients-gen-check clients-test-go clients-test-typescript clients-test-java clients-conformance clients-examples \
	clients-http-peers
