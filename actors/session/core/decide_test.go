package core

import (
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/fathom-agents/fathom/messages"
)

var t0 = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

// fold applies evs to s, failing the test on the first error.
func fold(t *testing.T, s *messages.SessionState, evs []*messages.Event) {
	t.Helper()
	for _, ev := range evs {
		if err := Apply(s, ev); err != nil {
			t.Fatalf("apply %s (seq %d): %v", ev.Type(), ev.GetSeq(), err)
		}
	}
}

func types(evs []*messages.Event) string {
	var out []string
	for _, ev := range evs {
		out = append(out, ev.Type())
	}
	return strings.Join(out, ",")
}

const plan3 = `Here is the plan:
{"steps":[{"id":"a","type":"custom","description":"look"},{"id":"b","type":"analysis","description":"think"},{"type":"summary","description":"write"}]}`

// TestDecideFullLoop drives start → plan → three steps → completed through decide and
// Apply alone, and checks the state at each point.
func TestDecideFullLoop(t *testing.T) {
	s := NewState("s1")
	evs, err := DecideStart(s, &messages.StartRequest{CommandId: "c1", Goal: "  write a haiku  "}, DefaultConfig(), t0)
	if err != nil {
		t.Fatal(err)
	}
	if got := types(evs); got != "session_started,llm_requested" {
		t.Fatalf("start events = %s", got)
	}
	fold(t, s, evs)
	if s.GetGoal() != "write a haiku" || s.GetStatus() != messages.SessionStatus_SESSION_STATUS_PLANNING || s.GetPending().GetCallId() != "plan-1" {
		t.Fatalf("after start: %v", s)
	}
	if s.GetCommands()["c1"] != 2 {
		t.Fatalf("command c1 remembered at seq %d, want 2", s.GetCommands()["c1"])
	}
	usage := &messages.Usage{InputTokens: 10, OutputTokens: 5, TotalTokens: 15}
	evs = DecideLLMResult(s, &LLMResult{CallID: "plan-1", Content: plan3, Usage: usage}, DefaultConfig(), t0)
	if got := types(evs); got != "llm_responded,plan_created,step_started,llm_requested" {
		t.Fatalf("plan events = %s", got)
	}
	fold(t, s, evs)
	if len(s.GetSteps()) != 3 || s.GetSteps()[1].GetStep().GetType() != "custom" || s.GetSteps()[2].GetStep().GetId() != "step-3" {
		t.Fatalf("plan not folded as expected: %v", s.GetSteps())
	}
	for i, want := range []string{"a", "b", "step-3"} {
		call := s.GetPending().GetCallId()
		if call != want+"/llm-1" {
			t.Fatalf("step %d pending call = %q", i, call)
		}
		evs = DecideLLMResult(s, &LLMResult{CallID: call, Content: "out " + want, Usage: usage}, DefaultConfig(), t0)
		fold(t, s, evs)
		if s.GetSteps()[i].GetOutput() != "out "+want || s.GetSteps()[i].GetStatus() != messages.StepStatus_STEP_STATUS_COMPLETED {
			t.Fatalf("step %d: %v", i, s.GetSteps()[i])
		}
	}
	if s.GetStatus() != messages.SessionStatus_SESSION_STATUS_COMPLETED || s.GetResult() != "out step-3" || s.GetPending() != nil {
		t.Fatalf("final state: %v", s)
	}
	if s.GetUsage().GetTotalTokens() != 60 || s.GetIterations() != 4 {
		t.Fatalf("usage %v iterations %d, want 60 tokens and 4 calls", s.GetUsage(), s.GetIterations())
	}
	// A late duplicate result is stale: no events.
	if evs := DecideLLMResult(s, &LLMResult{CallID: "step-3/llm-1", Content: "again"}, DefaultConfig(), t0); len(evs) != 0 {
		t.Fatalf("stale result produced %s", types(evs))
	}
}

