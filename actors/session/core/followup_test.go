package core

import (
	"errors"
	"strings"
	"testing"

	"github.com/fathom-agents/fathom/messages"
)

// completedTurn1 is a session whose one orchestrator step answered "answer one".
func completedTurn1(t *testing.T, cfg *messages.SessionConfig) *messages.SessionState {
	t.Helper()
	s := planned(t, cfg, plan1)
	fold(t, s, DecideLLMResult(s, &LLMResult{CallID: "a/llm-1", Content: "answer one"}, DefaultConfig(), t0))
	if s.GetStatus() != messages.SessionStatus_SESSION_STATUS_COMPLETED || s.GetResult() != "answer one" {
		t.Fatalf("turn 1 ended %s with %q", s.GetStatus(), s.GetResult())
	}
	return s
}

// TestDecideSendTurns drives two follow-ups through the decisions: a direct answer
// completes turn 2; a plan in turn 3 runs its (prefixed) steps; the history the model
// reads holds every earlier turn in seq order.
func TestDecideSendTurns(t *testing.T) {
	s := completedTurn1(t, nil)
	cfg := DefaultConfig()
	evs, err := DecideSend(s, &messages.SendRequest{CommandId: "m1", Content: "  and the second?  "}, cfg, t0)
	if err != nil {
		t.Fatal(err)
	}
	if got := types(evs); got != "message_received,llm_requested" {
		t.Fatalf("send: %s", got)
	}
	fold(t, s, evs)
	if s.GetTurn() != 2 || s.GetStatus() != messages.SessionStatus_SESSION_STATUS_PLANNING || len(s.GetSteps()) != 0 ||
		s.GetPending().GetCallId() != "turn-2/plan-1" || s.GetPending().GetPurpose() != PurposeMessage {
		t.Fatalf("turn 2 state: turn %d %s steps %d pending %v", s.GetTurn(), s.GetStatus(), len(s.GetSteps()), s.GetPending())
	}
	req, err := BuildRequest(s, mustPrompts(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	var all []string
	for _, m := range req.Messages {
		all = append(all, m.Role+":"+m.Content)
	}
	joined := strings.Join(all, "\n")
	for _, want := range []string{"FATHOM-FOLLOW-UP", "assistant:answer one", "user:and the second?"} {
		if !strings.Contains(joined, want) {
			t.Fatalf("follow-up request lacks %q:\n%s", want, joined)
		}
	}
	if last := req.Messages[len(req.Messages)-1]; last.Role != "user" || last.Content != "and the second?" {
		t.Fatalf("last message %+v", last)
	}
	fold(t, s, DecideLLMResult(s, &LLMResult{CallID: "turn-2/plan-1", Content: "direct answer two"}, cfg, t0))
	if s.GetStatus() != messages.SessionStatus_SESSION_STATUS_COMPLETED || s.GetResult() != "direct answer two" {
		t.Fatalf("turn 2 ended %s with %q", s.GetStatus(), s.GetResult())
	}
	// Turn 3 plans a step.
	evs, err = DecideSend(s, &messages.SendRequest{CommandId: "m2", Content: "now do more"}, cfg, t0)
	if err != nil {
		t.Fatal(err)
	}
	fold(t, s, evs)
	fold(t, s, DecideLLMResult(s, &LLMResult{CallID: "turn-3/plan-1", Content: `{"steps":[{"id":"a","type":"custom","description":"more"}]}`}, cfg, t0))
	if len(s.GetSteps()) != 1 || s.GetSteps()[0].GetStep().GetId() != "t3-a" || s.GetPending().GetCallId() != "t3-a/llm-1" {
		t.Fatalf("turn 3 plan: steps %v pending %v", s.GetSteps(), s.GetPending())
	}
	hist := History(s)
	var seqs []uint64
	var text []string
	for _, m := range hist {
		seqs = append(seqs, m.Seq)
		text = append(text, m.Content)
	}
	for i := 1; i < len(seqs); i++ {
		if seqs[i] <= seqs[i-1] {
			t.Fatalf("history seqs not increasing: %v", seqs)
		}
	}
	joined = strings.Join(text, "|")
	for _, want := range []string{"answer one", "and the second?", "direct answer two", "now do more", "Step: more"} {
		if !strings.Contains(joined, want) {
			t.Fatalf("turn 3 history lacks %q: %s", want, joined)
		}
	}
	fold(t, s, DecideLLMResult(s, &LLMResult{CallID: "t3-a/llm-1", Content: "answer three"}, cfg, t0))
	if s.GetStatus() != messages.SessionStatus_SESSION_STATUS_COMPLETED || s.GetResult() != "answer three" {
		t.Fatalf("turn 3 ended %s with %q", s.GetStatus(), s.GetResult())
	}
}

// TestDecideSendRefusals: a running, failed or unknown session, an empty or oversize
// message and a spent budget are refused with their reasons; nothing is recorded.
func TestDecideSendRefusals(t *testing.T) {
	cfg := DefaultConfig()
	reason := func(err error) messages.ErrorReason {
		var ce *CommandError
		if !errors.As(err, &ce) {
			t.Fatalf("error %v is not a CommandError", err)
		}
		return ce.Reason
	}
	running := planned(t, nil, plan1)
	done := completedTurn1(t, nil)
	failed := completedTurn1(t, nil)
	failed.Status = messages.SessionStatus_SESSION_STATUS_FAILED
	spent := completedTurn1(t, &messages.SessionConfig{MaxLlmCalls: 2})
	for _, c := range []struct {
		name    string
		s       *messages.SessionState
		content string
		want    messages.ErrorReason
		msg     string
	}{
		{"running", running, "hi", messages.ErrorReason_FAILED_PRECONDITION, "send when it has completed"},
		{"failed", failed, "hi", messages.ErrorReason_FAILED_PRECONDITION, "only a completed session"},
		{"unknown", NewState("nope"), "hi", messages.ErrorReason_NOT_FOUND, "not found"},
		{"empty", done, "  ", messages.ErrorReason_INVALID_ARGUMENT, "content is empty"},
		{"oversize", done, strings.Repeat("x", MaxGoalBytes+1), messages.ErrorReason_INVALID_ARGUMENT, "the limit is"},
		{"budget", spent, "hi", messages.ErrorReason_FAILED_PRECONDITION, "max_llm_calls"},
	} {
		evs, err := DecideSend(c.s, &messages.SendRequest{CommandId: "x", Content: c.content}, cfg, t0)
		if err == nil || len(evs) != 0 || reason(err) != c.want || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s: events %d, error %v; want %s containing %q", c.name, len(evs), err, c.want, c.msg)
		}
	}
}
