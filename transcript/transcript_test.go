package transcript_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fathom-agents/fathom/messages"
	"github.com/fathom-agents/fathom/transcript"
)

// run is a delegated session's events: a plan, a sub-agent that answers, calls a tool
// whose result is too large (stored as an artifact), calls one that fails, waits for an
// approval a named human edits, hands off; then the session completes.
func run() []*messages.Event {
	big := strings.Repeat("0123456789abcdef", 400) // 6,400 bytes
	evs := []*messages.Event{
		{Payload: &messages.Event_SessionStarted{SessionStarted: &messages.SessionStarted{Goal: "Research actors"}}},
		{Payload: &messages.Event_PlanCreated{PlanCreated: &messages.PlanCreated{PlanId: "plan-1", Steps: []*messages.PlanStep{{Id: "step-1", Type: "research", Description: "find papers"}}}}},
		{Payload: &messages.Event_StepStarted{StepStarted: &messages.StepStarted{StepId: "step-1", StepType: "research", Description: "find papers", Attempt: 1}}},
		{Payload: &messages.Event_SubagentStarted{SubagentStarted: &messages.SubagentStarted{SubAgentId: "researcher-1", AgentType: "researcher", StepId: "step-1", Task: "Find papers on actors"}}},
		{Payload: &messages.Event_LlmRequested{LlmRequested: &messages.LlmRequested{CallId: "step-1/researcher-1/llm-1", StepId: "step-1", Purpose: "subagent", SubAgentId: "researcher-1"}}},
		{Payload: &messages.Event_LlmRequested{LlmRequested: &messages.LlmRequested{CallId: "step-1/researcher-1/llm-1", StepId: "step-1", Purpose: "subagent", SubAgentId: "researcher-1"}}}, // asked again after a recovery
		{Payload: &messages.Event_LlmResponded{LlmResponded: &messages.LlmResponded{CallId: "step-1/researcher-1/llm-1", StepId: "step-1", SubAgentId: "researcher-1",
			Content: "## Plan\nI will *search*.", Thinking: []*messages.ThinkingBlock{{Thinking: "search first"}},
			ToolCalls: []*messages.ToolCallRequest{{Id: "c1", Name: "web_search"}, {Id: "c2", Name: "code_execute"}}}}},
		{Payload: &messages.Event_ToolCalled{ToolCalled: &messages.ToolCalled{StepId: "step-1", CallId: "c1", Tool: "web_search", Args: `{"query":"actors"}`, IdempotencyKey: "s/step-1/tool-1", SubAgentId: "researcher-1"}}},
		{Payload: &messages.Event_ArtifactWritten{ArtifactWritten: &messages.ArtifactWritten{Path: "s-1/results/c1", ArtifactType: "results", Filename: "c1", Size: 6400, CallId: "c1", IdempotencyKey: "s/step-1/tool-1", SubAgentId: "researcher-1"}}},
		{Payload: &messages.Event_ToolResult{ToolResult: &messages.ToolResult{StepId: "step-1", CallId: "c1", Tool: "web_search", IdempotencyKey: "s/step-1/tool-1", Result: big, SubAgentId: "researcher-1"}}},
		{Payload: &messages.Event_ToolCalled{ToolCalled: &messages.ToolCalled{StepId: "step-1", CallId: "c2", Tool: "code_execute", Args: `{"code":"1/0"}`, IdempotencyKey: "s/step-1/tool-2", SubAgentId: "researcher-1"}}},
		{Payload: &messages.Event_ToolResult{ToolResult: &messages.ToolResult{StepId: "step-1", CallId: "c2", Tool: "code_execute", IdempotencyKey: "s/step-1/tool-2", SubAgentId: "researcher-1",
			Error: &messages.ToolFailure{ErrorType: "execution", Message: "ZeroDivisionError"}}}},
		{Payload: &messages.Event_HitlRequested{HitlRequested: &messages.HitlRequested{RequestId: "s/step-1/tool-3", Kind: "approval", StepId: "step-1", SubAgentId: "researcher-1", CallId: "c3", Tool: "write_artifact", Args: `{"filename":"a.md"}`}}},
		{By: &messages.Principal{Subject: "alice", Tenant: "acme"}, Payload: &messages.Event_HitlReceived{HitlReceived: &messages.HitlReceived{RequestId: "s/step-1/tool-3", StepId: "step-1", SubAgentId: "researcher-1", By: "human", Decision: "edit", Args: `{"filename":"b.md"}`}}},
		{Payload: &messages.Event_SubagentCompleted{SubagentCompleted: &messages.SubagentCompleted{SubAgentId: "researcher-1", AgentType: "researcher", StepId: "step-1", Action: "continue",
			Result: &messages.SubagentResult{Status: "completed", Summary: "Found **3** papers", ToolsUsed: []string{"web_search"}, Researcher: &messages.ResearcherReport{KeyFindings: []string{"actors scale"}}}}}},
		{Payload: &messages.Event_LlmRequested{LlmRequested: &messages.LlmRequested{CallId: "final-1", Purpose: "synthesize"}}},
		{Payload: &messages.Event_SessionCompleted{SessionCompleted: &messages.SessionCompleted{Result: "# Actors\n\nThey scale."}}},
	}
	for i, ev := range evs {
		ev.Seq, ev.SessionId, ev.AtUnixNano = uint64(i+1), "s-1", time.Unix(1700000000, int64(i)).UnixNano()
	}
	return evs
}

