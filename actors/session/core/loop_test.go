package core

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fathom-agents/fathom/messages"
	"github.com/fathom-agents/fathom/prompts"
	"github.com/fathom-agents/fathom/tools"
)

const plan1 = `{"steps":[{"id":"a","type":"custom","description":"look"}]}`

// planned returns a session that has planned plan and is waiting for step a's first call.
func planned(t *testing.T, cfg *messages.SessionConfig, plan string) *messages.SessionState {
	t.Helper()
	s := NewState("s1")
	evs, err := DecideStart(s, &messages.StartRequest{CommandId: "c1", Goal: "g", Config: cfg}, DefaultConfig(), t0)
	if err != nil {
		t.Fatal(err)
	}
	fold(t, s, evs)
	fold(t, s, DecideLLMResult(s, &LLMResult{CallID: "plan-1", Content: plan}, DefaultConfig(), t0))
	return s
}

func calls(specs ...string) []*messages.ToolCallRequest {
	var out []*messages.ToolCallRequest
	for _, sp := range specs {
		id, name, _ := strings.Cut(sp, ":")
		out = append(out, &messages.ToolCallRequest{Id: id, Name: name, Arguments: `{}`})
	}
	return out
}

// TestDecideToolLoop drives a step through two tool turns: calls are recorded with
// idempotency keys, results arrive out of order, the next LLM call follows the last
// result, and the transcript the next request is built from has everything in order.
func TestDecideToolLoop(t *testing.T) {
	s := planned(t, nil, plan1)
	cfg := DefaultConfig()
	evs := DecideLLMResult(s, &LLMResult{CallID: "a/llm-1", Content: "let me look", ToolCalls: calls("c1:search", "c2:todos")}, cfg, t0)
	if got := types(evs); got != "llm_responded,tool_called,tool_called" {
		t.Fatalf("events %s", got)
	}
	fold(t, s, evs)
	if len(s.GetPendingTools()) != 2 || s.GetPendingTools()[1].GetIdempotencyKey() != "s1/a/tool-2" || s.GetPending() != nil {
		t.Fatalf("pending tools %v, pending call %v", s.GetPendingTools(), s.GetPending())
	}
	// The second call finishes first.
	evs = DecideToolResult(s, &ToolResult{Key: "s1/a/tool-2", Res: tools.Result{CallID: "c2", Output: "todo ok"}}, DefaultConfig(), t0)
	if got := types(evs); got != "tool_result" {
		t.Fatalf("first result: %s", got)
	}
	fold(t, s, evs)
	terr := tools.ValidationError("search", "/query: missing")
	evs = DecideToolResult(s, &ToolResult{Key: "s1/a/tool-1", Res: tools.Result{CallID: "c1", Err: terr}}, DefaultConfig(), t0)
	if got := types(evs); got != "tool_result,llm_requested" {
		t.Fatalf("last result: %s", got)
	}
	if e := evs[0].GetToolResult().GetError(); e.GetErrorType() != "validation" || !e.GetRetryable() || e.GetLlmText() != terr.FormatForLLM() {
		t.Fatalf("tool_result error %v", e)
	}
	fold(t, s, evs)
	if s.GetPending().GetCallId() != "a/llm-2" || s.GetIterations() != 3 {
		t.Fatalf("next call %v after %d iterations", s.GetPending(), s.GetIterations())
	}
	// A duplicate result (a runner that finished twice, a replayed message) is stale.
	if evs := DecideToolResult(s, &ToolResult{Key: "s1/a/tool-1", Res: tools.Result{Output: "again"}}, DefaultConfig(), t0); len(evs) != 0 {
		t.Fatalf("stale tool result produced %s", types(evs))
	}
	req, err := BuildRequest(s, mustPrompts(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	var roles []string
	for _, m := range req.Messages {
		roles = append(roles, m.Role+":"+m.ToolCallID)
	}
	// The step's task prompt (the current step) comes after the history.
	if got := strings.Join(roles, ","); got != "system:,user:,assistant:,tool:c2,tool:c1,system:" {
		t.Fatalf("request messages %s", got)
	}
	if len(req.Messages[2].ToolCalls) != 2 || req.Messages[4].Content != terr.FormatForLLM() {
		t.Fatalf("assistant turn %v / tool message %q", req.Messages[2], req.Messages[4].Content)
	}
	// Second turn: one more call, then the final answer.
	fold(t, s, DecideLLMResult(s, &LLMResult{CallID: "a/llm-2", ToolCalls: calls("c3:search")}, cfg, t0))
	if k := s.GetPendingTools()[0].GetIdempotencyKey(); k != "s1/a/tool-3" {
		t.Fatalf("third call key %s", k)
	}
	fold(t, s, DecideToolResult(s, &ToolResult{Key: "s1/a/tool-3", Res: tools.Result{Output: "found"}}, DefaultConfig(), t0))
	evs = DecideLLMResult(s, &LLMResult{CallID: "a/llm-3", Content: "done"}, cfg, t0)
	if got := types(evs); got != "llm_responded,step_completed,session_completed" {
		t.Fatalf("final events %s", got)
	}
	fold(t, s, evs)
	if s.GetResult() != "done" || len(s.GetSteps()[0].GetTranscript()) != 6 {
		t.Fatalf("result %q, transcript %d entries", s.GetResult(), len(s.GetSteps()[0].GetTranscript()))
	}
}

func TestDecideToolCallBounds(t *testing.T) {
	t.Run("too many calls in a turn are answered at once", func(t *testing.T) {
		s := planned(t, nil, plan1)
		cfg := DefaultConfig()
		cfg.MaxToolCallsPerTurn = 1
		evs := DecideLLMResult(s, &LLMResult{CallID: "a/llm-1", ToolCalls: calls("x:t", "y:t")}, cfg, t0)
		if got := types(evs); got != "llm_responded,tool_called,tool_called,tool_result" {
			t.Fatalf("events %s", got)
		}
		fold(t, s, evs)
		if len(s.GetPendingTools()) != 1 || !strings.Contains(evs[3].GetToolResult().GetError().GetMessage(), "at most 1") {
			t.Fatalf("pending %v, refusal %v", s.GetPendingTools(), evs[3].GetToolResult())
		}
	})
	t.Run("empty and duplicate call ids are made unique", func(t *testing.T) {
		s := planned(t, nil, plan1)
		evs := DecideLLMResult(s, &LLMResult{CallID: "a/llm-1", ToolCalls: calls("same:t", "same:t", ":t")}, DefaultConfig(), t0)
		fold(t, s, evs)
		var ids []string
		for _, c := range s.GetPendingTools() {
			ids = append(ids, c.GetCallId())
		}
		if got := strings.Join(ids, ","); got != "same,call_2,call_3" {
			t.Fatalf("call ids %s", got)
		}
	})
	t.Run("max iterations fails the step in the middle of its loop", func(t *testing.T) {
		s := planned(t, &messages.SessionConfig{MaxIterations: 2}, plan1)
		fold(t, s, DecideLLMResult(s, &LLMResult{CallID: "a/llm-1", ToolCalls: calls("x:t")}, DefaultConfig(), t0))
		evs := DecideToolResult(s, &ToolResult{Key: "s1/a/tool-1", Res: tools.Result{Output: "ok"}}, DefaultConfig(), t0)
		if got := types(evs); got != "tool_result,step_failed,session_failed" {
			t.Fatalf("events %s", got)
		}
		fold(t, s, evs)
		if msg := s.GetSteps()[0].GetError(); !strings.Contains(msg, "max iterations reached") || !strings.Contains(msg, "max_iterations 2") || !strings.Contains(msg, "step a") {
			t.Fatalf("step error %q", msg)
		}
		if s.GetStatus() != messages.SessionStatus_SESSION_STATUS_FAILED {
			t.Fatalf("status %s", s.GetStatus())
		}
	})
}

// TestDecideRetryableFailures: a retryable LLM failure fails the step with a retry time;
// at that time the step runs again (attempt 2, transcript reset, call ids continuing);
// the last allowed attempt's failure fails the session.
func TestDecideRetryableFailures(t *testing.T) {
	cfg := DefaultConfig()
	cfg.StepAttempts = 2
	s := planned(t, nil, plan1)
	fold(t, s, DecideLLMResult(s, &LLMResult{CallID: "a/llm-1", ToolCalls: calls("x:t")}, cfg, t0))
	fold(t, s, DecideToolResult(s, &ToolResult{Key: "s1/a/tool-1", Res: tools.Result{Output: "ok"}}, DefaultConfig(), t0))
	evs := DecideLLMResult(s, &LLMResult{CallID: "a/llm-2", Err: errors.New("HTTP 429"), Retryable: true}, cfg, t0)
	if got := types(evs); got != "step_failed" {
		t.Fatalf("events %s", got)
	}
	f := evs[0].GetStepFailed()
	if !f.GetRetryable() || f.GetRetryAtUnixNano() != t0.Add(cfg.StepRetryDelay).UnixNano() || f.GetAttempt() != 1 {
		t.Fatalf("step_failed %v", f)
	}
	fold(t, s, evs)
	if s.GetStatus() != messages.SessionStatus_SESSION_STATUS_EXECUTING || s.GetPending() != nil {
		t.Fatalf("state after a retryable failure: %v", s)
	}
	if evs := DecideRetry(s, cfg, t0.Add(time.Second)); len(evs) != 0 {
		t.Fatalf("retry before its time: %s", types(evs))
	}
	evs = DecideRetry(s, cfg, t0.Add(cfg.StepRetryDelay))
	if got := types(evs); got != "step_started,llm_requested" {
		t.Fatalf("retry events %s", got)
	}
	fold(t, s, evs)
	st := s.GetSteps()[0]
	if st.GetAttempt() != 2 || len(st.GetTranscript()) != 0 || s.GetPending().GetCallId() != "a/llm-3" || s.GetRetryAtUnixNano() != 0 {
		t.Fatalf("after retry: step %v pending %v", st, s.GetPending())
	}
	// A new call in attempt 2 continues the index: keys never collide with attempt 1's.
	fold(t, s, DecideLLMResult(s, &LLMResult{CallID: "a/llm-3", ToolCalls: calls("x:t")}, cfg, t0))
	if k := s.GetPendingTools()[0].GetIdempotencyKey(); k != "s1/a/tool-2" {
		t.Fatalf("attempt 2 key %s", k)
	}
	fold(t, s, DecideToolResult(s, &ToolResult{Key: "s1/a/tool-2", Res: tools.Result{Output: "ok"}}, DefaultConfig(), t0))
	evs = DecideLLMResult(s, &LLMResult{CallID: "a/llm-4", Err: errors.New("circuit open"), Retryable: true}, cfg, t0)
	if got := types(evs); got != "step_failed,session_failed" {
		t.Fatalf("last attempt events %s", got)
	}
	fold(t, s, evs)
	if !strings.Contains(s.GetError(), "attempt 2 of 2") {
		t.Fatalf("session error %q", s.GetError())
	}
}

func TestDecidePlanRetry(t *testing.T) {
	cfg := DefaultConfig()
	s := NewState("s1")
	evs, _ := DecideStart(s, &messages.StartRequest{CommandId: "c1", Goal: "g"}, cfg, t0)
	fold(t, s, evs)
	evs = DecideLLMResult(s, &LLMResult{CallID: "plan-1", Err: errors.New("HTTP 503"), Retryable: true}, cfg, t0)
	if got := types(evs); got != "plan_failed" {
		t.Fatalf("events %s", got)
	}
	fold(t, s, evs)
	fold(t, s, DecideRetry(s, cfg, t0.Add(cfg.StepRetryDelay)))
	if s.GetPending().GetCallId() != "plan-2" || s.GetIterations() != 2 {
		t.Fatalf("pending %v after %d iterations", s.GetPending(), s.GetIterations())
	}
	evs = DecideLLMResult(s, &LLMResult{CallID: "plan-2", Err: errors.New("HTTP 400 bad request")}, cfg, t0)
	if got := types(evs); got != "plan_failed,session_failed" {
		t.Fatalf("permanent failure events %s", got)
	}
}

func TestDecideCost(t *testing.T) {
	cfg := DefaultConfig()
	s := planned(t, &messages.SessionConfig{Model: "gpt-4o-mini"}, plan1)
	evs := DecideLLMResult(s, &LLMResult{CallID: "a/llm-1", Content: "x", Model: "gpt-4o-mini-2024-07-18",
		Usage: &messages.Usage{InputTokens: 1_000_000, OutputTokens: 500_000, TotalTokens: 1_500_000}}, cfg, t0)
	fold(t, s, evs)
	want := 0.15 + 0.30
	if got := evs[0].GetLlmResponded().GetCostUsd(); got < want-1e-9 || got > want+1e-9 {
		t.Fatalf("cost %v, want %v", got, want)
	}
	if got := evs[len(evs)-1].GetSessionCompleted().GetCostUsd(); got < want-1e-9 || got > want+1e-9 {
		t.Fatalf("session cost %v", got)
	}
}

func mustPrompts(t *testing.T) *prompts.Set {
	t.Helper()
	p, err := prompts.Default()
	if err != nil {
		t.Fatal(err)
	}
	return p
}
