package session_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/fathom-agents/fathom/actors/session/core"
	"github.com/fathom-agents/fathom/internal/testenv"
	"github.com/fathom-agents/fathom/messages"
	"github.com/fathom-agents/fathom/persistence"
)

// TestQueuedMessageRunsWhenANodeStartsWithoutAnyRequest: a session whose turn completed
// with a message still queued (on_busy queue), when its node died before the next turn
// began, runs that message as soon as a node runs again, with no client request: its
// index row says it is due, so the new node's reactivator activates it.
func TestQueuedMessageRunsWhenANodeStartsWithoutAnyRequest(t *testing.T) {
	j := openBoltJournal(t)
	t.Cleanup(func() { _ = j.Close() })
	sc := rawScript(t, `{"rules":[
		{"system_match":"FATHOM-ROLE: orchestrator","response":"{\"steps\":[{\"id\":\"a\",\"type\":\"custom\",\"description\":\"one\"}]}"},
		{"system_match":"FATHOM-ROLE: executor","response":"done {{.Step}}"}]}`)
	h := startHarness(t, harnessOpts{journal: j, script: sc})
	if _, err := h.start("src", "c1", "goal"); err != nil {
		t.Fatal(err)
	}
	src := waitTerminal(t, j, "src", 20*time.Second)
	mustComplete(t, src)
	stopNode(t, h)

	// The journal of a session "q" whose node died between the turn's session_completed
	// and the queued message's turn: src's events, with a message queued while it ran.
	var evs []*messages.Event
	for _, ev := range src {
		if _, done := ev.GetPayload().(*messages.Event_SessionCompleted); done {
			evs = append(evs, &messages.Event{AtUnixNano: ev.GetAtUnixNano(), CommandId: "c2",
				Payload: &messages.Event_MessageQueued{MessageQueued: &messages.MessageQueued{Content: "and one more thing", OnBusy: core.OnBusyQueue}}})
		}
		evs = append(evs, proto.Clone(ev).(*messages.Event))
	}
	st := core.NewState("q")
	for i, ev := range evs {
		ev.SessionId, ev.Seq = "q", uint64(i+1)
		if err := core.Apply(st, ev); err != nil {
			t.Fatalf("fold event %d (%s): %v", i+1, ev.Type(), err)
		}
	}
	if st.GetStatus() != messages.SessionStatus_SESSION_STATUS_COMPLETED || len(st.GetQueuedMessages()) != 1 {
		t.Fatalf("the crafted session is %s with %d queued messages, want completed with 1", st.GetStatus(), len(st.GetQueuedMessages()))
	}
	recs, err := core.EncodeEvents(evs)
	if err != nil {
		t.Fatal(err)
	}
	entry := core.IndexEntryOf(st, time.Now())
	if _, err := j.(persistence.SessionIndex).AppendIndexed(context.Background(), "q", 0, recs, entry); err != nil {
		t.Fatal(err)
	}

	began := time.Now()
	_ = startHarness(t, harnessOpts{journal: j, script: sc})
	testenv.Eventually(t, 10*time.Second, func() bool {
		for _, ev := range storedEvents(t, j, "q") {
			if ev.GetMessageReceived().GetFromQueue() {
				return true
			}
		}
		return false
	}, "the queued message did not run after a node started (index row %+v)", entry)
	t.Logf("queued turn began %s after the node started", time.Since(began))
	final := waitTerminal(t, j, "q", 20*time.Second)
	mustComplete(t, final)
	if n := count(final, "session_completed"); n != 2 {
		t.Fatalf("%d session_completed, want 2 (the first turn and the queued one)", n)
	}
}
