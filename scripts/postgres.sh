#!/usr/bin/env bash
# Starts or stops a throwaway PostgreSQL 15 server (with pgvector available) whose files all live in DIR.
#
#   scripts/postgres.sh start DIR   prints the DSN on stdout and writes DIR/postgres.env
#                                  (FATHOM_PG_PORT=N picks the port, e.g. to restart on the same one)
#   scripts/postgres.sh stop DIR    fast shutdown; fine when already stopped
#
# The server listens on 127.0.0.1 on a free port with its socket inside DIR, trusts local connections and runs
# as the postgres user when started by root (initdb refuses root). FATHOM_PG_FAST=1 turns off fsync and
# synchronous commit: fine for unit tests, not for durability tests or benchmarks.
source "$(dirname "$0")/lib.sh"

PG_BINDIR="${PG_BINDIR:-/usr/lib/postgresql/15/bin}"
PG_READY_TIMEOUT="${PG_READY_TIMEOUT:-60}"

usage() { die "usage: $(basename "$0") start|stop DIR"; }

# as_owner runs a command as the server's owner: postgres when we are root, else the current user.
as_owner() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

# running succeeds when the server in $DIR/data is up.
running() {
  [ -f "$DIR/data/postmaster.pid" ] && as_owner "$PG_BINDIR/pg_ctl" -D "$DIR/data" status >/dev/null 2>&1
}

prepare_dir() {
  mkdir -p "$DIR/sock"
  if [ "$(id -u)" = 0 ]; then
    id postgres >/dev/null 2>&1 || die "user postgres does not exist (install postgresql-15)"
    chown -R postgres:postgres "$DIR"
    runuser -u postgres -- test -w "$DIR" \
      || die "user postgres cannot write $DIR: a parent directory is not searchable (chmod 755 it, e.g. the mktemp -d above DIR)"
  fi
}

init_cluster() {
  [ -f "$DIR/data/PG_VERSION" ] && return 0
  log "initdb $DIR/data"
  as_owner "$PG_BINDIR/initdb" -D "$DIR/data" -U postgres --auth=trust -E UTF8 --locale=C.UTF-8 --no-sync \
    >"$DIR/initdb.log" 2>&1 || { cat "$DIR/initdb.log" >&2; die "initdb failed (log above)"; }
}

# wait_ready PORT polls until the server accepts connections.
wait_ready() {
  local port=$1 i
  for ((i = 0; i < PG_READY_TIMEOUT * 10; i++)); do
    "$PG_BINDIR/pg_isready" -q -h 127.0.0.1 -p "$port" -U postgres -d postgres && return 0
    sleep 0.1
  done
  return 1
}

start() {
  [ -x "$PG_BINDIR/postgres" ] || die "PostgreSQL not found in $PG_BINDIR: run scripts/install-postgres.sh"
  if running && [ -f "$DIR/postgres.env" ]; then
    # shellcheck source=/dev/null
    . "$DIR/postgres.env"
    log "already running in $DIR"
    echo "$FATHOM_TEST_POSTGRES_DSN"
    return 0
  fi
  prepare_dir
  init_cluster
  local port opts dsn
  port=${FATHOM_PG_PORT:-$(free_port)}
  opts="-c listen_addresses=127.0.0.1 -p $port -k '$DIR/sock'"
  if [ "${FATHOM_PG_FAST:-}" = 1 ]; then opts="$opts -c fsync=off -c synchronous_commit=off"; fi
  log "starting PostgreSQL on 127.0.0.1:$port (log $DIR/postgres.log)"
  as_owner "$PG_BINDIR/pg_ctl" -D "$DIR/data" -l "$DIR/postgres.log" -w -t "$PG_READY_TIMEOUT" -o "$opts" start \
    >&2 || { tail -n 30 "$DIR/postgres.log" >&2 2>/dev/null; die "PostgreSQL did not start (log above)"; }
  wait_ready "$port" || { tail -n 30 "$DIR/postgres.log" >&2; die "PostgreSQL not ready after ${PG_READY_TIMEOUT}s"; }
  # The extension must load; roll back so the server stays as initdb left it.
  "$PG_BINDIR/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$port" -U postgres -d postgres \
    -c 'BEGIN' -c 'CREATE EXTENSION IF NOT EXISTS vector' -c 'ROLLBACK' >&2 \
    || die "CREATE EXTENSION vector failed: run scripts/install-postgres.sh"
  dsn="postgres://postgres@127.0.0.1:$port/postgres?sslmode=disable"
  printf "export FATHOM_TEST_POSTGRES_DSN='%s'\n" "$dsn" >"$DIR/postgres.env"
  echo "$dsn"
}

stop() {
  if ! running; then
    log "not running in $DIR"
    return 0
  fi
  if ! as_owner "$PG_BINDIR/pg_ctl" -D "$DIR/data" -m fast -w -t 60 stop >&2; then
    if running; then die "could not stop PostgreSQL in $DIR"; fi
  fi
  log "stopped PostgreSQL in $DIR"
}

service_main "$@"
