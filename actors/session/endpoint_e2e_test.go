package session_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/cluster"

	"github.com/fathom-agents/fathom/actors/session"
	"github.com/fathom-agents/fathom/actors/session/core"
	"github.com/fathom-agents/fathom/messages"
)

// realEndpoint makes the node record and check the endpoint its LLM config really
// calls (this harness's scripted model, on its own port) instead of the harness's shared
// name; allow sets --allow-endpoint-change.
func realEndpoint(allow bool) func(*session.Config) {
	return func(c *session.Config) { c.Endpoint, c.AllowEndpointChange = core.Endpoint{}, allow }
}

func provideInput(h *harness, id, cmd, input string) error {
	_, err := h.node.Session(id).ProvideInput(&messages.ProvideInputRequest{CommandId: cmd, StepId: "ask", Input: input}, cluster.WithTimeout(10*time.Second))
	return err
}

// TestSessionKeepsItsEndpoint: a session records the endpoint it was started on; a node
// configured for another endpoint refuses to continue it (the answer is not recorded,
// the session keeps waiting), and continues it only with the override.
func TestSessionKeepsItsEndpoint(t *testing.T) {
	j := openJournal(t)
	t.Cleanup(func() { _ = j.Close() })
	sc := humanStepScript(t, "")
	a := startHarness(t, harnessOpts{journal: j, script: sc, cfg: realEndpoint(false)})
	if _, err := a.start("ep", "c1", "print copies"); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, a, "ep", messages.SessionStatus_SESSION_STATUS_AWAITING_HUMAN)
	stopNode(t, a)
	started := storedEvents(t, j, "ep")[0].GetSessionStarted().GetConfig()
	if started.GetProvider() != "openai" || !strings.HasPrefix(started.GetBaseUrl(), "http://127.0.0.1:") || started.GetModel() == "" {
		t.Fatalf("recorded endpoint %v", started)
	}

	b := startHarness(t, harnessOpts{journal: j, script: sc, cfg: realEndpoint(false)})
	err := provideInput(b, "ep", "c2", `{"n":3}`)
	if err == nil || !strings.Contains(err.Error(), "was started on openai at "+started.GetBaseUrl()) || !strings.Contains(err.Error(), "--allow-endpoint-change") {
		t.Fatalf("input on another endpoint: %v", err)
	}
	if evs := storedEvents(t, j, "ep"); count(evs, "hitl_received") != 0 || count(evs, "llm_requested") != 1 {
		t.Fatalf("the refused input changed the session: %d events", len(evs))
	}
	stopNode(t, b)

	c := startHarness(t, harnessOpts{journal: j, script: sc, cfg: realEndpoint(true)})
	if err := provideInput(c, "ep", "c3", `{"n":3}`); err != nil {
		t.Fatalf("input with --allow-endpoint-change: %v", err)
	}
	evs := waitTerminal(t, j, "ep", 20*time.Second)
	mustComplete(t, evs)
	if res := evs[len(evs)-1].GetSessionCompleted().GetResult(); res != "printing three" {
		t.Fatalf("result %q", res)
	}
}

// TestEndpointRefusedOnActivation: a session with a call in flight moved to a node with
// another endpoint makes no call there; it waits for a node with its endpoint.
func TestEndpointRefusedOnActivation(t *testing.T) {
	j := openJournal(t)
	t.Cleanup(func() { _ = j.Close() })
	// A session recorded before endpoints were (no provider in its config) continues
	// anywhere.
	old := []*messages.Event{
		{Seq: 1, SessionId: "old", AtUnixNano: time.Now().UnixNano(), CommandId: "c1", Payload: &messages.Event_SessionStarted{SessionStarted: &messages.SessionStarted{
			Goal: "find it", Config: &messages.SessionConfig{Model: "gpt-4o-mini", MaxIterations: 20, MaxSteps: 10}}}},
		{Seq: 2, SessionId: "old", AtUnixNano: time.Now().UnixNano(), CommandId: "c1", Payload: &messages.Event_LlmRequested{LlmRequested: &messages.LlmRequested{
			CallId: "plan-1", Purpose: "plan", Model: "gpt-4o-mini", Iteration: 1}}},
	}
	recs, err := core.EncodeEvents(old)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := j.Append(context.Background(), "old", 0, recs); err != nil {
		t.Fatal(err)
	}
	// The same call in flight, recorded by a node of another endpoint.
	moved := make([]*messages.Event, len(old))
	for i, ev := range old {
		moved[i] = &messages.Event{Seq: ev.GetSeq(), SessionId: "moved", AtUnixNano: ev.GetAtUnixNano(), CommandId: ev.GetCommandId(), Payload: ev.GetPayload()}
	}
	moved[0] = &messages.Event{Seq: 1, SessionId: "moved", AtUnixNano: time.Now().UnixNano(), CommandId: "c1", Payload: &messages.Event_SessionStarted{SessionStarted: &messages.SessionStarted{
		Goal: "find it", Config: &messages.SessionConfig{Model: "gpt-4o-mini", MaxIterations: 20, MaxSteps: 10, Provider: "openai", BaseUrl: "http://elsewhere.test/v1"}}}}
	if recs, err = core.EncodeEvents(moved); err != nil {
		t.Fatal(err)
	}
	if _, err := j.Append(context.Background(), "moved", 0, recs); err != nil {
		t.Fatal(err)
	}

	h := startHarness(t, harnessOpts{journal: j, script: script(t, `{"match":"Step: find it","response":"found"}`), cfg: realEndpoint(false)})
	if _, err := h.state("moved"); err != nil { // activates it here, with its plan call pending
		t.Fatal(err)
	}
	if _, err := h.state("old"); err != nil {
		t.Fatal(err)
	}
	// The old session runs its plan and step calls on this node, after the moved one
	// was activated: by then the moved one would have had its plan call answered too.
	mustComplete(t, waitTerminal(t, j, "old", 20*time.Second))
	if evs := storedEvents(t, j, "moved"); len(evs) != 2 {
		t.Fatalf("the moved session made progress on another endpoint: %d events, last %v", len(evs), evs[len(evs)-1])
	}
	st, err := h.state("moved")
	if err != nil || st.GetState().GetPending().GetCallId() != "plan-1" {
		t.Fatalf("moved session: %v %v", st.GetState(), err)
	}
}
