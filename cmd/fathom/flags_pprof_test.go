package main

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestPprofFlag: --pprof, else env FATHOM_PPROF, else the configuration file's pprof,
// else off; it needs --metrics-listen, where the profiles are served.
func TestPprofFlag(t *testing.T) {
	dir := t.TempDir()
	on := filepath.Join(dir, "on.yaml")
	if err := os.WriteFile(on, []byte("pprof: true\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	listen := []string{"--metrics-listen", "127.0.0.1:0"}
	for _, c := range []struct {
		name    string
		env     string
		args    []string
		want    bool
		wantErr bool
	}{
		{"default", "", listen, false, false},
		{"flag", "", append([]string{"--pprof"}, listen...), true, false},
		{"env", "true", listen, true, false},
		{"flag wins over env", "true", append([]string{"--pprof=false"}, listen...), false, false},
		{"config key", "", append([]string{"--config", on}, listen...), true, false},
		{"flag wins over config key", "", append([]string{"--config", on, "--pprof=false"}, listen...), false, false},
		{"bad env", "sometimes", listen, false, true},
		{"no metrics listener", "", []string{"--pprof"}, false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv(envPprof, c.env)
			t.Setenv("FATHOM_METRICS_LISTEN", "")
			cfg, err := nodeConfig(t, "", c.args...)
			if c.wantErr {
				if !errors.Is(err, errUsage) {
					t.Fatalf("err = %v, want a usage error", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Pprof != c.want {
				t.Fatalf("Pprof = %v, want %v", cfg.Pprof, c.want)
			}
		})
	}
}
