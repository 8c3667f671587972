#!/usr/bin/env bash
# Builds the MinIO server (S3-compatible, test/dev peer only) into the cache (first run 6-10 min).
# Prints the binary's path.
source "$(dirname "$0")/lib.sh"
MINIO_VERSION="${MINIO_VERSION:-v0.0.0-20260212201848-7aac2a2c5b7c}"
out="$FATHOM_BIN/minio-$MINIO_VERSION"
if [ -x "$out" ]; then echo "$out"; exit 0; fi
command -v go >/dev/null || die "go not found on PATH"
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
log "building minio $MINIO_VERSION (first time only, ~8 min)"
GOBIN="$W" GOFLAGS="" go install -trimpath -ldflags="-s -w" "github.com/minio/minio@$MINIO_VERSION" >&2 \
  || die "go install github.com/minio/minio@$MINIO_VERSION failed"
mv "$W/minio" "$out"
log "installed $out"
echo "$out"
