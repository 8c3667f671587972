#!/usr/bin/env bash
# Installs Node.js (Debian's nodejs + npm when missing) and the official A2A JavaScript SDK (`@a2a-js/sdk`), pinned,
# into the cache; prints the directory whose node_modules holds it. Used by the A2A server's test (gateway/a2a): the
# SDK's client, which nobody here wrote, drives the gateway's agent card and JSON-RPC binding.
source "$(dirname "$0")/lib.sh"

A2A_SDK_NPM_VERSION="${A2A_SDK_NPM_VERSION:-1.3.0}"
DEST="$FATHOM_CACHE/npm/a2a-sdk-$A2A_SDK_NPM_VERSION"

npm_install_pinned "$DEST" "@a2a-js/sdk@$A2A_SDK_NPM_VERSION"
echo "$DEST"
