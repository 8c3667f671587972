package main

import (
	"flag"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	fathomapi "github.com/fathom-agents/fathom"
)

// nodeConfig parses args as the flags of a node command and returns the config they make,
// with the error nodeFlags.config answers. A non-empty file is written to a config file
// the flags name first (--config), so its keys sit under the flags and the environment.
func nodeConfig(t *testing.T, file string, args ...string) (fathomapi.Config, error) {
	t.Helper()
	if file != "" {
		p := filepath.Join(t.TempDir(), "fathom.yaml")
		if err := os.WriteFile(p, []byte(file), 0o600); err != nil {
			t.Fatal(err)
		}
		args = append([]string{"--config", p}, args...)
	}
	fs := flag.NewFlagSet("node", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var f nodeFlags
	f.register(fs, t.TempDir(), "info")
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return f.config(slog.New(slog.NewTextHandler(io.Discard, nil)), io.Discard)
}

// configErr checks a nodeConfig error against a case's wanted error text: with want set,
// err must contain it and the case is done (true); without, err must be nil.
func configErr(t *testing.T, err error, want string) (done bool) {
	t.Helper()
	if want != "" {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("error %v, want %q", err, want)
		}
		return true
	}
	if err != nil {
		t.Fatal(err)
	}
	return false
}
