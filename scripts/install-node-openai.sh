#!/usr/bin/env bash
# Installs Node.js (Debian's nodejs + npm when missing) and the official `openai` npm client, pinned, into the
# cache; prints the directory whose node_modules holds it. Used by the protocol-fidelity test of mock-llm.
source "$(dirname "$0")/lib.sh"

OPENAI_NPM_VERSION="${OPENAI_NPM_VERSION:-4.104.0}"
DEST="$FATHOM_CACHE/npm/openai-$OPENAI_NPM_VERSION"

npm_install_pinned "$DEST" "openai@$OPENAI_NPM_VERSION"
echo "$DEST"
