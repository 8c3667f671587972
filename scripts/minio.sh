#!/usr/bin/env bash
# Starts or stops a throwaway MinIO server (S3-compatible; a test/dev peer only) whose files live in DIR.
#
#   scripts/minio.sh start DIR   prints the endpoint (127.0.0.1:PORT) and writes DIR/minio.env with the
#                                endpoint and freshly generated root credentials
#   scripts/minio.sh stop DIR    fine when already stopped
#
# API and console listen on 127.0.0.1 on free ports; the browser UI and update checks are off. Data is in
# DIR/data, the log in DIR/minio.log, the pid in DIR/minio.pid.
source "$(dirname "$0")/lib.sh"

MINIO_READY_TIMEOUT="${MINIO_READY_TIMEOUT:-60}"

usage() { die "usage: $(basename "$0") start|stop DIR"; }

start() {
  if pid_alive "$DIR/minio.pid" && [ -f "$DIR/minio.env" ]; then
    # shellcheck source=/dev/null
    . "$DIR/minio.env"
    log "already running in $DIR"
    echo "$FATHOM_TEST_MINIO_ENDPOINT"
    return 0
  fi
  local bin ports endpoint user pass i
  bin=$("$(dirname "$0")/install-minio.sh") || die "could not install minio"
  mapfile -t ports < <(free_ports 2)
  [ "${#ports[@]}" -eq 2 ] || die "could not pick free ports"
  endpoint="127.0.0.1:${ports[0]}"
  user="fathom$(random_hex 6)"
  pass=$(random_hex 20)
  mkdir -p "$DIR/data"
  # Credentials reach minio through its environment only, never its command line.
  (umask 077 && printf "export FATHOM_TEST_MINIO_ENDPOINT='%s'\nexport FATHOM_TEST_MINIO_ACCESS_KEY='%s'\nexport FATHOM_TEST_MINIO_SECRET_KEY='%s'\n" \
    "$endpoint" "$user" "$pass" >"$DIR/minio.env.tmp")
  log "starting minio on $endpoint (log $DIR/minio.log)"
  MINIO_ROOT_USER="$user" MINIO_ROOT_PASSWORD="$pass" MINIO_BROWSER=off MINIO_UPDATE=off \
    start_bg "$DIR/minio.pid" "$DIR/minio.log" "$bin" server "$DIR/data" \
    --address "$endpoint" --console-address "127.0.0.1:${ports[1]}" --quiet
  for ((i = 0; i < MINIO_READY_TIMEOUT * 10; i++)); do
    if ! pid_alive "$DIR/minio.pid"; then
      tail -n 30 "$DIR/minio.log" >&2
      die "minio exited during start (log above)"
    fi
    curl -fsS -o /dev/null --max-time 1 "http://$endpoint/minio/health/ready" 2>/dev/null && break
    sleep 0.1
  done
  if ! curl -fsS -o /dev/null --max-time 2 "http://$endpoint/minio/health/ready" 2>/dev/null; then
    tail -n 30 "$DIR/minio.log" >&2
    stop_pid "$DIR/minio.pid" minio
    die "minio not ready within ${MINIO_READY_TIMEOUT}s (log above)"
  fi
  mv "$DIR/minio.env.tmp" "$DIR/minio.env"
  echo "$endpoint"
}

stop() { stop_pid "$DIR/minio.pid" minio; }

service_main "$@"
