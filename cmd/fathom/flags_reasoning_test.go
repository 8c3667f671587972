package main

import (
	"reflect"
	"testing"

	"github.com/fathom-agents/fathom/actors/session/core"
)

// TestReasoningFlags: --reasoning-effort, --thinking-budget and --agent-reasoning (envs
// FATHOM_REASONING_EFFORT, FATHOM_THINKING_BUDGET, FATHOM_AGENT_REASONING) set the
// session config's Reasoning and AgentReasoning; bad values are clear usage errors.
func TestReasoningFlags(t *testing.T) {
	for _, c := range []struct {
		name       string
		env        map[string]string
		args       []string
		want       core.Reasoning
		wantAgents map[string]core.Reasoning
		wantErr    string
	}{
		{name: "default"},
		{name: "flags", args: []string{"--reasoning-effort", "low", "--thinking-budget", "2048", "--agent-reasoning", "researcher=high, coder=low:4096,orchestrator=1024"},
			want:       core.Reasoning{Effort: "low", ThinkingBudget: 2048},
			wantAgents: map[string]core.Reasoning{"researcher": {Effort: "high"}, "coder": {Effort: "low", ThinkingBudget: 4096}, "orchestrator": {ThinkingBudget: 1024}}},
		{name: "env", env: map[string]string{"FATHOM_REASONING_EFFORT": "medium", "FATHOM_AGENT_REASONING": "writer=minimal"},
			want: core.Reasoning{Effort: "medium"}, wantAgents: map[string]core.Reasoning{"writer": {Effort: "minimal"}}},
		{name: "bad effort", args: []string{"--reasoning-effort", "extreme"}, wantErr: `reasoning effort "extreme" is not one of minimal, low, medium, high`},
		{name: "small budget", args: []string{"--thinking-budget", "100"}, wantErr: "thinking budget 100 is below the API's minimum of 1024 tokens"},
		{name: "unknown agent", args: []string{"--agent-reasoning", "poet=high"}, wantErr: `unknown agent "poet"`},
		{name: "no setting", args: []string{"--agent-reasoning", "coder"}, wantErr: "want AGENT=EFFORT, AGENT=BUDGET or AGENT=EFFORT:BUDGET"},
		{name: "bad budget", args: []string{"--agent-reasoning", "coder=high:lots"}, wantErr: `thinking budget "lots" is not a positive number`},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, k := range []string{"FATHOM_REASONING_EFFORT", "FATHOM_THINKING_BUDGET", "FATHOM_AGENT_REASONING"} {
				t.Setenv(k, c.env[k])
			}
			cfg, err := nodeConfig(t, "", c.args...)
			if configErr(t, err, c.wantErr) {
				return
			}
			if cfg.Session.Reasoning != c.want || !reflect.DeepEqual(cfg.Session.AgentReasoning, c.wantAgents) {
				t.Fatalf("Reasoning %+v, AgentReasoning %+v; want %+v, %+v", cfg.Session.Reasoning, cfg.Session.AgentReasoning, c.want, c.wantAgents)
			}
		})
	}
}
