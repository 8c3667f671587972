package main

import (
	"testing"

	"github.com/fathom-agents/fathom/persistence"
)

// TestMemoryRetrievalFlags: --memory-retrieval and --memory-retrieval-weights (env
// FATHOM_MEMORY_RETRIEVAL, FATHOM_MEMORY_RETRIEVAL_WEIGHTS, config keys
// memory.retrieval and memory.retrieval_weights) set the session config's Retrieval;
// the flag wins over the environment, which wins over the file; bad values are usage
// errors naming the setting.
func TestMemoryRetrievalFlags(t *testing.T) {
	for _, c := range []struct {
		name      string
		env, envW string
		file      string
		args      []string
		want      persistence.Retrieval
		wantErr   string
	}{
		{name: "default", want: persistence.Retrieval{}},
		{name: "env", env: "text", want: persistence.Retrieval{Mode: "text"}},
		{name: "flag wins", env: "text", args: []string{"--memory-retrieval", "vector"}, want: persistence.Retrieval{Mode: "vector"}},
		{name: "file", file: "memory:\n  retrieval: text\n  retrieval_weights: 1/3\n", want: persistence.Retrieval{Mode: "text", VectorWeight: 1, TextWeight: 3}},
		{name: "env wins over file", env: "vector", envW: "2/1", file: "memory:\n  retrieval: text\n  retrieval_weights: 1/3\n", want: persistence.Retrieval{Mode: "vector", VectorWeight: 2, TextWeight: 1}},
		{name: "weights flag", args: []string{"--memory-retrieval-weights", "1/2.5"}, want: persistence.Retrieval{VectorWeight: 1, TextWeight: 2.5}},
		{name: "bad mode", args: []string{"--memory-retrieval", "bm25"}, wantErr: "--memory-retrieval"},
		{name: "bad weights", args: []string{"--memory-retrieval-weights", "0/0"}, wantErr: "--memory-retrieval-weights"},
		{name: "bad file key", file: "memory:\n  retrieval: fuzzy\n", wantErr: "memory.retrieval: want hybrid, vector or text"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("FATHOM_MEMORY_RETRIEVAL", c.env)
			t.Setenv("FATHOM_MEMORY_RETRIEVAL_WEIGHTS", c.envW)
			cfg, err := nodeConfig(t, c.file, c.args...)
			if configErr(t, err, c.wantErr) {
				return
			}
			if got := cfg.Session.Retrieval; got != c.want {
				t.Fatalf("retrieval %+v, want %+v", got, c.want)
			}
		})
	}
}
