#!/usr/bin/env bash
# Makes protoc and the two code generators `make proto` needs available; prints the cache bin directory,
# where protoc-gen-go and protoc-gen-go-grain live (put it first on PATH when running protoc).
source "$(dirname "$0")/lib.sh"

PROTOC_GEN_GO_VERSION="${PROTOC_GEN_GO_VERSION:-v1.36.11}"
PROTOACTOR_VERSION="${PROTOACTOR_VERSION:-v0.0.0-20240822202345-3c0e61ca19c9}"

command -v protoc >/dev/null 2>&1 || apt_install protobuf-compiler
command -v protoc >/dev/null 2>&1 || die "protoc not found after installing protobuf-compiler"
command -v go >/dev/null 2>&1 || die "go not found on PATH"

# go_install PKG@VERSION BINARY installs BINARY into the cache unless it is already there.
go_install() {
  local pkg=$1 bin=$2
  [ -x "$FATHOM_BIN/$bin" ] && return 0
  log "go install $pkg"
  GOBIN="$FATHOM_BIN" go install "$pkg" >&2 || die "go install $pkg failed"
}

go_install "google.golang.org/protobuf/cmd/protoc-gen-go@$PROTOC_GEN_GO_VERSION" protoc-gen-go
go_install "github.com/asynkron/protoactor-go/protobuf/protoc-gen-go-grain@$PROTOACTOR_VERSION" protoc-gen-go-grain
echo "$FATHOM_BIN"
