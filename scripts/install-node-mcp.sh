#!/usr/bin/env bash
# Installs Node.js (Debian's nodejs + npm when missing) and the official MCP TypeScript SDK
# (`@modelcontextprotocol/sdk` with `zod`), pinned, into the cache; prints the directory whose node_modules holds
# them. Used by the MCP client's tests (tools/mcp, actors/mcp, cmd/fathom): MCP servers nobody here wrote, served
# over stdio and streamable HTTP.
source "$(dirname "$0")/lib.sh"

MCP_SDK_NPM_VERSION="${MCP_SDK_NPM_VERSION:-1.32.2}"
ZOD_NPM_VERSION="${ZOD_NPM_VERSION:-4.6.7}"
DEST="$FATHOM_CACHE/npm/mcp-sdk-$MCP_SDK_NPM_VERSION-zod-$ZOD_NPM_VERSION"

npm_install_pinned "$DEST" "@modelcontextprotocol/sdk@$MCP_SDK_NPM_VERSION" "zod@$ZOD_NPM_VERSION"
echo "$DEST"
