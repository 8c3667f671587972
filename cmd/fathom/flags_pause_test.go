package main

import (
	"flag"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// TestPauseGraceFlag: --pause-grace (env FATHOM_PAUSE_GRACE) sets the cluster config's
// PauseGrace; the flag wins over the variable; a bad, zero or negative value is a clear
// usage error.
func TestPauseGraceFlag(t *testing.T) {
	for _, c := range []struct {
		name    string
		env     string
		args    []string
		want    time.Duration
		wantErr string
	}{
		{"default", "", nil, defaultPauseGrace, ""},
		{"env", "15s", nil, 15 * time.Second, ""},
		{"flag wins", "15s", []string{"--pause-grace", "2m"}, 2 * time.Minute, ""},
		{"flag wins over a bad env", "long", []string{"--pause-grace", "20s"}, 20 * time.Second, ""},
		{"bad env", "long", nil, 0, `bad FATHOM_PAUSE_GRACE "long"`},
		{"zero", "", []string{"--pause-grace", "0"}, 0, "must be positive"},
		{"negative", "", []string{"--pause-grace", "-1s"}, 0, "must be positive"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("FATHOM_PAUSE_GRACE", c.env)
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
			if got := cfg.Cluster.PauseGrace; got != c.want {
				t.Fatalf("PauseGrace = %s, want %s", got, c.want)
			}
		})
	}
}
