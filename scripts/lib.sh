#!/usr/bin/env bash
# Shared helpers for Fathom's install/start/stop scripts. Source it; do not run it.
# Everything installed goes to a cache outside the clone so a second run is fast.
set -euo pipefail

FATHOM_CACHE="${FATHOM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/fathom}"
FATHOM_BIN="$FATHOM_CACHE/bin"
mkdir -p "$FATHOM_BIN"

log() { printf '[%s] %s\n' "$(basename "$0")" "$*" >&2; }
die() { printf '[%s] error: %s\n' "$(basename "$0")" "$*" >&2; exit 1; }

# apt_install installs Debian packages when missing (the scripts run as root on these machines).
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

# free_port prints a TCP port on 127.0.0.1 that is free right now (the OS picks it when python3 is there).
free_port() {
  local p i
  if command -v python3 >/dev/null 2>&1 && python3 -c 'import socket
s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()' 2>/dev/null; then
    return 0
  fi
  # Fallback without python3: a random high port that nothing accepts connections on.
  for ((i = 0; i < 100; i++)); do
    p=$((20000 + RANDOM % 40000))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then echo "$p"; return 0; fi
  done
  die "could not find a free TCP port on 127.0.0.1"
}

# free_ports N prints N distinct free ports, one a line.
free_ports() {
  local n=$1 p seen=" "
  while [ "$n" -gt 0 ]; do
    p=$(free_port)
    case "$seen" in *" $p "*) continue ;; esac
    seen="$seen$p "
    echo "$p"
    n=$((n - 1))
  done
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

# pid_alive PIDFILE succeeds when PIDFILE names a live process.
pid_alive() {
  local pid
  [ -f "$1" ] || return 1
  pid=$(cat "$1" 2>/dev/null) || return 1
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null
}

# start_bg PIDFILE LOGFILE CMD... starts CMD detached from our stdin/stdout (so callers capturing our output
# do not hang), in its own session, and records its pid.
start_bg() {
  local pidfile=$1 logfile=$2
  shift 2
  setsid "$@" </dev/null >"$logfile" 2>&1 &
  echo $! >"$pidfile"
}

# stop_pid PIDFILE NAME stops the process in PIDFILE (TERM, then KILL after 15 s); fine when it is gone.
stop_pid() {
  local pidfile=$1 name=$2 pid i
  if ! pid_alive "$pidfile"; then
    rm -f "$pidfile"
    log "$name not running"
    return 0
  fi
  pid=$(cat "$pidfile")
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < 150; i++)); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$pid" 2>/dev/null; then
    log "$name (pid $pid) ignored SIGTERM; sending SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
    sleep 0.2
  fi
  rm -f "$pidfile"
  log "stopped $name (pid $pid)"
}

# random_hex N prints N random bytes as hex.
random_hex() { od -An -tx1 -N"$1" /dev/urandom | tr -d ' \n'; }

# service_main is the command line of a service script (postgres.sh, consul.sh, minio.sh): `start DIR` runs the
# script's start function with DIR set (created if missing), `stop DIR` its stop function (a no-op when DIR does
# not exist). Each script defines usage, start and stop before calling it.
service_main() {
  [ $# -eq 2 ] || usage
  case "$1" in
  start)
    mkdir -p "$2"
    DIR=$(cd "$2" && pwd)
    start
    ;;
  stop)
    [ -d "$2" ] || exit 0
    DIR=$(cd "$2" && pwd)
    stop
    ;;
  *) usage ;;
  esac
}

# npm_install_pinned DEST SPEC... installs Node.js (Debian's nodejs + npm) when missing, then the npm packages SPEC
# (`name@version`, scoped names too) into DEST unless every one is already there. The install goes to DEST.tmp and
# is moved into place only when complete, so an interrupted run never leaves a half-filled DEST.
npm_install_pinned() {
  local dest=$1 spec missing=
  shift
  command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 || apt_install nodejs npm
  command -v node >/dev/null 2>&1 || die "node not found after installing nodejs"
  for spec in "$@"; do
    [ -f "$dest/node_modules/${spec%@*}/package.json" ] || missing=1
  done
  [ -n "$missing" ] || return 0
  log "npm install $* into $dest"
  rm -rf "$dest.tmp" && mkdir -p "$dest.tmp"
  (cd "$dest.tmp" && npm install --no-audit --no-fund --silent --prefix . "$@" >&2) \
    || { rm -rf "$dest.tmp"; die "npm install $* failed (is the npm registry reachable?)"; }
  rm -rf "$dest" && mv "$dest.tmp" "$dest"
}