func TestDecideStartRefusals(t *testing.T) {
	started := NewState("s1")
	evs, _ := DecideStart(started, &messages.StartRequest{CommandId: "c1", Goal: "g"}, DefaultConfig(), t0)
	fold(t, started, evs)
	cases := []struct {
		name   string
		s      *messages.SessionState
		req    *messages.StartRequest
		reason messages.ErrorReason
		msg    string
	}{
		{"empty goal", NewState("s"), &messages.StartRequest{CommandId: "c", Goal: " \n\t"}, messages.ErrorReason_INVALID_ARGUMENT, "goal is empty"},
		{"no command id", NewState("s"), &messages.StartRequest{Goal: "g"}, messages.ErrorReason_INVALID_ARGUMENT, "command_id is required"},
		{"huge goal", NewState("s"), &messages.StartRequest{CommandId: "c", Goal: strings.Repeat("x", MaxGoalBytes+1)}, messages.ErrorReason_INVALID_ARGUMENT, "limit"},
		{"bad utf8", NewState("s"), &messages.StartRequest{CommandId: "c", Goal: "\xff\xfe"}, messages.ErrorReason_INVALID_ARGUMENT, "UTF-8"},
		{"already started", started, &messages.StartRequest{CommandId: "c2", Goal: "g"}, messages.ErrorReason_FAILED_PRECONDITION, "already started"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := proto.Clone(c.s)
			_, err := DecideStart(c.s, c.req, DefaultConfig(), t0)
			var ce *CommandError
			if !errors.As(err, &ce) || ce.Reason != c.reason || !strings.Contains(ce.Msg, c.msg) {
				t.Fatalf("err = %v, want %s containing %q", err, c.reason, c.msg)
			}
			if !proto.Equal(before, c.s) {
				t.Fatal("a refused command changed the state")
			}
		})
	}
}

func TestDecideFailures(t *testing.T) {
	start := func(t *testing.T, cfg *messages.SessionConfig) *messages.SessionState {
		s := NewState("s1")
		evs, err := DecideStart(s, &messages.StartRequest{CommandId: "c1", Goal: "g", Config: cfg}, DefaultConfig(), t0)
		if err != nil {
			t.Fatal(err)
		}
		fold(t, s, evs)
		return s
	}
	t.Run("unusable plan", func(t *testing.T) {
		s := start(t, nil)
		// The first unusable answer is asked again once, with the answer and the error.
		evs := DecideLLMResult(s, &LLMResult{CallID: "plan-1", Content: "I cannot plan this."}, DefaultConfig(), t0)
		if got := types(evs); got != "llm_responded,plan_failed,llm_requested" {
			t.Fatalf("events %s", got)
		}
		fold(t, s, evs)
		if p := s.GetPending(); p.GetCallId() != "plan-2" || p.GetRepromptAnswer() != "I cannot plan this." ||
			!strings.Contains(p.GetRepromptError(), "no JSON object") || s.GetStatus() != messages.SessionStatus_SESSION_STATUS_PLANNING {
			t.Fatalf("state after the first unusable plan %v", s)
		}
		fold(t, s, DecideLLMResult(s, &LLMResult{CallID: "plan-2", Content: "Still no."}, DefaultConfig(), t0))
		if s.GetStatus() != messages.SessionStatus_SESSION_STATUS_FAILED || !strings.Contains(s.GetError(), "unusable plan") {
			t.Fatalf("state %v", s)
		}
	})
	t.Run("too many steps", func(t *testing.T) {
		s := start(t, &messages.SessionConfig{MaxSteps: 2})
		fold(t, s, DecideLLMResult(s, &LLMResult{CallID: "plan-1", Content: plan3}, DefaultConfig(), t0))
		fold(t, s, DecideLLMResult(s, &LLMResult{CallID: "plan-2", Content: plan3}, DefaultConfig(), t0))
		if !strings.Contains(s.GetError(), "limit is 2") {
			t.Fatalf("error %q", s.GetError())
		}
	})
	t.Run("llm error in a step", func(t *testing.T) {
		s := start(t, nil)
		fold(t, s, DecideLLMResult(s, &LLMResult{CallID: "plan-1", Content: plan3}, DefaultConfig(), t0))
		evs := DecideLLMResult(s, &LLMResult{CallID: "a/llm-1", Err: errors.New("HTTP 500")}, DefaultConfig(), t0)
		if got := types(evs); got != "step_failed,session_failed" {
			t.Fatalf("events %s", got)
		}
		fold(t, s, evs)
		if s.GetSteps()[0].GetStatus() != messages.StepStatus_STEP_STATUS_FAILED || !strings.Contains(s.GetError(), "HTTP 500") {
			t.Fatalf("state %v", s)
		}
	})
	t.Run("max iterations", func(t *testing.T) {
		s := start(t, &messages.SessionConfig{MaxIterations: 2})
		fold(t, s, DecideLLMResult(s, &LLMResult{CallID: "plan-1", Content: plan3}, DefaultConfig(), t0))
		fold(t, s, DecideLLMResult(s, &LLMResult{CallID: "a/llm-1", Content: "ok"}, DefaultConfig(), t0))
		if s.GetStatus() != messages.SessionStatus_SESSION_STATUS_FAILED || !strings.Contains(s.GetError(), "max iterations") {
			t.Fatalf("state %v", s)
		}
	})
}

