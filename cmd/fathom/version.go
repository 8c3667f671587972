package main

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func runVersion(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("version", "", stderr)
	if _, err := parseFlags(fs, args); err != nil {
		return err
	}
	rev := ""
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				rev = " (" + s.Value[:min(12, len(s.Value))] + ")"
			}
		}
	}
	fmt.Fprintf(stdout, "fathom %s%s %s %s/%s\n", version, rev, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return nil
}
