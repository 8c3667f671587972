package core

import (
	"strings"
	"testing"

	"github.com/fathom-agents/fathom/llm"
	"github.com/fathom-agents/fathom/messages"
)

// TestPlanSchemaCheck: a plan is checked against PlanSchema before it is read: what the
// tolerant reader accepts (nulls, missing ids and dependencies, unknown types) passes, a
// step without a description or with a wrong-typed field fails with the location.
func TestPlanSchemaCheck(t *testing.T) {
	steps, err := parsePlan(`Here: {"steps":[{"id":null,"type":"analysis","description":"a","dependencies":null,"input_schema":null},{"description":"b"}]}`, 10)
	if err != nil || len(steps) != 2 || steps[0].GetType() != "custom" || steps[1].GetDependencies()[0] != steps[0].GetId() {
		t.Fatalf("tolerant plan: %v, %v", steps, err)
	}
	for answer, want := range map[string]string{
		`{"steps":[{"id":"a"}]}`:                                     "plan does not match its schema: /steps/0: missing property 'description'",
		`{"steps":[{"description":"a","dependencies":"b"}]}`:         "/steps/0/dependencies: got string, want null or array",
		`{"steps":{"description":"a"}}`:                              "/steps: got object, want array",
		`{"plan":[{"description":"a"}]}`:                             "missing property 'steps'",
		`{"steps":[{"description":"a","interrupt_timeout_ms":"5"}]}`: "/steps/0/interrupt_timeout_ms: got string",
	} {
		if _, err := parsePlan(answer, 10); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err = %v, want %q", answer, err, want)
		}
	}
}

// TestSetCallOptions: plan and re-plan calls ask for the plan schema, sub-agent calls
// for the hand-off schema, other calls for none; reasoning is the agent type's when the
// node has one for it, else the session's.
func TestSetCallOptions(t *testing.T) {
	cfg := Config{AgentReasoning: map[string]Reasoning{Coder: {Effort: "high", ThinkingBudget: 4096}}}
	s := &messages.SessionState{Config: &messages.SessionConfig{ReasoningEffort: "low"},
		SubAgents: map[string]*messages.SubagentState{"coder-1": {Id: "coder-1", AgentType: Coder, Pending: &messages.PendingCall{CallId: "coder-1/llm-1"}}}}
	for _, c := range []struct {
		purpose, callID, format string
		want                    Reasoning
	}{
		{PurposePlan, "plan-1", PlanSchemaName, Reasoning{Effort: "low"}},
		{PurposeReplan, "replan-1", PlanSchemaName, Reasoning{Effort: "low"}},
		{PurposeStep, "s/llm-1", "", Reasoning{Effort: "low"}},
		{purposeSynthesize, "final-1", "", Reasoning{Effort: "low"}},
		{PurposeStep, "coder-1/llm-1", HandoffSchemaName, Reasoning{Effort: "high", ThinkingBudget: 4096}},
	} {
		s.Pending = &messages.PendingCall{CallId: c.callID, Purpose: c.purpose}
		var req llm.Request
		SetCallOptions(&req, s, c.callID, cfg)
		got := ""
		if req.ResponseFormat != nil {
			got = req.ResponseFormat.Name
		}
		if got != c.format || req.ReasoningEffort != c.want.Effort || req.ThinkingBudget != c.want.ThinkingBudget {
			t.Errorf("%s %s: format %q, reasoning %q/%d; want %q, %+v", c.purpose, c.callID, got, req.ReasoningEffort, req.ThinkingBudget, c.format, c.want)
		}
	}
}
