package config_test

import (
	"strings"
	"testing"

	"github.com/fathom-agents/fathom/internal/config"
)

// TestA2AAgents: a2a_agents entries parse (name, url, token, description); a bad one
// fails with file:line and its key.
func TestA2AAgents(t *testing.T) {
	f, err := config.Parse("fathom.yaml", []byte(`a2a_agents:
  - name: travel
    url: https://agents.example.com/travel
    token: t0k
  - name: billing
    url: http://billing.internal:8080
    description: Answers billing questions
`))
	if err != nil {
		t.Fatal(err)
	}
	want := []config.A2AAgent{{Name: "travel", URL: "https://agents.example.com/travel", Token: "t0k", Line: 2},
		{Name: "billing", URL: "http://billing.internal:8080", Description: "Answers billing questions", Line: 5}}
	if len(f.A2AAgents) != 2 || f.A2AAgents[0] != want[0] || f.A2AAgents[1] != want[1] {
		t.Fatalf("a2a_agents = %+v", f.A2AAgents)
	}
	for _, c := range []struct{ yaml, want string }{
		{"a2a_agents:\n  - name: x\n", "fathom.yaml:2: a2a_agents[0].url: is required"},
		{"a2a_agents:\n  - name: x\n    url: ftp://h\n", `fathom.yaml:3: a2a_agents[0].url: "ftp://h" is not an http:// or https:// URL`},
		{"a2a_agents:\n  - name: 1x\n    url: http://h\n", `fathom.yaml:2: a2a_agents[0].name: "1x" is not a valid agent name`},
		{"a2a_agents:\n  - name: x\n    url: http://h\n    tokn: t\n", "fathom.yaml:4: a2a_agents[0].tokn: unknown key"},
		{"a2a_agents:\n  - name: x\n    url: http://h\n  - name: x\n    url: http://g\n", `fathom.yaml:4: a2a_agents[1].name: duplicate agent name "x" (first at line 2)`},
		{"a2a_agents: {}\n", "a2a_agents: must be a list"},
	} {
		if _, err := config.Parse("fathom.yaml", []byte(c.yaml)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want %q", c.yaml, err, c.want)
		}
	}
}
