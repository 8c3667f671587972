#!/usr/bin/env bash
# Installs what the console's end-to-end test drives: Debian's chromium (headless) and the npm `playwright-core`
# (which never downloads a browser of its own), pinned, into the cache. Prints two lines: the directory whose
# node_modules holds playwright-core, then the chromium executable. Used by gateway/console_test.go through
# FATHOM_TEST_PLAYWRIGHT and FATHOM_TEST_CHROMIUM (scripts/test-env.sh writes them).
source "$(dirname "$0")/lib.sh"

PLAYWRIGHT_NPM_VERSION="${PLAYWRIGHT_NPM_VERSION:-1.65.1}"
DEST="$FATHOM_CACHE/npm/playwright-core-$PLAYWRIGHT_NPM_VERSION"

command -v chromium >/dev/null 2>&1 || apt_install chromium
CHROMIUM=$(command -v chromium) || die "chromium not found after installing it"
npm_install_pinned "$DEST" "playwright-core@$PLAYWRIGHT_NPM_VERSION"
echo "$DEST"
echo "$CHROMIUM"
