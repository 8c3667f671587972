#!/usr/bin/env bash
# Installs Node.js (Debian's nodejs + npm when missing) and the official AG-UI TypeScript client (`@ag-ui/client`,
# whose HttpAgent front-ends use) with its `@ag-ui/core` (the protocol's event schemas), pinned, into the cache; prints
# the directory whose node_modules holds them. Used by the AG-UI endpoint's test (gateway/agui).
source "$(dirname "$0")/lib.sh"

AGUI_NPM_VERSION="${AGUI_NPM_VERSION:-1.0.0}"
DEST="$FATHOM_CACHE/npm/ag-ui-$AGUI_NPM_VERSION"

npm_install_pinned "$DEST" "@ag-ui/client@$AGUI_NPM_VERSION" "@ag-ui/core@$AGUI_NPM_VERSION"
echo "$DEST"