func fold(evs []*messages.Event) *transcript.Transcript {
	b := transcript.New("s-1", transcript.Options{})
	for _, ev := range evs {
		b.Add(ev)
	}
	return b.Transcript()
}

func lane(t *testing.T, tr *transcript.Transcript, id string) *transcript.Agent {
	t.Helper()
	for _, a := range tr.Agents {
		if a.ID == id {
			return a
		}
	}
	t.Fatalf("no lane %s in %+v", id, tr.Agents)
	return nil
}

func kinds(a *transcript.Agent) string {
	var ks []string
	for _, e := range a.Entries {
		ks = append(ks, e.Kind)
	}
	return strings.Join(ks, " ")
}

// TestTranscriptLanes: each agent has its own lane with what it said and did, in order;
// a tool's result too large is cut with the path of the whole and linked to the
// artifact that holds it; a failed call shows its ToolError; the approval names who
// decided; the hand-off carries its facts; the final result is the transcript's.
func TestTranscriptLanes(t *testing.T) {
	tr := fold(run())
	if tr.Status != "completed" || tr.Goal != "Research actors" || tr.Seq != 17 {
		t.Fatalf("status %q goal %q seq %d", tr.Status, tr.Goal, tr.Seq)
	}
	if tr.Result == nil || !strings.Contains(tr.Result.HTML, "<h1") || !strings.Contains(tr.Result.HTML, "They scale.") {
		t.Fatalf("result %+v", tr.Result)
	}
	if len(tr.Agents) != 2 || tr.Agents[0].ID != transcript.Orchestrator {
		t.Fatalf("lanes %+v", tr.Agents)
	}
	if k := kinds(lane(t, tr, transcript.Orchestrator)); k != "goal plan step answer result" {
		t.Errorf("orchestrator: %s", k)
	}
	ra := lane(t, tr, "researcher-1")
	if k := kinds(ra); k != "task answer tool tool approval handoff" || ra.AgentType != "researcher" || ra.Status != "completed" {
		t.Fatalf("researcher-1: %s (%s, %s)", k, ra.AgentType, ra.Status)
	}
	ans := ra.Entries[1]
	if ans.Pending || !strings.Contains(ans.Text.HTML, "<h2>Plan</h2>") || ans.Reasoning == nil || ans.Reasoning.Text != "search first" ||
		strings.Join(ans.ToolCalls, ",") != "web_search,code_execute" || ans.EndSeq != 7 {
		t.Errorf("answer %+v", ans)
	}
	search := ra.Entries[2]
	if search.Tool != "web_search" || !search.Args.JSON || search.Args.Text != `{"query":"actors"}` || search.Pending {
		t.Errorf("search call %+v", search)
	}
	if r := search.Result; !r.Cut || r.Bytes != 6400 || len(r.Text) != transcript.DefaultMaxValue || r.Full != "/v1/sessions/s-1/events/10?field=result" {
		t.Errorf("search result: cut %v, %d bytes, %d shown, full %q", r.Cut, r.Bytes, len(r.Text), r.Full)
	}
	if len(search.Artifacts) != 1 || search.Artifacts[0].URL != "/v1/sessions/s-1/artifacts/results/c1" {
		t.Errorf("search artifacts %+v", search.Artifacts)
	}
	if e := ra.Entries[3].Error; e == nil || e.Type != "execution" || e.Message != "ZeroDivisionError" {
		t.Errorf("failed call's error %+v", e)
	}
	ap := ra.Entries[4]
	if ap.Tool != "write_artifact" || ap.Decision != "edit" || ap.AnsweredBy != "alice@acme" || ap.Answer.Text != `{"filename":"b.md"}` || ap.Pending {
		t.Errorf("approval %+v", ap)
	}
	h := ra.Entries[5].Handoff
	if h == nil || h.Status != "completed" || h.Action != "continue" || !strings.Contains(h.Summary.HTML, "<strong>3</strong>") ||
		!strings.Contains(h.Facts.Text, "actors scale") || !h.Facts.JSON {
		t.Errorf("hand-off %+v", h)
	}
	// The closing summary's call never answered before the end: still pending.
	orch := lane(t, tr, transcript.Orchestrator)
	if e := orch.Entries[3]; !e.Pending || e.CallID != "final-1" {
		t.Errorf("final call %+v", e)
	}
}

