#!/usr/bin/env bash
# Brings up (or tears down) every real service the integration tests use, all under DIR:
# PostgreSQL 15 + pgvector, a Consul dev agent and MinIO, each on 127.0.0.1 and free ports; bubblewrap; and the official
# `openai` (4.x and 6.x) and `@anthropic-ai/sdk` npm clients (for mock-llm's protocol-fidelity tests); Debian's python3-websockets (the gateway's independent
# WebSocket client); the official MCP TypeScript SDK (`@modelcontextprotocol/sdk`, MCP servers for the MCP client's tests);
# the official A2A JavaScript SDK (`@a2a-js/sdk`, the client of the A2A server's test);
# the official AG-UI client (`@ag-ui/client` and `@ag-ui/core`, the AG-UI endpoint's test);
# Debian's chromium and the npm playwright-core (the web console's end-to-end test).
#
#   scripts/test-env.sh up DIR     installs what is missing, starts the services, writes DIR/env and prints its
#                                  path; `. DIR/env` then exports FATHOM_TEST_* for internal/testenv
#   scripts/test-env.sh down DIR   stops whatever was started; safe to call twice
#
# DIR must be reachable by the postgres user when run as root (a fresh `mktemp -d` under /tmp is).
# FATHOM_PG_FAST=1 starts PostgreSQL without fsync (unit tests); leave it unset for benchmarks.
source "$(dirname "$0")/lib.sh"

HERE=$(cd "$(dirname "$0")" && pwd)
SERVICES=(postgres consul minio)

usage() { die "usage: $(basename "$0") up|down DIR"; }

# install_all installs PostgreSQL/pgvector and bubblewrap (the sandbox's isolation; with
# FATHOM_TEST_REQUIRE_SERVICES set its tests must not skip), then builds Consul and MinIO side by side (each takes
# minutes on the first run and is instant afterwards).
install_all() {
  "$HERE/install-go-deps.sh" >/dev/null
  "$HERE/install-bwrap.sh" >/dev/null
  "$HERE/install-postgres.sh" >/dev/null
  local consul_pid minio_pid failed=()
  "$HERE/install-consul.sh" >/dev/null &
  consul_pid=$!
  "$HERE/install-minio.sh" >/dev/null &
  minio_pid=$!
  wait "$consul_pid" || failed+=(consul)
  wait "$minio_pid" || failed+=(minio)
  [ ${#failed[@]} -eq 0 ] || die "installing ${failed[*]} failed (see messages above)"
}

down() {
  local s rc=0
  # Reverse start order; keep going when one stop fails so nothing is left behind.
  for ((i = ${#SERVICES[@]} - 1; i >= 0; i--)); do
    s=${SERVICES[i]}
    [ -d "$DIR/$s" ] || continue
    "$HERE/$s.sh" stop "$DIR/$s" || { log "stopping $s failed"; rc=1; }
  done
  rm -f "$DIR/env"
  return "$rc"
}

up() {
  install_all
  # The postgres user must be able to reach DIR/postgres when we run as root.
  chmod 755 "$DIR"
  UP_DONE=0
  trap 'if [ "$UP_DONE" != 1 ]; then log "start failed; stopping what was started"; down || true; fi' EXIT
  local s
  for s in "${SERVICES[@]}"; do
    "$HERE/$s.sh" start "$DIR/$s" >/dev/null || die "starting $s failed"
  done
  local node_openai
  node_openai=$("$HERE/install-node-openai.sh") || die "installing the openai npm client failed"
  local node_model_clients
  node_model_clients=$("$HERE/install-node-model-clients.sh") || die "installing the openai 6 and anthropic npm clients failed"
  local node_mcp
  node_mcp=$("$HERE/install-node-mcp.sh") || die "installing the @modelcontextprotocol/sdk npm package failed"
  local node_a2a
  node_a2a=$("$HERE/install-node-a2a.sh") || die "installing the @a2a-js/sdk npm package failed"
  local node_agui
  node_agui=$("$HERE/install-node-agui.sh") || die "installing the @ag-ui/client npm package failed"
  local python_websockets
  python_websockets=$("$HERE/install-python-websockets.sh") || die "installing python3-websockets failed"
  local console_browser
  console_browser=$("$HERE/install-console-test.sh") || die "installing chromium and playwright-core failed"
  {
    echo "export FATHOM_TEST_REQUIRE_SERVICES=1"
    printf "export FATHOM_TEST_NODE_OPENAI='%s'\n" "$node_openai"
    printf "export FATHOM_TEST_NODE_MODEL_CLIENTS='%s'\n" "$node_model_clients"
    printf "export FATHOM_TEST_PYTHON_WEBSOCKETS='%s'\n" "$python_websockets"
    printf "export FATHOM_TEST_PLAYWRIGHT='%s'\n" "$(sed -n 1p <<<"$console_browser")"
    printf "export FATHOM_TEST_CHROMIUM='%s'\n" "$(sed -n 2p <<<"$console_browser")"
    printf "export FATHOM_TEST_NODE_MCP='%s'\n" "$node_mcp"
    printf "export FATHOM_TEST_NODE_A2A='%s'\n" "$node_a2a"
    printf "export FATHOM_TEST_NODE_AGUI='%s'\n" "$node_agui"
    for s in "${SERVICES[@]}"; do cat "$DIR/$s/$s.env"; done
  } >"$DIR/env.tmp"
  chmod 600 "$DIR/env.tmp"
  mv "$DIR/env.tmp" "$DIR/env"
  UP_DONE=1
  log "services up; run: . $DIR/env"
  echo "$DIR/env"
}

[ $# -eq 2 ] || usage
case "$1" in
up)
  mkdir -p "$2"
  DIR=$(cd "$2" && pwd)
  up
  ;;
down)
  [ -d "$2" ] || exit 0
  DIR=$(cd "$2" && pwd)
  down
  ;;
*) usage ;;
esac
