#!/usr/bin/env bash
# Installs Node.js (Debian's nodejs + npm when missing) and the current official model clients from npm, pinned,
# into the cache: `openai` 6.x and `@anthropic-ai/sdk`. Prints the directory whose node_modules holds them. Used by
# mock-llm's protocol-fidelity tests (llm/mock/npm_test.go), next to the older openai 4.x of install-node-openai.sh.
source "$(dirname "$0")/lib.sh"

OPENAI6_NPM_VERSION="${OPENAI6_NPM_VERSION:-6.49.0}"
ANTHROPIC_NPM_VERSION="${ANTHROPIC_NPM_VERSION:-1.12.0}"
DEST="$FATHOM_CACHE/npm/model-clients-openai-$OPENAI6_NPM_VERSION-anthropic-$ANTHROPIC_NPM_VERSION"

command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 || apt_install nodejs npm
command -v node >/dev/null 2>&1 || die "node not found after installing nodejs"
if [ ! -f "$DEST/node_modules/openai/package.json" ] || [ ! -f "$DEST/node_modules/@anthropic-ai/sdk/package.json" ]; then
  log "npm install openai@$OPENAI6_NPM_VERSION @anthropic-ai/sdk@$ANTHROPIC_NPM_VERSION into $DEST"
  rm -rf "$DEST.tmp" && mkdir -p "$DEST.tmp"
  (cd "$DEST.tmp" && npm install --no-audit --no-fund --silent --prefix . \
    "openai@$OPENAI6_NPM_VERSION" "@anthropic-ai/sdk@$ANTHROPIC_NPM_VERSION" >&2) \
    || { rm -rf "$DEST.tmp"; die "npm install of the model clients failed (is the npm registry reachable?)"; }
  rm -rf "$DEST" && mv "$DEST.tmp" "$DEST"
fi
echo "$DEST"
