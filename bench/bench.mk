# Benchmarks: `make bench` builds the Go tools, the benchmark's own virtualenvs,
# and runs every scenario (see BENCHMARKS.md). Included by the main Makefile;
# paths are relative to the repository root. Not part of `make test`.
#
#   make bench            every scenario, ~10 s per point (about 14 minutes on 2 cores; the paired
#                         tracing A/B, bench/ab.py --traced, 10 rounds of 3 s, among them)
#   make bench-quick      2 s per point: a smoke test of the harness
#   make bench-build      the Go upstream, load generator and OTLP sink, with Go stubs
#   make bench-litellm    LiteLLM proxy in its own virtualenv
#   make bench-clean      remove the tools, virtualenvs and raw output (keeps results/)
#   BENCH_ARGS="--only direct,litellm" make bench     pass arguments to bench/run.py
#   make bench-formats    CallModel per wire format, and the HTTP fronts, on one process (bench/formats.py)
#   make bench-overhead   x-sidecar-overhead-ms and sidecar.overhead.duration against the added latency (bench/overhead.py)
#   make bench-ab BENCH_BASE=COMMIT   CallModel CPU per call of this checkout against COMMIT's, paired in one run (bench/ab.py)
#   make bench-lean       issue 40's table: idle RSS, time to serving, CPU per call and per stream over the relay floor,
#                         traced over untraced, each a ratio beside its target (bench/lean.py, about 3 minutes)
#   BENCH_LEAN_ARGS="--profile" make bench-lean       each package imported alone: its ms and MB
#   make soak             faults, SIGTERM drain, kill -9 (bench/soak.py, docs/reliability.md; a few minutes)
#   SOAK_ARGS="--calls 1000" make soak                pass arguments to bench/soak.py

BENCH_DIR        := bench
BENCH_BIN        := $(BENCH_DIR)/.bin
BENCH_VENV       := $(BENCH_DIR)/.venv
BENCH_PY         := $(BENCH_VENV)/bin/python
BENCH_STAMP      := $(BENCH_VENV)/.installed
BENCH_LL_VENV    := $(BENCH_DIR)/.venv-litellm
BENCH_LL_STAMP   := $(BENCH_LL_VENV)/.installed
BENCH_PYTHON     ?= python3
BENCH_ARGS       ?=
SOAK_ARGS        ?=
# The sidecar's own virtualenv: the main Makefile's `venv` target makes it.
BENCH_SIDECAR_ENV ?= venv

BENCH_GO_SOURCES := $(wildcard $(BENCH_DIR)/cmd/*/*.go) $(BENCH_DIR)/go.mod $(BENCH_DIR)/go.sum
BENCH_TOOLS      := $(BENCH_BIN)/upstream $(BENCH_BIN)/loadgen $(BENCH_BIN)/otlpsink

.PHONY: bench bench-quick bench-build bench-litellm bench-venv bench-clean soak bench-formats bench-overhead bench-lean

bench: bench-build bench-venv bench-litellm $(BENCH_SIDECAR_ENV) redis-server
	$(BENCH_PY) $(BENCH_DIR)/run.py $(BENCH_ARGS)
	$(MAKE) --no-print-directory bench-formats
	$(MAKE) --no-print-directory bench-lean

# Issue 40's figures, each a ratio measured in one run beside its target, in the sidecar's virtualenv
# (it polls the gRPC health service); writes bench/results/lean.json.
BENCH_LEAN_ARGS ?=
bench-lean: bench-build $(BENCH_SIDECAR_ENV)
	.venv/bin/python $(BENCH_DIR)/lean.py $(BENCH_LEAN_ARGS)

# Every registered format through the same sidecar, in the sidecar's own virtualenv (it imports
# the format registry and the Python client).
bench-formats: $(BENCH_SIDECAR_ENV)
	.venv/bin/python $(BENCH_DIR)/formats.py $(BENCH_FORMATS_ARGS)

# This checkout (B) against another commit (A, BENCH_BASE, default HEAD~1), both in the sidecar's
# virtualenv, paired in one run: A's source is exported to .cache/bench-base and put first on PYTHONPATH (the
# generated contract is this checkout's: compare commits whose protos/ agree).
BENCH_BASE ?= HEAD~1
BENCH_AB_ARGS ?= --rounds 12 --burst 3
bench-ab: bench-build bench-venv $(BENCH_SIDECAR_ENV)
	rm -rf .cache/bench-base && mkdir -p .cache/bench-base
	git archive $(BENCH_BASE) sidecar | tar -x -C .cache/bench-base
	$(BENCH_PY) $(BENCH_DIR)/ab.py --a "env PYTHONPATH=$(abspath .cache/bench-base) $(abspath .venv/bin/python) -P -m sidecar serve" \
		--out $(BENCH_DIR)/results/ab-base.json $(BENCH_AB_ARGS)

# The overhead figure against the bench's added latency, c=1, about a minute (in the sidecar's virtualenv).
bench-overhead: $(BENCH_SIDECAR_ENV)
	.venv/bin/python $(BENCH_DIR)/overhead.py $(BENCH_OVERHEAD_ARGS)

bench-quick: bench-build bench-venv bench-litellm $(BENCH_SIDECAR_ENV)
	$(BENCH_PY) $(BENCH_DIR)/run.py --quick $(BENCH_ARGS)

# The soak drives the sidecar over gRPC with the project's own client, so it runs in the
# sidecar's virtualenv; it needs none of the Go tools.
soak: $(BENCH_SIDECAR_ENV)
	$(VENV)/bin/python $(BENCH_DIR)/soak.py $(SOAK_ARGS)

bench-build: $(BENCH_TOOLS)

bench-venv: $(BENCH_STAMP)

bench-litellm: $(BENCH_LL_STAMP)

# The benchmark's virtualenv: matplotlib for the plot.
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

# The load generator uses the Go client's stubs (clients/go/gen), generated by `make proto`.
$(BENCH_TOOLS) &: $(BENCH_GO_SOURCES) $(wildcard clients/go/gen/sidecar/v1/*.go)
	cd $(BENCH_DIR) && go build -o .bin/ ./cmd/upstream ./cmd/loadgen ./cmd/otlpsink

bench-clean:
	rm -rf $(BENCH_BIN) $(BENCH_VENV) $(BENCH_LL_VENV) $(BENCH_DIR)/results/raw
