package main

import (
	"testing"
	"time"
)

// TestLongTermMemoryFlags: --long-term-memory and --memory-ttl (env
// FATHOM_LONG_TERM_MEMORY, FATHOM_MEMORY_TTL, config keys memory.long_term and
// memory.ttl) turn long-term memory on and set the memories' TTL; the flag wins over the
// environment, which wins over the file; a TTL without long-term memory and bad values
// are usage errors naming the setting.
func TestLongTermMemoryFlags(t *testing.T) {
	for _, c := range []struct {
		name     string
		env, ttl string
		file     string
		args     []string
		on       bool
		wantTTL  time.Duration
		wantErr  string
	}{
		{name: "default off"},
		{name: "flag", args: []string{"--long-term-memory"}, on: true},
		{name: "env", env: "true", ttl: "48h", on: true, wantTTL: 48 * time.Hour},
		{name: "flag wins over env", env: "true", args: []string{"--long-term-memory=false"}},
		{name: "file", file: "memory:\n  long_term: true\n  ttl: 30d\n", on: true, wantTTL: 30 * 24 * time.Hour},
		{name: "env wins over file", env: "false", file: "memory:\n  long_term: true\n"},
		{name: "ttl flag", args: []string{"--long-term-memory", "--memory-ttl", "2h"}, on: true, wantTTL: 2 * time.Hour},
		{name: "ttl without memory", args: []string{"--memory-ttl", "2h"}, wantErr: "--memory-ttl 2h needs long-term memory"},
		{name: "bad ttl", args: []string{"--long-term-memory", "--memory-ttl", "soon"}, wantErr: "bad --memory-ttl"},
		{name: "bad env", env: "yes please", wantErr: "FATHOM_LONG_TERM_MEMORY"},
		{name: "bad file key", file: "memory:\n  long_term: maybe\n", wantErr: "memory.long_term: want true or false"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("FATHOM_LONG_TERM_MEMORY", c.env)
			t.Setenv("FATHOM_MEMORY_TTL", c.ttl)
			cfg, err := nodeConfig(t, c.file, c.args...)
			if configErr(t, err, c.wantErr) {
				return
			}
			if cfg.Memory.LongTerm != c.on || cfg.Memory.LongTermTTL != c.wantTTL {
				t.Fatalf("long-term %v ttl %s, want %v %s", cfg.Memory.LongTerm, cfg.Memory.LongTermTTL, c.on, c.wantTTL)
			}
		})
	}
}
