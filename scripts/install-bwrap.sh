#!/usr/bin/env bash
# Makes bubblewrap (the tool sandbox) available; prints the path of bwrap.
source "$(dirname "$0")/lib.sh"
command -v bwrap >/dev/null 2>&1 || apt_install bubblewrap
command -v bwrap >/dev/null 2>&1 || die "bwrap not found after installing bubblewrap"
command -v bwrap