func TestApplyRejects(t *testing.T) {
	s := NewState("s1")
	ok := &messages.Event{Seq: 1, SessionId: "s1", Payload: &messages.Event_SessionStarted{SessionStarted: &messages.SessionStarted{Goal: "g"}}}
	for name, ev := range map[string]*messages.Event{
		"other session": {Seq: 1, SessionId: "s2", Payload: ok.Payload},
		"seq gap":       {Seq: 2, SessionId: "s1", Payload: ok.Payload},
		"no payload":    {Seq: 1, SessionId: "s1"},
		"unknown step":  {Seq: 1, SessionId: "s1", Payload: &messages.Event_StepStarted{StepStarted: &messages.StepStarted{StepId: "x"}}},
	} {
		before := proto.Clone(s)
		if err := Apply(s, ev); !errors.Is(err, ErrBadEvent) {
			t.Errorf("%s: err = %v, want ErrBadEvent", name, err)
		}
		if !proto.Equal(before, s) {
			t.Errorf("%s: a rejected event changed the state", name)
		}
	}
}

func TestRememberedCommandsAreBounded(t *testing.T) {
	s := NewState("s1")
	for i := 1; i <= MaxRememberedCommands+10; i++ {
		rememberCommand(s, "c"+strings.Repeat("x", i%7)+string(rune('a'+i%26))+time.Duration(i).String(), uint64(i))
	}
	if len(s.GetCommands()) != MaxRememberedCommands {
		t.Fatalf("remembered %d commands, want %d", len(s.GetCommands()), MaxRememberedCommands)
	}
	for _, seq := range s.GetCommands() {
		if seq <= 10 {
			t.Fatalf("oldest commands were not evicted first (seq %d kept)", seq)
		}
	}
}

func TestParsePlanDependencies(t *testing.T) {
	steps, err := parsePlan(`{"steps":[{"id":"a","type":"research","description":"x"},{"id":"b","type":"code","description":"y"},`+
		`{"id":"c","type":"write","description":"z","dependencies":[]},{"id":"d","type":"review","description":"w","dependencies":["b","c","b"]}]}`, 10)
	if err != nil {
		t.Fatal(err)
	}
	got := []string{}
	for _, s := range steps {
		got = append(got, s.GetId()+":"+strings.Join(s.GetDependencies(), "+"))
	}
	// Omitted: the previous step; explicit (even empty): as given, without duplicates.
	if want := "a:,b:a,c:,d:b+c"; strings.Join(got, ",") != want {
		t.Fatalf("dependencies %s, want %s", strings.Join(got, ","), want)
	}
	for plan, want := range map[string]string{
		`{"steps":[{"id":"a","description":"x","dependencies":["zz"]}]}`:                                                  "unknown step",
		`{"steps":[{"id":"a","description":"x","dependencies":["a"]}]}`:                                                   "itself",
		`{"steps":[{"id":"a","description":"x","dependencies":["b"]},{"id":"b","description":"y","dependencies":["a"]}]}`: "cycle",
	} {
		if _, err := parsePlan(plan, 10); err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("parsePlan(%s) = %v, want an error about %q", plan, err, want)
		}
	}
}

func TestParsePlanSubAgentID(t *testing.T) {
	steps, err := parsePlan(`{"steps":[{"id":"a","type":"research","description":"x"},{"id":"b","type":"research","description":"y","sub_agent_id":" researcher-1 "}]}`, 10)
	if err != nil || steps[0].GetSubAgentId() != "" || steps[1].GetSubAgentId() != "researcher-1" {
		t.Fatalf("steps %v, err %v", steps, err)
	}
	if _, err := parsePlan(`{"steps":[{"id":"a","type":"custom","description":"x","sub_agent_id":"researcher-1"}]}`, 10); err == nil ||
		!strings.Contains(err.Error(), "does not run in a sub-agent") {
		t.Fatalf("sub_agent_id on a custom step: err = %v", err)
	}
}

