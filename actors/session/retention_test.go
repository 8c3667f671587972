package session_test

import (
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"
	"weak"

	"github.com/fathom-agents/fathom/actors/session"
	"github.com/fathom-agents/fathom/internal/testenv"
	"github.com/fathom-agents/fathom/messages"
)

// stateTracker keeps a weak pointer to the state each commit leads to (session.Observer),
// to tell which of them something still holds.
type stateTracker struct {
	mu     sync.Mutex
	states []weak.Pointer[messages.SessionState]
	seqs   []uint64
}

func (o *stateTracker) Committed(c session.Commit) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.states = append(o.states, weak.Make(c.State))
	o.seqs = append(o.seqs, c.State.GetSeq())
}

// held returns the seqs of the states before the newest that are still reachable.
func (o *stateTracker) held() []uint64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []uint64
	for i, p := range o.states[:max(len(o.states)-1, 0)] {
		if p.Value() != nil {
			out = append(out, o.seqs[i])
		}
	}
	return out
}

// heldSeqs prints the tracker's held seqs when the failure message is formatted.
type heldSeqs struct{ o *stateTracker }

func (h heldSeqs) String() string { return fmt.Sprint(h.o.held()) }

// TestOldStatesAreCollectable checks that an active session holds the state it has
// reached, not the states of its earlier commits: each is a copy of the session's state
// (steps, config, commands, usage), and the pipelined appends it has finished with must
// not keep theirs (nor their events and records) alive.
func TestOldStatesAreCollectable(t *testing.T) {
	const steps = 6
	sj := newSlowJournal(t, 5*time.Millisecond, 0)
	obs := &stateTracker{}
	h := startHarness(t, harnessOpts{journal: sj, script: stepsScript(t, steps), observers: []session.Observer{obs},
		cfg: func(c *session.Config) { c.IdleTimeout, c.FinishedIdleTimeout = time.Hour, time.Hour }})
	if _, err := h.start("r1", "c1", "goal"); err != nil {
		t.Fatal(err)
	}
	evs := waitTerminal(t, sj, "r1", 30*time.Second)
	last := evs[len(evs)-1].GetSeq()
	testenv.Eventually(t, 10*time.Second, func() bool {
		obs.mu.Lock()
		defer obs.mu.Unlock()
		return len(obs.seqs) > 0 && obs.seqs[len(obs.seqs)-1] == last
	}, "the observer never saw seq %d", last)
	testenv.Eventually(t, 10*time.Second, func() bool {
		runtime.GC()
		return len(obs.held()) == 0
	}, "the active session still holds the states of its earlier commits at seqs %v (newest %d)", heldSeqs{obs}, last)
}
