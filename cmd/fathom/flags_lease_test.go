package main

import (
	"flag"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/fathom-agents/fathom/actors/session"
)

// TestLeaseTTLFlag: --lease-ttl (env FATHOM_LEASE_TTL) sets the session config's
// LeaseTTL; the flag wins over the variable, a bad or negative value is a clear usage
// error.
func TestLeaseTTLFlag(t *testing.T) {
	for _, c := range []struct {
		name    string
		env     string
		args    []string
		want    time.Duration
		wantErr string
	}{
		{"default", "", nil, session.DefaultLeaseTTL, ""},
		{"env", "3s", nil, 3 * time.Second, ""},
		{"flag wins", "3s", []string{"--lease-ttl", "7s"}, 7 * time.Second, ""},
		{"flag wins over a bad env", "soon", []string{"--lease-ttl", "7s"}, 7 * time.Second, ""},
		{"off", "", []string{"--lease-ttl", "0"}, 0, ""},
		{"bad env", "soon", nil, 0, `bad FATHOM_LEASE_TTL "soon"`},
		{"negative", "", []string{"--lease-ttl", "-1s"}, 0, "must not be negative"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("FATHOM_LEASE_TTL", c.env)
			fs := flag.NewFlagSet("node", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			var f nodeFlags
			f.register(fs, t.TempDir(), "info")
			if err := fs.Parse(c.args); err != nil {
				t.Fatal(err)
			}
			cfg, err := f.config(slog.New(slog.NewTextHandler(io.Discard, nil)), io.Discard)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("error %v, want %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := cfg.Session.LeaseTTL; got != c.want {
				t.Fatalf("LeaseTTL = %s, want %s", got, c.want)
			}
		})
	}
}
