#!/usr/bin/env bash
# Starts or stops a throwaway Consul dev agent whose files live in DIR.
#
#   scripts/consul.sh start DIR   prints the HTTP address (127.0.0.1:PORT) and writes DIR/consul.env
#   scripts/consul.sh stop DIR    fine when already stopped
#
# Started again in the same DIR, the agent listens on the same ports (a restart, as an operator would do).
# Every listener is bound to 127.0.0.1 on a port picked free (dev mode would otherwise also open fixed ports such
# as 8300-8302, 8500, 8502, 8503 and 8600). The agent logs to DIR/consul.log; its pid is in DIR/consul.pid.
source "$(dirname "$0")/lib.sh"

CONSUL_READY_TIMEOUT="${CONSUL_READY_TIMEOUT:-30}"

usage() { die "usage: $(basename "$0") start|stop DIR"; }

# leader prints the agent's current raft leader ("" while there is none).
leader() { curl -fsS --max-time 1 "http://$1/v1/status/leader" 2>/dev/null | tr -d '"'; }

start() {
  if pid_alive "$DIR/consul.pid" && [ -f "$DIR/consul.env" ]; then
    # shellcheck source=/dev/null
    . "$DIR/consul.env"
    log "already running in $DIR"
    echo "$FATHOM_TEST_CONSUL_ADDR"
    return 0
  fi
  local bin ports addr i
  bin=$("$(dirname "$0")/install-consul.sh") || die "could not install consul"
  if [ -f "$DIR/consul.ports" ]; then # a restart: the same address as before
    mapfile -t ports <"$DIR/consul.ports"
  else
    mapfile -t ports < <(free_ports 7)
  fi
  [ "${#ports[@]}" -eq 7 ] || die "could not pick free ports"
  printf '%s\n' "${ports[@]}" >"$DIR/consul.ports"
  addr="127.0.0.1:${ports[0]}"
  log "starting consul on $addr (log $DIR/consul.log)"
  start_bg "$DIR/consul.pid" "$DIR/consul.log" "$bin" agent -dev -node="fathom-test-${ports[0]}" \
    -bind=127.0.0.1 -client=127.0.0.1 -advertise=127.0.0.1 \
    -http-port="${ports[0]}" -grpc-port="${ports[1]}" -grpc-tls-port="${ports[2]}" -dns-port="${ports[3]}" \
    -serf-lan-port="${ports[4]}" -serf-wan-port="${ports[5]}" -server-port="${ports[6]}"
  for ((i = 0; i < CONSUL_READY_TIMEOUT * 10; i++)); do
    if ! pid_alive "$DIR/consul.pid"; then
      tail -n 30 "$DIR/consul.log" >&2
      die "consul exited during start (log above)"
    fi
    [ -n "$(leader "$addr")" ] && break
    sleep 0.1
  done
  if [ -z "$(leader "$addr")" ]; then
    tail -n 30 "$DIR/consul.log" >&2
    stop_pid "$DIR/consul.pid" consul
    die "consul elected no leader within ${CONSUL_READY_TIMEOUT}s (log above)"
  fi
  printf "export FATHOM_TEST_CONSUL_ADDR='%s'\n" "$addr" >"$DIR/consul.env"
  echo "$addr"
}

stop() { stop_pid "$DIR/consul.pid" consul; }

service_main "$@"
