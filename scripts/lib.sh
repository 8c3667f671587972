#!/usr/bin/env bash
# Shared helpers for Fathom's install/start/stop scripts. Source it; do not run it.
# Everything installed goes to a cache outside the clone so a second run is fast.
set -euo pipefail

FATHOM_CACHE="${FATHOM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/fathom}"
FATHOM_BIN="$FATHOM_CACHE/bin"
mkdir -p "$FATHOM_BIN"

log() { printf '[%s] %s\n' "$(basename "$0")" "$*" >&2; }
die() { printf '[%s] error: %s\n' "$(basename "$0")" "$*" >&2; exit 1; }

# need_root_apt installs Debian packages when missing (the scripts run as root on these machines).
apt_install() {
  local missing=()
  for p in "$@"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
  [ ${#missing[@]} -eq 0 ] && return 0
  command -v apt-get >/dev/null || die "apt-get not found; install ${missing[*]} by hand"
  [ "$(id -u)" = 0 ] || die "installing ${missing[*]} needs root (apt-get)"
  log "apt-get install ${missing[*]}"
  # Refresh indexes once if the first attempt cannot find a package.
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}" >/dev/null 2>&1 || {
    DEBIAN_FRONTEND=noninteractive apt-get update >/dev/null 2>&1 || true
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}" >&2 \
      || die "apt-get install ${missing[*]} failed"
  }
}

# free_port prints a TCP port on 127.0.0.1 that is free right now.
free_port() {
  python3 - <<'PY' 2>/dev/null || go run "$(dirname "${BASH_SOURCE[0]}")/freeport" 
import socket
s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()
PY
}

# wait_http URL SECONDS waits until URL answers 2xx.
wait_http() {
  local url=$1 secs=${2:-30} i
  for ((i = 0; i < secs * 10; i++)); do
    curl -fsS -o /dev/null --max-time 1 "$url" 2>/dev/null && return 0
    sleep 0.1
  done
  return 1
}
