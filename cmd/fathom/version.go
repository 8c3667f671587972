package main

import (
	"context"
	"fmt"
	"io"
	"runtime"

	"github.com/fathom-agents/fathom/internal/buildinfo"
)

// version is set at build time with -ldflags "-X main.version=..." (kept for existing
// build scripts; -X github.com/fathom-agents/fathom/internal/buildinfo.Version=... is the
// same and what the members advertise).
var version = "dev"

func init() {
	if version != "dev" {
		buildinfo.Version = version
	}
}

func runVersion(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("version", "", stderr)
	if _, err := parseFlags(fs, args); err != nil {
		return err
	}
	rev := ""
	if r := buildinfo.Revision(); r != "" {
		rev = " (" + r + ")"
	}
	fmt.Fprintf(stdout, "fathom %s%s %s %s/%s\n", buildinfo.Version, rev, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return nil
}
