package main

import (
	"testing"
	"time"

	fathomapi "github.com/fathom-agents/fathom"
	"github.com/fathom-agents/fathom/actors/session"
)

// TestDurationFlags: --lease-ttl (env FATHOM_LEASE_TTL) sets the session config's
// LeaseTTL and --pause-grace (env FATHOM_PAUSE_GRACE) the cluster config's PauseGrace;
// the flag wins over the variable (even a bad one); a bad variable, a negative lease or a
// non-positive grace is a clear usage error.
func TestDurationFlags(t *testing.T) {
	type flagCase struct {
		name    string
		env     string
		args    []string
		want    time.Duration
		wantErr string
	}
	for _, fl := range []struct {
		flag, env string
		got       func(fathomapi.Config) time.Duration
		cases     []flagCase
	}{
		{"lease-ttl", "FATHOM_LEASE_TTL", func(c fathomapi.Config) time.Duration { return c.Session.LeaseTTL }, []flagCase{
			{"default", "", nil, session.DefaultLeaseTTL, ""},
			{"env", "3s", nil, 3 * time.Second, ""},
			{"flag wins", "3s", []string{"--lease-ttl", "7s"}, 7 * time.Second, ""},
			{"flag wins over a bad env", "soon", []string{"--lease-ttl", "7s"}, 7 * time.Second, ""},
			{"off", "", []string{"--lease-ttl", "0"}, 0, ""},
			{"bad env", "soon", nil, 0, `bad FATHOM_LEASE_TTL "soon"`},
			{"negative", "", []string{"--lease-ttl", "-1s"}, 0, "must not be negative"},
		}},
		{"pause-grace", "FATHOM_PAUSE_GRACE", func(c fathomapi.Config) time.Duration { return c.Cluster.PauseGrace }, []flagCase{
			{"default", "", nil, defaultPauseGrace, ""},
			{"env", "15s", nil, 15 * time.Second, ""},
			{"flag wins", "15s", []string{"--pause-grace", "2m"}, 2 * time.Minute, ""},
			{"flag wins over a bad env", "long", []string{"--pause-grace", "20s"}, 20 * time.Second, ""},
			{"bad env", "long", nil, 0, `bad FATHOM_PAUSE_GRACE "long"`},
			{"zero", "", []string{"--pause-grace", "0"}, 0, "must be positive"},
			{"negative", "", []string{"--pause-grace", "-1s"}, 0, "must be positive"},
		}},
	} {
		for _, c := range fl.cases {
			t.Run(fl.flag+"/"+c.name, func(t *testing.T) {
				t.Setenv(fl.env, c.env)
				cfg, err := nodeConfig(t, "", c.args...)
				if configErr(t, err, c.wantErr) {
					return
				}
				if got := fl.got(cfg); got != c.want {
					t.Fatalf("--%s = %s, want %s", fl.flag, got, c.want)
				}
			})
		}
	}
}
