#!/usr/bin/env bash
# Installs what the console's end-to-end test drives: Debian's chromium (headless) and the npm `playwright-core`
# (which never downloads a browser of its own), pinned, into the cache. Prints two lines: the directory whose
# node_modules holds playwright-core, then the chromium executable. Used by gateway/console_test.go through
# FATHOM_TEST_PLAYWRIGHT and FATHOM_TEST_CHROMIUM (scripts/test-env.sh writes them).
source "$(dirname "$0")/lib.sh"

PLAYWRIGHT_NPM_VERSION="${PLAYWRIGHT_NPM_VERSION:-1.65.1}"
DEST="$FATHOM_CACHE/npm/playwright-core-$PLAYWRIGHT_NPM_VERSION"

command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 || apt_install nodejs npm
command -v chromium >/dev/null 2>&1 || apt_install chromium
CHROMIUM=$(command -v chromium) || die "chromium not found after installing it"
if [ ! -f "$DEST/node_modules/playwright-core/package.json" ]; then
  log "npm install playwright-core@$PLAYWRIGHT_NPM_VERSION into $DEST"
  rm -rf "$DEST.tmp" && mkdir -p "$DEST.tmp"
  (cd "$DEST.tmp" && npm install --no-audit --no-fund --silent --prefix . "playwright-core@$PLAYWRIGHT_NPM_VERSION" >&2) \
    || { rm -rf "$DEST.tmp"; die "npm install of playwright-core failed (is the npm registry reachable?)"; }
  rm -rf "$DEST" && mv "$DEST.tmp" "$DEST"
fi
echo "$DEST"
echo "$CHROMIUM"