// TestTranscriptAtSeq: the events up to a seq give the transcript as the journal held
// it then: no hand-off nor result from later, the call in flight pending.
func TestTranscriptAtSeq(t *testing.T) {
	tr := fold(run()[:6])
	if tr.Status != "running" || tr.Result != nil || tr.Seq != 6 {
		t.Fatalf("status %q result %v seq %d", tr.Status, tr.Result, tr.Seq)
	}
	ra := lane(t, tr, "researcher-1")
	if k := kinds(ra); k != "task answer" || !ra.Entries[1].Pending || ra.Status != "running" {
		t.Fatalf("researcher-1 at seq 6: %s %+v", k, ra.Entries[1])
	}
	tr = fold(run()[:13])
	if tr.Status != "awaiting_human" || !lane(t, tr, "researcher-1").Entries[4].Pending {
		t.Fatalf("at seq 13: %s", tr.Status)
	}
}

// TestFullValue: the whole of a cut value, and an error for a field that is none.
func TestFullValue(t *testing.T) {
	evs := run()
	v, err := transcript.FullValue(evs[9], "result")
	if err != nil || v.Cut || v.Bytes != 6400 || len(v.Text) != 6400 {
		t.Fatalf("full result: %v %+v", err, v)
	}
	v, err = transcript.FullValue(evs[16], "result")
	if err != nil || !strings.Contains(v.HTML, "<h1") {
		t.Fatalf("full session result: %v %+v", err, v)
	}
	if _, err := transcript.FullValue(evs[9], "args"); !errors.Is(err, transcript.ErrNoField) {
		t.Fatalf("args of a tool_result: %v", err)
	}
}

// TestBudgetAndCancel: a session that crossed a budget shows it as such; a cancelled one
// names who cancelled.
func TestBudgetAndCancel(t *testing.T) {
	evs := run()[:3]
	evs = append(evs, &messages.Event{Seq: 4, Payload: &messages.Event_SessionFailed{SessionFailed: &messages.SessionFailed{
		Error: "session budget exceeded: 3 LLM calls (max_llm_calls 2): raise it"}}})
	tr := fold(evs)
	orch := lane(t, tr, transcript.Orchestrator)
	if last := orch.Entries[len(orch.Entries)-1]; tr.Status != "failed" || last.Kind != transcript.KindBudget || !strings.Contains(last.Text.Text, "max_llm_calls") {
		t.Fatalf("budget: %s %+v", tr.Status, last)
	}
	evs = append(run()[:3], &messages.Event{Seq: 4, By: &messages.Principal{Subject: "ops", Tenant: "default"},
		Payload: &messages.Event_SessionCancelled{SessionCancelled: &messages.SessionCancelled{Reason: "enough", By: "console"}}})
	tr = fold(evs)
	orch = lane(t, tr, transcript.Orchestrator)
	if last := orch.Entries[len(orch.Entries)-1]; tr.Status != "cancelled" || last.AnsweredBy != "ops@default" || last.Text.Text != "enough" {
		t.Fatalf("cancel: %s %+v", tr.Status, last)
	}
}
