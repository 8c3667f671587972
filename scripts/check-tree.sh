#!/usr/bin/env bash
# Refuses what must never be committed: any tracked file over 1 MiB, and any tracked executable binary (ELF, Mach-O,
# PE or a WebAssembly module), whatever its name or mode. Run from a clone (or pass the clone's path); `.ci/run`
# runs it before anything else.
#
#   scripts/check-tree.sh [DIR]
#
# Exit status 1 lists every offending path with its size or kind.
set -euo pipefail
cd "${1:-$(dirname "$0")/..}"

limit=$((1024 * 1024))
bad=0
while IFS= read -r -d '' path; do
  [ -f "$path" ] || continue # deleted in the work tree but still in the index: not committed content
  size=$(stat -c %s -- "$path")
  if [ "$size" -gt "$limit" ]; then
    printf 'error: %s is %d bytes (tracked files must be at most %d bytes)\n' "$path" "$size" "$limit" >&2
    bad=1
  fi
  magic=$(head -c 4 -- "$path" | od -An -tx1 | tr -d ' \n')
  kind=
  case "$magic" in
  7f454c46) kind="an ELF executable" ;;
  cffaedfe | cefaedfe | feedfacf | feedface | cafebabe) kind="a Mach-O executable" ;;
  0061736d) kind="a WebAssembly module" ;;
  4d5a*) grep -Iq . -- "$path" || kind="a PE (Windows) executable" ;; # "MZ" starts some text too: binary only
  esac
  if [ -n "$kind" ]; then
    printf 'error: %s is %s: compiled binaries are never committed\n' "$path" "$kind" >&2
    bad=1
  fi
done < <(git ls-files -z)
if [ "$bad" -ne 0 ]; then
  echo "error: remove these files from git (git rm --cached PATH) and ignore them" >&2
  exit 1
fi
