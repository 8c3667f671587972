#!/usr/bin/env bash
# Installs Node.js (Debian's nodejs + npm when missing) and the official `openai` npm client, pinned, into the
# cache; prints the directory whose node_modules holds it. Used by the protocol-fidelity test of mock-llm.
source "$(dirname "$0")/lib.sh"

OPENAI_NPM_VERSION="${OPENAI_NPM_VERSION:-4.104.0}"
DEST="$FATHOM_CACHE/npm/openai-$OPENAI_NPM_VERSION"

command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 || apt_install nodejs npm
command -v node >/dev/null 2>&1 || die "node not found after installing nodejs"
if [ ! -f "$DEST/node_modules/openai/package.json" ]; then
  log "npm install openai@$OPENAI_NPM_VERSION into $DEST"
  mkdir -p "$DEST.tmp"
  (cd "$DEST.tmp" && npm install --no-audit --no-fund --silent --prefix . "openai@$OPENAI_NPM_VERSION" >&2) \
    || { rm -rf "$DEST.tmp"; die "npm install openai@$OPENAI_NPM_VERSION failed (is the npm registry reachable?)"; }
  rm -rf "$DEST" && mv "$DEST.tmp" "$DEST"
fi
echo "$DEST"
