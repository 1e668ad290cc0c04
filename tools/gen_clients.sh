#!/usr/bin/env bash
# Generate the Go, TypeScript and Java client stubs from the one protos/ tree,
# or check that the committed ones are current.
#
#   tools/gen_clients.sh deps    # install the pinned generators into .cache/ (idempotent)
#   tools/gen_clients.sh         # (= gen) deps, then write the stubs
#   tools/gen_clients.sh check   # deps, then exit 1 when a committed stub differs
#
# What is written (protos/buf.gen.yaml says how; every plugin is local, no BSR):
#   clients/go/gen/                    protoc-gen-go v1.36.12 + protoc-gen-go-grpc v1.6.2
#   clients/typescript/src/gen/        @bufbuild/protoc-gen-es 2.17.0 (clients/typescript/package-lock.json)
#   clients/java/src/main/generated/   protoc 36.2 (Maven com.google.protobuf:protoc:4.36.2) built-in java
#                                      + io.grpc:protoc-gen-grpc-java 1.83.1
# The Python stubs are tools/protogen.py's.
#
# Reproducible: the versions are pinned here and in the lockfiles, the tools
# live in .cache/ (never the user's PATH first), and the output depends on
# nothing else. Overrides: BUF (the buf binary), GOBIN_DIR (default .cache/bin).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

PROTOC_GEN_GO_VERSION=v1.36.12
PROTOC_GEN_GO_GRPC_VERSION=v1.6.2
PROTOC_MAVEN_VERSION=4.36.2      # protoc 36.2, the protoc of protobuf-java 4.36.2
PROTOC_VERSION_LINE="libprotoc 36.2"
GRPC_JAVA_PLUGIN_VERSION=1.83.1  # the newest linux-x86_64 build Maven Central serves here
MAVEN_DEPENDENCY_PLUGIN=org.apache.maven.plugins:maven-dependency-plugin:3.8.1

CACHE="$ROOT/.cache"
BIN="${GOBIN_DIR:-$CACHE/bin}"
DL="$CACHE/dl"
TS_DIR="$ROOT/clients/typescript"
BUF="${BUF:-$ROOT/tools/buf/node_modules/.bin/buf}"
TEMPLATE=protos/buf.gen.yaml
OUTPUTS=(clients/go/gen clients/typescript/src/gen clients/java/src/main/generated)

log() { printf 'gen_clients: %s\n' "$*" >&2; }

classifier() {
	local os arch
	case "$(uname -s)" in Linux) os=linux ;; Darwin) os=osx ;; *) log "unsupported OS $(uname -s)"; exit 1 ;; esac
	case "$(uname -m)" in x86_64 | amd64) arch=x86_64 ;; aarch64 | arm64) arch=aarch_64 ;; *) log "unsupported arch $(uname -m)"; exit 1 ;; esac
	echo "$os-$arch"
}

# maven_exe GROUP:ARTIFACT VERSION NAME: fetch an executable from Maven Central
# through Maven itself (the only way this network reaches it) and link it as
# $BIN/NAME.
maven_exe() {
	local ga="$1" version="$2" name="$3" cls file
	cls="$(classifier)"
	file="$DL/${ga#*:}-$version-$cls.exe"
	if [[ ! -x "$file" ]]; then
		log "fetching $ga:$version:exe:$cls"
		mkdir -p "$DL"
		mvn -q -B "$MAVEN_DEPENDENCY_PLUGIN:copy" \
			"-Dartifact=$ga:$version:exe:$cls" "-DoutputDirectory=$DL" >&2
		chmod +x "$file"
	fi
	ln -sfn "$file" "$BIN/$name"
}

deps() {
	mkdir -p "$BIN"
	if [[ "$("$BIN/protoc-gen-go" --version 2>/dev/null || true)" != "protoc-gen-go $PROTOC_GEN_GO_VERSION" ]]; then
		log "installing protoc-gen-go $PROTOC_GEN_GO_VERSION"
		GOBIN="$BIN" GOFLAGS=-mod=mod go install "google.golang.org/protobuf/cmd/protoc-gen-go@$PROTOC_GEN_GO_VERSION"
	fi
	if [[ "$("$BIN/protoc-gen-go-grpc" --version 2>/dev/null || true)" != "protoc-gen-go-grpc ${PROTOC_GEN_GO_GRPC_VERSION#v}" ]]; then
		log "installing protoc-gen-go-grpc $PROTOC_GEN_GO_GRPC_VERSION"
		GOBIN="$BIN" GOFLAGS=-mod=mod go install "google.golang.org/grpc/cmd/protoc-gen-go-grpc@$PROTOC_GEN_GO_GRPC_VERSION"
	fi
	maven_exe com.google.protobuf:protoc "$PROTOC_MAVEN_VERSION" protoc
	if [[ "$("$BIN/protoc" --version)" != "$PROTOC_VERSION_LINE" ]]; then
		log "unexpected protoc: $("$BIN/protoc" --version)"
		exit 1
	fi
	maven_exe io.grpc:protoc-gen-grpc-java "$GRPC_JAVA_PLUGIN_VERSION" protoc-gen-grpc-java
	if [[ ! -x "$TS_DIR/node_modules/.bin/protoc-gen-es" ]]; then
		log "npm ci in clients/typescript"
		npm ci --prefix "$TS_DIR" --no-audit --no-fund >&2
	fi
	if [[ ! -x "$BUF" ]]; then
		log "npm ci in tools/buf"
		npm ci --prefix "$ROOT/tools/buf" --no-audit --no-fund >&2
	fi
}

run_buf() {
	# The pinned plugins come first; protoc_builtin java runs the protoc found here too.
	PATH="$BIN:$TS_DIR/node_modules/.bin:$PATH" "$BUF" generate protos --template "$TEMPLATE" "$@"
}

gen() {
	run_buf
	log "wrote ${OUTPUTS[*]}"
}

check() {
	local tmp stale=0 out
	tmp="$(mktemp -d)"
	trap 'rm -rf "$tmp"' RETURN
	run_buf -o "$tmp"
	for out in "${OUTPUTS[@]}"; do
		if ! diff -r -q "$tmp/$out" "$out" >"$tmp/diff.txt" 2>&1; then
			stale=1
			sed "s|$tmp/||" "$tmp/diff.txt" >&2
		fi
	done
	if ((stale)); then
		log "generated client stubs are stale: run tools/gen_clients.sh (make clients-gen) and commit"
		return 1
	fi
	log "generated client stubs are current"
}

case "${1:-gen}" in
deps) deps ;;
gen) deps && gen ;;
check) deps && check ;;
-h | --help | help) sed -n '2,22p' "$0" ;;
*)
	log "unknown mode '$1' (deps | gen | check)"
	exit 2
	;;
esac
