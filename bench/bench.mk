# Benchmarks: `make bench` builds the Go tools, the benchmark's own virtualenvs,
# and runs every scenario (see BENCHMARKS.md). Included by the main Makefile;
# paths are relative to the repository root. Not part of `make test`.
#
#   make bench            every scenario, ~10 s per point (about 10 minutes on 2 cores)
#   make bench-quick      2 s per point: a smoke test of the harness
#   make bench-build      the Go upstream, load generator and OTLP sink, with Go stubs
#   make bench-litellm    LiteLLM proxy in its own virtualenv
#   make bench-clean      remove the tools, virtualenvs and raw output (keeps results/)
#   BENCH_ARGS="--only direct,litellm" make bench     pass arguments to bench/run.py

BENCH_DIR        := bench
BENCH_BIN        := $(BENCH_DIR)/.bin
BENCH_VENV       := $(BENCH_DIR)/.venv
BENCH_PY         := $(BENCH_VENV)/bin/python
BENCH_STAMP      := $(BENCH_VENV)/.installed
BENCH_LL_VENV    := $(BENCH_DIR)/.venv-litellm
BENCH_LL_STAMP   := $(BENCH_LL_VENV)/.installed
BENCH_PYTHON     ?= python3
BENCH_ARGS       ?=
# The sidecar's own virtualenv: the main Makefile's `venv` target makes it.
BENCH_SIDECAR_ENV ?= venv

PROTOC_GEN_GO_VERSION      := v1.36.12
PROTOC_GEN_GO_GRPC_VERSION := v1.6.2
BENCH_GO_SOURCES := $(wildcard $(BENCH_DIR)/cmd/*/*.go) $(BENCH_DIR)/go.mod $(BENCH_DIR)/go.sum
BENCH_GEN        := $(BENCH_DIR)/gen/sidecar/v1/sidecar.pb.go $(BENCH_DIR)/gen/sidecar/v1/sidecar_grpc.pb.go
BENCH_TOOLS      := $(BENCH_BIN)/upstream $(BENCH_BIN)/loadgen $(BENCH_BIN)/otlpsink
BENCH_GO_M       := Msidecar/v1/sidecar.proto=sidecarbench/gen/sidecar/v1;sidecarv1

.PHONY: bench bench-quick bench-build bench-litellm bench-venv bench-clean

bench: bench-build bench-venv bench-litellm $(BENCH_SIDECAR_ENV)
	$(BENCH_PY) $(BENCH_DIR)/run.py $(BENCH_ARGS)

bench-quick: bench-build bench-venv bench-litellm $(BENCH_SIDECAR_ENV)
	$(BENCH_PY) $(BENCH_DIR)/run.py --quick $(BENCH_ARGS)

bench-build: $(BENCH_TOOLS)

bench-venv: $(BENCH_STAMP)

bench-litellm: $(BENCH_LL_STAMP)

# The benchmark's virtualenv: protoc (grpcio-tools) for the Go stubs, matplotlib for the plot.
$(BENCH_STAMP): $(BENCH_DIR)/requirements.txt
	$(BENCH_PYTHON) -m venv $(BENCH_VENV)
	$(BENCH_PY) -m pip install --quiet --upgrade pip
	$(BENCH_PY) -m pip install --quiet -r $(BENCH_DIR)/requirements.txt
	touch $@

# LiteLLM proxy, kept apart from everything else (its dependency tree is large).
$(BENCH_LL_STAMP): $(BENCH_DIR)/requirements-litellm.txt
	$(BENCH_PYTHON) -m venv $(BENCH_LL_VENV)
	$(BENCH_LL_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(BENCH_LL_VENV)/bin/python -m pip install --quiet -r $(BENCH_DIR)/requirements-litellm.txt
	touch $@

$(BENCH_BIN)/protoc-gen-go:
	GOBIN=$(abspath $(BENCH_BIN)) go install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO_VERSION)

$(BENCH_BIN)/protoc-gen-go-grpc:
	GOBIN=$(abspath $(BENCH_BIN)) go install google.golang.org/grpc/cmd/protoc-gen-go-grpc@$(PROTOC_GEN_GO_GRPC_VERSION)

# Go stubs of the contract, generated into the benchmark's own module.
$(BENCH_GEN) &: protos/sidecar/v1/sidecar.proto $(BENCH_STAMP) $(BENCH_BIN)/protoc-gen-go $(BENCH_BIN)/protoc-gen-go-grpc
	$(BENCH_PY) -m grpc_tools.protoc -Iprotos \
		-I$$($(BENCH_PY) -c 'import grpc_tools, os; print(os.path.join(os.path.dirname(grpc_tools.__file__), "_proto"))') \
		--plugin=protoc-gen-go=$(BENCH_BIN)/protoc-gen-go \
		--plugin=protoc-gen-go-grpc=$(BENCH_BIN)/protoc-gen-go-grpc \
		--go_out=$(BENCH_DIR) --go_opt=module=sidecarbench --go_opt='$(BENCH_GO_M)' \
		--go-grpc_out=$(BENCH_DIR) --go-grpc_opt=module=sidecarbench --go-grpc_opt='$(BENCH_GO_M)' \
		sidecar/v1/sidecar.proto
	touch $(BENCH_GEN)

$(BENCH_TOOLS) &: $(BENCH_GO_SOURCES) $(BENCH_GEN)
	cd $(BENCH_DIR) && go build -o .bin/ ./cmd/upstream ./cmd/loadgen ./cmd/otlpsink

bench-clean:
	rm -rf $(BENCH_BIN) $(BENCH_VENV) $(BENCH_LL_VENV) $(BENCH_DIR)/results/raw
