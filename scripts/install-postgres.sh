#!/usr/bin/env bash
# Makes PostgreSQL 15 and the pgvector extension available, then prints PostgreSQL's bin directory.
#
# Debian bookworm ships PostgreSQL 15 but no pgvector package, so pgvector is built from the Debian source
# package of the next release (trixie), fetched with a private apt configuration derived from this machine's own
# /etc/apt/sources.list.d/debian.sources (the system's sources stay untouched); then `CREATE EXTENSION vector` works.
# Idempotent: does nothing when vector.so and vector.control are already installed.
source "$(dirname "$0")/lib.sh"

PG_MAJOR="${PG_MAJOR:-15}"
PG_BINDIR="/usr/lib/postgresql/$PG_MAJOR/bin"
PG_CONFIG="$PG_BINDIR/pg_config"
DEBIAN_SOURCES="${DEBIAN_SOURCES:-/etc/apt/sources.list.d/debian.sources}"
PGVECTOR_SUITE="${PGVECTOR_SUITE:-trixie}"

# vector_installed succeeds when the extension's library and control file are in place.
vector_installed() {
  [ -x "$PG_CONFIG" ] || return 1
  local lib share
  lib=$("$PG_CONFIG" --pkglibdir) && share=$("$PG_CONFIG" --sharedir) || return 1
  [ -f "$lib/vector.so" ] && [ -f "$share/extension/vector.control" ]
}

# write_src_sources turns the machine's deb822 entry for the main Debian archive into a deb-src entry for
# $PGVECTOR_SUITE. Only stanzas whose suites include a plain release name (no -security/-updates) are kept.
write_src_sources() {
  local out=$1
  [ -r "$DEBIAN_SOURCES" ] || die "$DEBIAN_SOURCES not found: cannot derive a Debian source entry for pgvector"
  awk -v suite="$PGVECTOR_SUITE" '
    function flush() {
      if (stanza != "" && keep) { printf "%s\n", stanza; n++ }
      stanza = ""; keep = 0
    }
    /^[[:space:]]*$/ { flush(); next }
    /^#/ { next }
    /^Types:/ { stanza = stanza "Types: deb-src\n"; next }
    /^Suites:/ {
      for (i = 2; i <= NF; i++) if ($i !~ /-/) keep = 1
      stanza = stanza "Suites: " suite "\n"; next
    }
    { stanza = stanza $0 "\n" }
    END { flush(); if (n == 0) exit 1 }
  ' "$DEBIAN_SOURCES" >"$out" || die "no main-archive entry in $DEBIAN_SOURCES to derive a deb-src entry from"
}

build_pgvector() {
  local W A
  W=$(mktemp -d)
  # shellcheck disable=SC2064 # expand W now: it is local to this function.
  trap "rm -rf '$W'" EXIT
  mkdir -p "$W/etc" "$W/lists/partial" "$W/cache/archives/partial" "$W/src"
  write_src_sources "$W/etc/debian-src.sources"
  A=(-o "Dir::Etc::SourceList=/dev/null" -o "Dir::Etc::SourceParts=$W/etc"
    -o "Dir::State::Lists=$W/lists" -o "Dir::Cache=$W/cache")
  log "fetching the pgvector source package from Debian $PGVECTOR_SUITE"
  apt-get -q "${A[@]}" update >&2 || die "apt-get update with the private $PGVECTOR_SUITE deb-src entry failed"
  (cd "$W/src" && apt-get "${A[@]}" source --download-only pgvector >&2) \
    || die "apt-get source --download-only pgvector failed"
  local dsc
  dsc=$(find "$W/src" -maxdepth 1 -name 'pgvector_*.dsc' | head -n1)
  [ -n "$dsc" ] || die "no pgvector .dsc was downloaded"
  (cd "$W/src" && dpkg-source -x "$(basename "$dsc")" pgvector >&2) || die "dpkg-source -x $dsc failed"
  log "building pgvector against $PG_CONFIG"
  local mk=(make -C "$W/src/pgvector" PG_CONFIG="$PG_CONFIG" OPTFLAGS="" with_llvm=no)
  "${mk[@]}" >"$W/build.log" 2>&1 || { tail -n 40 "$W/build.log" >&2; die "building pgvector failed"; }
  "${mk[@]}" install >>"$W/build.log" 2>&1 || { tail -n 40 "$W/build.log" >&2; die "installing pgvector failed"; }
}

main() {
  [ -x "$PG_BINDIR/postgres" ] || apt_install "postgresql-$PG_MAJOR"
  [ -x "$PG_BINDIR/postgres" ] || die "PostgreSQL $PG_MAJOR server not found in $PG_BINDIR after install"
  if ! vector_installed; then
    apt_install "postgresql-server-dev-$PG_MAJOR" make gcc dpkg-dev
    [ -x "$PG_CONFIG" ] || die "$PG_CONFIG not found after installing postgresql-server-dev-$PG_MAJOR"
    build_pgvector
    vector_installed || die "pgvector build finished but vector.so/vector.control are not in place"
    log "installed pgvector into $("$PG_CONFIG" --pkglibdir)"
  fi
  echo "$PG_BINDIR"
}

main "$@"
