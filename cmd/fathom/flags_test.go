package main

import (
	"testing"

	"github.com/fathom-agents/fathom/actors/session"
)

// TestMaxReplansFlag: --max-replans (env FATHOM_MAX_REPLANS) sets the session config's
// MaxReplans; the flag wins over the variable, and 0 disables re-planning.
func TestMaxReplansFlag(t *testing.T) {
	for _, c := range []struct {
		name string
		env  string
		args []string
		want int
	}{
		{"default", "", nil, session.DefaultMaxReplans},
		{"env", "5", nil, 5},
		{"flag wins", "5", []string{"--max-replans", "1"}, 1},
		{"disabled", "", []string{"--max-replans", "0"}, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("FATHOM_MAX_REPLANS", c.env)
			cfg, err := nodeConfig(t, "", c.args...)
			configErr(t, err, "")
			if got := cfg.Session.MaxReplans; got != c.want {
				t.Fatalf("MaxReplans = %d, want %d", got, c.want)
			}
		})
	}
}
