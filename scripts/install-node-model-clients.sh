#!/usr/bin/env bash
# Installs Node.js (Debian's nodejs + npm when missing) and the current official model clients from npm, pinned,
# into the cache: `openai` 6.x and `@anthropic-ai/sdk`. Prints the directory whose node_modules holds them. Used by
# mock-llm's protocol-fidelity tests (llm/mock/npm_test.go), next to the older openai 4.x of install-node-openai.sh.
source "$(dirname "$0")/lib.sh"

OPENAI6_NPM_VERSION="${OPENAI6_NPM_VERSION:-6.49.0}"
ANTHROPIC_NPM_VERSION="${ANTHROPIC_NPM_VERSION:-1.12.0}"
DEST="$FATHOM_CACHE/npm/model-clients-openai-$OPENAI6_NPM_VERSION-anthropic-$ANTHROPIC_NPM_VERSION"

npm_install_pinned "$DEST" "openai@$OPENAI6_NPM_VERSION" "@anthropic-ai/sdk@$ANTHROPIC_NPM_VERSION"
echo "$DEST"
