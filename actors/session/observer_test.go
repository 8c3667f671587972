package session_test

import (
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/fathom-agents/fathom/actors/session"
	"github.com/fathom-agents/fathom/internal/testenv"
	"github.com/fathom-agents/fathom/messages"
)

// recordingObserver records what a node's sessions commit (session.Observer) and their
// activations (session.ActivationObserver).
type recordingObserver struct {
	mu        sync.Mutex
	commits   []session.Commit
	activated map[string]int
}

func (o *recordingObserver) Committed(c session.Commit) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.commits = append(o.commits, c)
}

func (o *recordingObserver) Activated(id string, _ *messages.SessionState, _ *slog.Logger) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.activated == nil {
		o.activated = map[string]int{}
	}
	o.activated[id]++
}

func (o *recordingObserver) Deactivated(string, *messages.SessionState, *slog.Logger) {}

// seen returns the commits of session id so far.
func (o *recordingObserver) seen(id string) []session.Commit {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []session.Commit
	for _, c := range o.commits {
		if c.SessionID == id {
			out = append(out, c)
		}
	}
	return out
}

// TestObserversSeeEveryDurableAppendOnceInOrder: a commit observer the node registers
// (node.Config.SessionObservers) is told of every stored event of a session exactly once,
// in order, in commits whose states are the fold before and after them, including the
// appends the grain pipelines and never of the one that fails (the second append fails
// here while others are queued behind it).
func TestObserversSeeEveryDurableAppendOnceInOrder(t *testing.T) {
	const steps = 8
	sj := newSlowJournal(t, 40*time.Millisecond, 2)
	obs := &recordingObserver{}
	h := startHarness(t, harnessOpts{journal: sj, script: stepsScript(t, steps), observers: []session.Observer{obs}})
	if _, err := h.start("o1", "c1", "goal"); err != nil {
		t.Fatal(err)
	}
	evs := waitTerminal(t, sj, "o1", 30*time.Second)
	checkExactlyOnce(t, evs, steps)
	last := evs[len(evs)-1].GetSeq()
	testenv.Eventually(t, 10*time.Second, func() bool {
		cs := obs.seen("o1")
		return len(cs) > 0 && cs[len(cs)-1].State.GetSeq() == last
	}, "the observer never saw seq %d", last)
	var told []*messages.Event
	for i, c := range obs.seen("o1") {
		if len(c.Events) == 0 || c.Bytes == 0 || c.Log == nil {
			t.Fatalf("commit %d: %d events, %d bytes, logger %v", i, len(c.Events), c.Bytes, c.Log)
		}
		first, end := c.Events[0].GetSeq(), c.Events[len(c.Events)-1].GetSeq()
		if c.Prev.GetSeq() != first-1 || c.State.GetSeq() != end {
			t.Fatalf("commit %d of seqs %d..%d comes from state %d and leads to state %d", i, first, end, c.Prev.GetSeq(), c.State.GetSeq())
		}
		told = append(told, c.Events...)
	}
	if len(told) != len(evs) {
		t.Fatalf("the observer was told of %d events, %d are stored", len(told), len(evs))
	}
	for i, ev := range told {
		if ev.GetSeq() != evs[i].GetSeq() || ev.Type() != evs[i].Type() {
			t.Fatalf("told event %d is %d %s, stored %d %s", i, ev.GetSeq(), ev.Type(), evs[i].GetSeq(), evs[i].Type())
		}
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if obs.activated["o1"] != 1 {
		t.Fatalf("the session's activation was reported %d times, want once", obs.activated["o1"])
	}
}
