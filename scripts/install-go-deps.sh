#!/usr/bin/env bash
# Makes what `go test -race` needs available: cgo requires a C compiler. Prints the compiler's path.
source "$(dirname "$0")/lib.sh"
command -v go >/dev/null 2>&1 || die "go not found on PATH"
cc=$(go env CC)
command -v "${cc:-gcc}" >/dev/null 2>&1 || apt_install gcc libc6-dev
command -v "${cc:-gcc}" >/dev/null 2>&1 || die "C compiler ${cc:-gcc} not found: go test -race needs cgo"
command -v "${cc:-gcc}"
