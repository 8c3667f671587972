package fathom_test

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/fathom-agents/fathom"
	"github.com/fathom-agents/fathom/llm/mock"
	"github.com/fathom-agents/fathom/tools"
)

// longTextScript plans one research step; the researcher calls the tool "dump" and, once
// it has the tool's result, completes; the synthesis answers "done".
const longTextScript = `{"rules":[
 {"system_match":"FATHOM-PHASE: synthesize","response":"done"},
 {"system_match":"FATHOM-ROLE: researcher","tool_match":"xxxx","response":"` + "```" + `json\n{\"status\":\"completed\",\"summary\":\"read it\",\"confidence\":0.9}\n` + "```" + `"},
 {"system_match":"FATHOM-ROLE: researcher","tool_calls":[{"name":"dump","arguments":"{}"}]},
 {"system_match":"FATHOM-ROLE: orchestrator","response":"{\"steps\":[{\"id\":\"r\",\"type\":\"research\",\"description\":\"Read the dump\"}]}"}
]}`

// TestSessionsWithTextWithoutSpacesComplete: text without pre-token splits used to cost
// token counting time quadratic in its length (a 65,000-byte goal of one letter held a
// core for over a minute in planning; a tool result of 1 MiB without a space left the
// session at tool_called for minutes). A session with such a goal, whose tool returns
// such a result, plans, runs and completes well within the deadline.
func TestSessionsWithTextWithoutSpacesComplete(t *testing.T) {
	script, err := mock.ParseScript([]byte(longTextScript))
	if err != nil {
		t.Fatal(err)
	}
	model := httptest.NewServer(mock.New(mock.Config{Script: script}).Handler())
	defer model.Close()
	cfg := fathom.DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.LLM = fathom.LLM{BaseURL: model.URL + "/v1", APIKey: "k", Model: "gpt-4o-mini"}
	cfg.Session.StepRetryDelay = 10 * time.Millisecond
	cfg.Tools = []tools.Tool{tools.MustNew("dump", "Returns a megabyte without a space.", tools.SandboxNone,
		func(context.Context, struct{}) (any, error) { return strings.Repeat("x", 1<<20), nil })}
	cfg.Session.SubAgentTools = map[string][]string{"researcher": {"dump"}}
	// Each count of these texts took minutes; the whole session takes seconds.
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	n, err := fathom.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close(context.Background())
	goal := strings.Repeat("a", 65000)
	if _, err := n.StartSession(ctx, fathom.SessionRequest{ID: "long-goal", Goal: goal}); err != nil {
		t.Fatal(err)
	}
	sub := n.Follow("long-goal", 0)
	defer sub.Close()
	results := 0
	for {
		u, err := sub.NextUpdate(ctx)
		if err != nil {
			t.Fatalf("follow: %v (tool results so far: %d)", err, results)
		}
		if u.Event.GetToolResult() != nil {
			results++
		}
		if f := u.Event.GetSessionFailed(); f != nil {
			t.Fatalf("session failed: %s", f.GetError())
		}
		if c := u.Event.GetSessionCompleted(); c != nil {
			if results == 0 || c.GetResult() != "done" {
				t.Fatalf("completed with %q after %d tool results", c.GetResult(), results)
			}
			return
		}
	}
}
