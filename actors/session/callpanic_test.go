package session_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fathom-agents/fathom/internal/node"
	"github.com/fathom-agents/fathom/llm"
	"github.com/fathom-agents/fathom/tools"
)

// unencodable is a tool's output whose encoding panics: the executor recovers a panicking
// tool, but not its output's encoding (tools.Executor.Run renders the output after the
// tool returned), so the panic reaches the call the agent actor runs.
type unencodable struct{}

// MarshalJSON implements json.Marshaler by panicking.
func (unencodable) MarshalJSON() ([]byte, error) { panic("unencodable output") }

// TestPanickingToolCallIsLostAndTheSessionGoesOn: a tool call that panics on its worker
// (outside the executor's recovery) is run again by its agent actor as a crashed runner
// was restarted — 4 runs under the same idempotency key — and then reported lost: the
// grain records a retryable execution ToolError the model reads, and the session
// completes.
func TestPanickingToolCallIsLostAndTheSessionGoesOn(t *testing.T) {
	var runs atomic.Int32
	type noArgs struct{}
	reg, err := tools.NewRegistry(tools.MustNew("badresult", "Returns an output that cannot be encoded.", tools.SandboxNone,
		func(context.Context, noArgs) (any, error) {
			runs.Add(1)
			return unencodable{}, nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	h := startHarness(t, harnessOpts{
		tools: &tools.Executor{Registry: reg},
		script: script(t,
			`{"tool_match":"Error","response":"the tool failed, moving on"}`,
			`{"match":"Step: find it","tool_calls":[{"name":"badresult","arguments":"{}"}]}`,
		),
	})
	if _, err := h.start("s1", "c1", "goal"); err != nil {
		t.Fatal(err)
	}
	evs := waitTerminal(t, h.j, "s1", 30*time.Second)
	mustComplete(t, evs)
	results := ofType(evs, "tool_result")
	if len(results) != 1 {
		t.Fatalf("%d tool results, want 1", len(results))
	}
	e := results[0].GetToolResult().GetError()
	if e.GetErrorType() != "execution" || !e.GetRetryable() || !strings.Contains(e.GetMessage(), "stopped without a result") {
		t.Fatalf("tool error %v, want a retryable execution error: the call was lost", e)
	}
	if n := runs.Load(); n != 4 {
		t.Fatalf("the tool ran %d times, want 4 (the first run and 3 restarts)", n)
	}
}

// panickingModel panics on every call of a step whose goal asks it to ("explode-model"),
// and otherwise answers as the instant model does.
type panickingModel struct{ *instantModel }

func (m panickingModel) Chat(ctx context.Context, req llm.Request) (llm.Response, error) {
	if !strings.Contains(req.Messages[0].Content, "FATHOM-ROLE: orchestrator") {
		for _, msg := range req.Messages {
			if strings.Contains(msg.Content, "explode-model") {
				panic("the provider exploded")
			}
		}
	}
	return m.instantModel.Chat(ctx, req)
}

// TestPanickingLLMCallFailsTheStepAndTheNodeGoesOn: a model call that panics is an error
// result (the step runner recovers it), not a lost call: the session fails with the
// panic as its reason, and the next session on the node runs to completion.
func TestPanickingLLMCallFailsTheStepAndTheNodeGoesOn(t *testing.T) {
	h := startHarness(t, harnessOpts{llm: func(c *node.LLMConfig) { c.Provider = panickingModel{newInstantModel()} }})
	if _, err := h.start("boom", "c1", "steps=1 explode-model"); err != nil {
		t.Fatal(err)
	}
	evs := waitTerminal(t, h.j, "boom", 30*time.Second)
	last := evs[len(evs)-1]
	if last.Type() != "session_failed" || !strings.Contains(last.GetSessionFailed().GetError(), "llm provider panicked: the provider exploded") {
		t.Fatalf("last event %s %v, want session_failed naming the panic", last.Type(), last.GetSessionFailed())
	}
	if _, err := h.start("fine", "c2", "steps=2"); err != nil {
		t.Fatal(err)
	}
	mustComplete(t, waitTerminal(t, h.j, "fine", 30*time.Second))
}
