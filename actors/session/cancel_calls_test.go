package session_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fathom-agents/fathom/internal/node"
	"github.com/fathom-agents/fathom/internal/testenv"
	"github.com/fathom-agents/fathom/llm/mock"
	"github.com/fathom-agents/fathom/messages"
)

// hangingModel serves the scripted model, except that a call whose request body holds
// marker hangs until its caller goes away; it counts those calls and their aborts.
type hangingModel struct {
	next            http.Handler
	marker          []byte
	hung, abandoned atomic.Int32
	arrived         chan struct{}
}

func (m *hangingModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if !bytes.Contains(body, m.marker) {
		r.Body = io.NopCloser(bytes.NewReader(body))
		m.next.ServeHTTP(w, r)
		return
	}
	if m.hung.Add(1) == 1 {
		close(m.arrived)
	}
	select {
	case <-r.Context().Done():
		m.abandoned.Add(1)
	case <-time.After(2 * time.Minute):
		http.Error(w, "the caller never went away", http.StatusGatewayTimeout)
	}
}

// TestCancelStopsASubAgentAndItsModelCall: cancelling a session while its researcher
// sub-agent waits on the model aborts that HTTP call (the client goes away), makes no
// further call, and records nothing after session_cancelled (no sub-agent result).
func TestCancelStopsASubAgentAndItsModelCall(t *testing.T) {
	script := &mock.Script{Rules: []mock.Rule{
		{SystemMatch: "FATHOM-PHASE: plan", Response: `{"steps":[{"id":"r","type":"research","description":"dig deep"}]}`},
	}, Default: "done"}
	model := &hangingModel{next: mock.New(mock.Config{Script: *script}).Handler(), marker: []byte("FATHOM-ROLE: researcher"), arrived: make(chan struct{})}
	srv := httptest.NewServer(model)
	t.Cleanup(srv.Close)
	h := startHarness(t, harnessOpts{script: script, llm: func(c *node.LLMConfig) { c.BaseURL = srv.URL + "/v1" }})
	if _, err := h.start("dig", "c1", "dig deep"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-model.arrived:
	case <-time.After(20 * time.Second):
		t.Fatal("the researcher never called the model")
	}
	if _, err := h.node.Session("dig").Cancel(&messages.CancelRequest{CommandId: "stop", Reason: "enough", By: "ops"}, call()); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, func() bool { return model.abandoned.Load() > 0 },
		"the researcher's model call was not aborted by the cancel (%d calls hung)", model.hung.Load())
	st, err := h.state("dig")
	if err != nil {
		t.Fatal(err)
	}
	if st.GetState().GetStatus() != messages.SessionStatus_SESSION_STATUS_CANCELLED {
		t.Fatalf("status %v", st.GetState().GetStatus())
	}
	evs := storedEvents(t, h.j, "dig")
	if last := evs[len(evs)-1]; last.GetSessionCancelled() == nil || last.GetCommandId() != "stop" {
		t.Fatalf("recorded after the cancel: %s", last.Type())
	}
	if n := count(evs, "subagent_started"); n != 1 || count(evs, "subagent_completed") != 0 {
		t.Fatalf("%d sub-agents started, %d completed: want 1 started, none completed", n, count(evs, "subagent_completed"))
	}
	if hung := model.hung.Load(); hung != 1 {
		t.Fatalf("the researcher called the model %d times, want 1 (no retry after the cancel)", hung)
	}
}