func TestForkText(t *testing.T) {
	for in, want := range map[string]string{
		"s-1/research/notes.md":                     "f-9/research/notes.md",
		"see `s-1/drafts/a.md` and (s-1/code/x.py)": "see `f-9/drafts/a.md` and (f-9/code/x.py)",
		`{"path":"s-1/drafts/a.md"}`:                `{"path":"f-9/drafts/a.md"}`,
		"xs-1/drafts/a.md s-12/drafts/a.md s-1.md":  "xs-1/drafts/a.md s-12/drafts/a.md s-1.md",
		"s-1/a s-1/b":   "f-9/a f-9/b",
		"nothing here":  "nothing here",
		"ns-1/a\ns-1/b": "ns-1/a\nf-9/b",
	} {
		if got := forkText(in, "s-1", "f-9"); got != want {
			t.Errorf("forkText(%q) = %q, want %q", in, got, want)
		}
	}
	ev := &messages.Event{SessionId: "f-9", Payload: &messages.Event_ToolResult{ToolResult: &messages.ToolResult{
		IdempotencyKey: "s-1/a/tool-1", Result: "wrote s-1/drafts/a.md",
	}}}
	forkArtifactPaths(ev, "s-1", "f-9")
	if r := ev.GetToolResult(); r.GetIdempotencyKey() != "s-1/a/tool-1" || r.GetResult() != "wrote f-9/drafts/a.md" {
		t.Fatalf("tool_result after the fork rewrite: %v", r)
	}
}

// TestLLMCallsFoldAllCalls: state.llm_calls counts every llm_requested, the orchestrator's
// and its sub-agents', and equals what an old snapshot's counters give (iterations plus
// each sub-agent's llm_calls).
func TestLLMCallsFoldAllCalls(t *testing.T) {
	s := NewState("s")
	evs := []*messages.Event{
		{Payload: &messages.Event_SessionStarted{SessionStarted: &messages.SessionStarted{Goal: "g", Config: &messages.SessionConfig{Model: "m"}}}},
		{Payload: &messages.Event_LlmRequested{LlmRequested: &messages.LlmRequested{CallId: "plan-1", Purpose: PurposePlan, Iteration: 1}}},
		{Payload: &messages.Event_LlmResponded{LlmResponded: &messages.LlmResponded{CallId: "plan-1", Content: "x", CostUsd: 0.5,
			Usage: &messages.Usage{InputTokens: 10, OutputTokens: 5}}}},
		{Payload: &messages.Event_PlanCreated{PlanCreated: &messages.PlanCreated{PlanId: "plan-1", Steps: []*messages.PlanStep{{Id: "r", Type: "research", Description: "d"}}}}},
		{Payload: &messages.Event_StepStarted{StepStarted: &messages.StepStarted{StepId: "r", StepIndex: 0, Attempt: 1}}},
		{Payload: &messages.Event_SubagentStarted{SubagentStarted: &messages.SubagentStarted{SubAgentId: "researcher-1", AgentType: "researcher", StepId: "r", StepIndex: 0}}},
		{Payload: &messages.Event_LlmRequested{LlmRequested: &messages.LlmRequested{CallId: "researcher-1/llm-1", StepId: "r", Purpose: purposeSubAgent, Iteration: 1, SubAgentId: "researcher-1"}}},
	}
	for i, ev := range evs {
		ev.Seq, ev.SessionId = uint64(i+1), "s"
		if err := Apply(s, ev); err != nil {
			t.Fatalf("event %d: %v", i+1, err)
		}
	}
	if s.GetLlmCalls() != 2 || s.GetLlmCalls() != s.GetIterations()+s.GetSubAgents()["researcher-1"].GetLlmCalls() {
		t.Fatalf("llm_calls %d, iterations %d", s.GetLlmCalls(), s.GetIterations())
	}
	b := NewEvents(s, "", time.Unix(0, 0))
	if got := spentBy(b); got.calls != 2 || got.cost != 0.5 || got.tokens != 15 {
		t.Fatalf("spent %+v", got)
	}
	s.Config.MaxLlmCalls = 2
	if msg := budgetReason(b); !strings.HasPrefix(msg, "session budget exceeded: 3 LLM calls (max_llm_calls 2): raise it with the node's --max-llm-calls") {
		t.Fatalf("reason %q", msg)
	}
}
