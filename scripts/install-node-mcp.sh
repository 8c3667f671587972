#!/usr/bin/env bash
# Installs Node.js (Debian's nodejs + npm when missing) and the official MCP TypeScript SDK
# (`@modelcontextprotocol/sdk` with `zod`), pinned, into the cache; prints the directory whose node_modules holds
# them. Used by the MCP client's tests (tools/mcp, actors/mcp, cmd/fathom): MCP servers nobody here wrote, served
# over stdio and streamable HTTP.
source "$(dirname "$0")/lib.sh"

MCP_SDK_NPM_VERSION="${MCP_SDK_NPM_VERSION:-1.32.2}"
ZOD_NPM_VERSION="${ZOD_NPM_VERSION:-4.6.7}"
DEST="$FATHOM_CACHE/npm/mcp-sdk-$MCP_SDK_NPM_VERSION-zod-$ZOD_NPM_VERSION"

command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 || apt_install nodejs npm
command -v node >/dev/null 2>&1 || die "node not found after installing nodejs"
if [ ! -f "$DEST/node_modules/@modelcontextprotocol/sdk/package.json" ] || [ ! -f "$DEST/node_modules/zod/package.json" ]; then
  log "npm install @modelcontextprotocol/sdk@$MCP_SDK_NPM_VERSION zod@$ZOD_NPM_VERSION into $DEST"
  rm -rf "$DEST.tmp" && mkdir -p "$DEST.tmp"
  (cd "$DEST.tmp" && npm install --no-audit --no-fund --silent --prefix . \
    "@modelcontextprotocol/sdk@$MCP_SDK_NPM_VERSION" "zod@$ZOD_NPM_VERSION" >&2) \
    || { rm -rf "$DEST.tmp"; die "npm install of the MCP SDK failed (is the npm registry reachable?)"; }
  rm -rf "$DEST" && mv "$DEST.tmp" "$DEST"
fi
echo "$DEST"
