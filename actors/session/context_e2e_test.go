package session_test

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/fathom-agents/fathom/actors/session"
	"github.com/fathom-agents/fathom/tools"
)

// hugeOutput is ~230 KB of numbered lines, as a script printing a big table would.
func hugeOutput() string {
	var b strings.Builder
	for i := 0; b.Len() < 230<<10; i++ {
		fmt.Fprintf(&b, "row %06d | %08d | checksum %x\n", i, i*7919, i*2654435761%4294967296)
	}
	return b.String()
}

// dumpTools has one tool, dump, that prints hugeOutput.
func dumpTools(t *testing.T) *tools.Executor {
	t.Helper()
	type noArgs struct{}
	reg, err := tools.NewRegistry(tools.MustNew("dump", "Prints the whole table.", tools.SandboxNone, func(context.Context, noArgs) (any, error) {
		return hugeOutput(), nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	return &tools.Executor{Registry: reg}
}

// TestHugeToolOutputStaysInContext: a tool prints ~230 KB (far more than the 32,000-token
// context). The next call still holds the step's task, the model's own call and the
// result, elided to its head and tail with a note naming the event that holds it whole,
// so the model answers instead of calling the tool again and again.
func TestHugeToolOutputStaysInContext(t *testing.T) {
	out := hugeOutput()
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	head, tail := regexp.QuoteMeta(lines[0]), regexp.QuoteMeta(lines[len(lines)-1])
	// The answer rule matches only a context with the result's first and last rows and
	// the elision note; any other context gets the tool call again.
	sc := script(t,
		`{"system_match":"FATHOM-ROLE: executor","tool_match":`+quote(`(?s)^`+head+`\n.*bytes of this tool result elided here to fit the context; the whole text is event seq \d+ of session huge .*\n`+tail+`\n$`)+`,"response":"read the table"}`,
		`{"system_match":"FATHOM-ROLE: executor","tool_calls":[{"name":"dump","arguments":"{}"}]}`,
	)
	h := startHarness(t, harnessOpts{script: sc, tools: dumpTools(t), cfg: func(c *session.Config) { c.MaxIterations = 6 }})
	if _, err := h.start("huge", "c1", "summarise the table"); err != nil {
		t.Fatal(err)
	}
	evs := waitTerminal(t, h.j, "huge", 30*time.Second)
	mustComplete(t, evs)
	if got := evs[len(evs)-1].GetSessionCompleted().GetResult(); got != "read the table" {
		t.Fatalf("result %q", got)
	}
	results := ofType(evs, "tool_result")
	if len(results) != 1 || results[0].GetToolResult().GetResult() != out {
		t.Fatalf("%d tool results; the journal must keep the whole output", len(results))
	}
	answers := ofType(evs, "llm_responded")
	last := answers[len(answers)-1].GetLlmResponded()
	ci := last.GetContext()
	// The opening message (the task), the call and the elided result.
	if ci.GetRecentCount() < 3 || ci.GetElidedCount() != 1 || !ci.GetTaskInContext() || ci.GetTotalTokens() > ci.GetBudget() {
		t.Fatalf("context of the answer: %v", ci)
	}
}

// TestHugeGoalSubAgentKeepsItsTask: a 60 KB goal (about twice what the context gives a
// sub-agent's messages beside its prompt at this budget) in a sub-agent's brief: its
// calls still hold the brief (elided) and its newest turn, and it hands off.
func TestHugeGoalSubAgentKeepsItsTask(t *testing.T) {
	var b strings.Builder
	for i := 0; b.Len() < 60<<10; i++ {
		fmt.Fprintf(&b, "requirement %05d: the report must mention item %d.\n", i, i*31)
	}
	goal := "Write the report. " + b.String()
	sc := rules(t,
		planRule(`[{"id":"r","type":"research","description":"collect the requirements"}]`),
		`{"system_match":"FATHOM-ROLE: researcher","tool_match":"value of","context_match":"Task: collect the requirements[\\s\\S]*elided here to fit the context","response":`+quote("Done.\n```json\n"+
			`{"status":"completed","summary":"requirements collected","key_findings":["many"],"sources":["lookup"],"confidence":"80%"}`+"\n```")+`}`,
		`{"system_match":"FATHOM-ROLE: researcher","tool_calls":[{"name":"lookup","arguments":"{\"key\":\"k\"}"}]}`,
		`{"system_match":"FATHOM-PHASE: synthesize","response":"report written"}`,
	)
	h := startHarness(t, harnessOpts{script: sc, cfg: func(c *session.Config) {
		c.ContextBudget = 16000
		c.SubAgentMaxIterations = 4
		c.SubAgentTools = map[string][]string{"researcher": {"lookup"}}
	}})
	if _, err := h.start("goal", "c1", goal); err != nil {
		t.Fatal(err)
	}
	evs := waitTerminal(t, h.j, "goal", 30*time.Second)
	mustComplete(t, evs)
	for _, ev := range ofType(evs, "llm_responded") {
		r := ev.GetLlmResponded()
		if r.GetSubAgentId() == "" {
			continue
		}
		if ci := r.GetContext(); !ci.GetTaskInContext() || ci.GetRecentCount() == 0 || ci.GetTotalTokens() > 16000 {
			t.Fatalf("sub-agent call %s: context %v", r.GetCallId(), ci)
		}
	}
	if n := count(evs, "llm_requested"); n != 4 { // plan, two sub-agent turns, the closing summary
		t.Fatalf("%d LLM calls", n)
	}
}
