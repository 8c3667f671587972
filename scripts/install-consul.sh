#!/usr/bin/env bash
# Builds the Consul agent from the Go module proxy into the cache (first run ~10-12 min, then instant).
# Prints the binary's path. `go install github.com/hashicorp/consul@VERSION` fails because Consul's go.mod has
# replace directives for its own submodules, so the module source is copied and built with those replaces dropped.
source "$(dirname "$0")/lib.sh"
CONSUL_VERSION="${CONSUL_VERSION:-1.22.5}"
out="$FATHOM_BIN/consul-$CONSUL_VERSION"
if [ -x "$out" ]; then echo "$out"; exit 0; fi
command -v go >/dev/null || die "go not found on PATH"
W=$(mktemp -d); trap 'chmod -R u+w "$W" 2>/dev/null; rm -rf "$W"' EXIT
log "building consul $CONSUL_VERSION (first time only, ~10 min)"
json=$(go mod download -json "github.com/hashicorp/consul@v$CONSUL_VERSION" 2>&1) || true
dir=$(printf '%s\n' "$json" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
[ -n "$dir" ] || printf '%s\n' "$json" >&2
{ [ -n "$dir" ] && [ -d "$dir" ]; } || die "could not download github.com/hashicorp/consul@v$CONSUL_VERSION from the Go module proxy"
cp -r "$dir" "$W/src" && chmod -R u+w "$W/src"
cd "$W/src"
for m in api envoyextensions proto-public sdk troubleshoot; do go mod edit -dropreplace="github.com/hashicorp/consul/$m"; done
go mod download >/dev/null 2>&1 || die "go mod download for consul failed"
go build -mod=mod -trimpath -ldflags="-s -w" -o "$out.tmp" . || die "consul build failed"
mv "$out.tmp" "$out"
log "installed $out"
echo "$out"
