#!/usr/bin/env bash
# record.sh FATHOM DIR: runs the corpus's scripted sessions with the fathom binary FATHOM (any build) on an
# embedded journal in DIR (DIR/journal.db), then stops. journal_corpus_test.go turns that journal into a fixture:
#
#   actors/session/core/testdata/corpus/record.sh /tmp/fathom-old /tmp/corpus-old
#   go test ./actors/session/core/ -run TestJournalCorpus -record-corpus NAME=/tmp/corpus-old/journal.db -update-golden
#
# Sessions: corpus-demo (the demo model: a plan, sub-agents, their tools and hand-offs), corpus-fork (a fork of it
# after its first step), corpus-human (ask_human answered), corpus-approval (a write_artifact call approved by a
# human), corpus-cancel (cancelled while it waits for a human).
set -euo pipefail
bin=$(realpath "$1")
dir=$(realpath -m "$2")
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$dir"
cd "$dir"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

# wait_line FILE REGEX: prints the first match of REGEX in FILE, waiting up to 60 s for it.
wait_line() {
	for _ in $(seq 600); do
		if m=$(grep -oE "$2" "$1" 2>/dev/null | head -1) && [ -n "$m" ]; then echo "$m"; return; fi
		sleep 0.1
	done
	echo "record.sh: no line matching $2 in $1" >&2; cat "$1" >&2; exit 1
}

# start_node ARGS...: starts a node on the journal; sets url and node.
start_node() {
	: >"$dir/node.out"
	"$bin" node --listen 127.0.0.1:0 --data-dir "$dir" "$@" >"$dir/node.out" 2>>"$dir/node.log" &
	node=$!
	pids+=("$node")
	url=$(wait_line "$dir/node.out" 'http://[0-9.:]+')
}

stop_node() {
	kill -TERM "$node"
	wait "$node" || true
}

# call METHOD PATH [JSON]: the node's answer.
call() { curl -sS --max-time 30 -X "$1" -H 'Content-Type: application/json' ${3:+-d "$3"} "$url$2"; }

# status ID: the session's status.
status() { call GET "/v1/sessions/$1" | python3 -c 'import json,sys; print(json.load(sys.stdin).get("state",{}).get("status",""))'; }

# wait_status ID STATUS: waits up to 60 s for the session's status.
wait_status() {
	for _ in $(seq 600); do
		[ "$(status "$1")" = "$2" ] && return
		sleep 0.1
	done
	echo "record.sh: session $1 is $(status "$1"), want $2" >&2; exit 1
}

# awaiting ID: the request id of the session's open human-input request.
awaiting() { call GET "/v1/sessions/$1" | python3 -c 'import json,sys; print(json.load(sys.stdin)["state"]["awaiting"][0]["request_id"])'; }

# The demo model: sub-agents and tools, then a fork after the first step.
start_node
call POST /v1/sessions '{"session_id":"corpus-demo","goal":"Write a haiku about event sourcing"}' >/dev/null
wait_status corpus-demo SESSION_STATUS_COMPLETED
call POST /v1/sessions/corpus-demo/fork '{"new_session_id":"corpus-fork","step_index":1}' >/dev/null
wait_status corpus-fork SESSION_STATUS_COMPLETED
stop_node

# A scripted model: a human's answer, an approval, a cancel.
"$bin" mock-llm --listen 127.0.0.1:0 --script "$here/script.json" >"$dir/mock.out" 2>>"$dir/mock.log" &
pids+=("$!")
model=$(wait_line "$dir/mock.out" 'http://[0-9.:]+')
OPENAI_BASE_URL="$model/v1" OPENAI_API_KEY=corpus start_node --config "$here/approval.yaml"
call POST /v1/sessions '{"session_id":"corpus-human","goal":"HUMANGOAL pick a color"}' >/dev/null
wait_status corpus-human SESSION_STATUS_AWAITING_HUMAN
call POST /v1/sessions/corpus-human/input "{\"request_id\":\"$(awaiting corpus-human)\",\"input\":\"blue\"}" >/dev/null
wait_status corpus-human SESSION_STATUS_COMPLETED
call POST /v1/sessions '{"session_id":"corpus-approval","goal":"APPROVEGOAL save a note"}' >/dev/null
wait_status corpus-approval SESSION_STATUS_AWAITING_HUMAN
call POST /v1/sessions/corpus-approval/input "{\"request_id\":\"$(awaiting corpus-approval)\",\"input\":{\"decision\":\"approve\"}}" >/dev/null
wait_status corpus-approval SESSION_STATUS_COMPLETED
call POST /v1/sessions '{"session_id":"corpus-cancel","goal":"CANCELGOAL pick a size"}' >/dev/null
wait_status corpus-cancel SESSION_STATUS_AWAITING_HUMAN
call POST /v1/sessions/corpus-cancel/cancel '{"reason":"corpus","by":"record.sh"}' >/dev/null
wait_status corpus-cancel SESSION_STATUS_CANCELLED
stop_node
echo "record.sh: journal in $dir/journal.db"
