#!/usr/bin/env bash
# Makes Debian's python3-websockets available (the independent WebSocket client of the gateway's end-to-end tests,
# gateway/testdata/wsclient.py); prints the path of the python3 that imports it. Debian's interpreter is used on
# purpose: a python3 earlier on PATH (pyenv, a venv) does not see Debian's packages.
source "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
"$PY" -c 'import websockets' >/dev/null 2>&1 || apt_install python3 python3-websockets
"$PY" -c 'import websockets' >/dev/null 2>&1 || die "$PY cannot import websockets after installing python3-websockets"
echo "$PY"
