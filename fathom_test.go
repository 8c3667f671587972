package fathom_test

import (
	"context"
	"strings"
	"testing"

	"github.com/fathom-agents/fathom"
	"github.com/fathom-agents/fathom/tools"
)

func TestValidate(t *testing.T) {
	echo := tools.MustNew("echo", "Echoes.", tools.SandboxNone, func(_ context.Context, a struct {
		S string `json:"s"`
	}) (any, error) {
		return a.S, nil
	})
	for _, c := range []struct {
		name string
		edit func(*fathom.Config)
		want string
	}{
		{"defaults", func(*fathom.Config) {}, ""},
		{"no journal", func(c *fathom.Config) { c.DataDir = "" }, "DataDir or PostgresDSN"},
		{"memory journal, no disk", func(c *fathom.Config) { c.DataDir, c.Journal = "", "memory" }, ""},
		{"unknown journal", func(c *fathom.Config) { c.Journal = "sqlite" }, `unknown journal "sqlite" (want bolt, memory, postgres)`},
		{"memory journal in a Consul cluster", func(c *fathom.Config) { c.Journal, c.Cluster.Provider = "memory", "consul" }, "one shared journal"},
		{"unknown API", func(c *fathom.Config) { c.LLM.API = "gemini" }, `unknown LLM API "gemini"`},
		{"tool twice", func(c *fathom.Config) { c.Tools = []tools.Tool{echo, echo} }, `tool "echo" is given twice`},
		{"nil tool", func(c *fathom.Config) { c.Tools = []tools.Tool{nil} }, "Tools[0] is nil"},
		{"bad session config", func(c *fathom.Config) { c.Session.MaxIterations = 0 }, "max iterations"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := fathom.DefaultConfig()
			c.edit(&cfg)
			err := cfg.Validate()
			if (err == nil) != (c.want == "") || (err != nil && !strings.Contains(err.Error(), c.want)) {
				t.Fatalf("Validate() = %v, want %q", err, c.want)
			}
		})
	}
}

// A tool whose name a built-in already has fails Start with the name, and an empty goal
// is refused before anything is stored.
func TestStartRefusesATakenToolName(t *testing.T) {
	cfg := fathom.DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.Tools = []tools.Tool{tools.MustNew("write_artifact", "Shadows a built-in.", tools.SandboxNone, func(context.Context, struct{}) (any, error) { return nil, nil })}
	if _, err := fathom.Start(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), `"write_artifact"`) {
		t.Fatalf("Start = %v, want an error naming write_artifact", err)
	}
	cfg.Tools = nil
	n, err := fathom.Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close(context.Background())
	if _, err := n.StartSession(context.Background(), fathom.SessionRequest{}); err == nil || !strings.Contains(err.Error(), "goal is empty") {
		t.Fatalf("StartSession without a goal = %v", err)
	}
}
