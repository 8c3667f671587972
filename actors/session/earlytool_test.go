package session_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/fathom-agents/fathom/messages"
	"github.com/fathom-agents/fathom/persistence"
	"github.com/fathom-agents/fathom/persistence/journaltest"
	"github.com/fathom-agents/fathom/tools"
)

// gatedJournal holds back the appends that carry a tool_called event until the tool has
// run (ran is closed) or hold passed, and fails the first of them when failFirst is set:
// a journal on which a test sees whether a tool call started before its tool_called was
// durable.
type gatedJournal struct {
	*journaltest.Faulty
	hold      time.Duration
	failFirst bool
	ran       chan struct{}
	once      sync.Once
	mu        sync.Mutex
	failed    bool
}

func newGatedJournal(t *testing.T, hold time.Duration, failFirst bool) *gatedJournal {
	return &gatedJournal{Faulty: journaltest.NewFaulty(openJournal(t)), hold: hold, failFirst: failFirst, ran: make(chan struct{})}
}

// toolRan tells the journal that a tool ran.
func (g *gatedJournal) toolRan() { g.once.Do(func() { close(g.ran) }) }

// AppendIndexed implements persistence.SessionIndex: an append carrying tool_called waits
// for the tool (or hold), and the first one fails when failFirst is set.
func (g *gatedJournal) AppendIndexed(ctx context.Context, stream string, expected uint64, recs []persistence.Record, e persistence.IndexEntry) (uint64, error) {
	for _, r := range recs {
		if r.Type != "tool_called" {
			continue
		}
		select {
		case <-g.ran:
		case <-time.After(g.hold):
		case <-ctx.Done():
			return 0, ctx.Err()
		}
		g.mu.Lock()
		fail := g.failFirst && !g.failed
		g.failed = g.failed || fail
		g.mu.Unlock()
		if fail {
			return 0, errors.New("journal unavailable (injected)")
		}
		break
	}
	return g.Faulty.AppendIndexed(ctx, stream, expected, recs, e)
}

// runs records, per tool call, whether its tool_called was stored when the tool ran.
type runs struct {
	mu     sync.Mutex
	stored []bool
}

func (r *runs) add(stored bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stored = append(r.stored, stored)
}

func (r *runs) get() []bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]bool(nil), r.stored...)
}

// earlyToolRun starts a one-step session whose step calls tool (peek: declared without
// effects; poke: not) on a gated journal and returns its stored events once it ended,
// and what each run of the tool saw.
func earlyToolRun(t *testing.T, tool string, gj *gatedJournal) ([]*messages.Event, []bool) {
	t.Helper()
	rs := &runs{}
	observe := func(ctx context.Context) {
		c, _ := tools.CallInfo(ctx)
		stored := false
		for _, ev := range storedEvents(t, gj, c.SessionID) {
			if tc := ev.GetToolCalled(); tc != nil && tc.GetIdempotencyKey() == c.IdempotencyKey {
				stored = true
			}
		}
		rs.add(stored)
		gj.toolRan()
	}
	type noArgs struct{}
	reg, err := tools.NewRegistry(
		tools.WithoutEffects(tools.MustNew("peek", "Reads something.", tools.SandboxNone, func(ctx context.Context, _ noArgs) (any, error) {
			observe(ctx)
			return "peeked", nil
		})),
		tools.MustNew("poke", "Changes something.", tools.SandboxNone, func(ctx context.Context, _ noArgs) (any, error) {
			observe(ctx)
			return "poked", nil
		}),
	)
	if err != nil {
		t.Fatal(err)
	}
	sc := script(t,
		`{"tool_match":"(peeked|poked)","response":"all done: {{.Tool}}"}`,
		`{"match":"Step: find it","tool_calls":[{"name":"`+tool+`","arguments":"{}"}]}`,
	)
	h := startHarness(t, harnessOpts{journal: gj, script: sc, tools: &tools.Executor{Registry: reg, Timeout: 10 * time.Second}})
	if _, err := h.start("e1", "c1", "goal"); err != nil {
		t.Fatal(err)
	}
	evs := waitTerminal(t, gj, "e1", 30*time.Second)
	mustComplete(t, evs)
	return evs, rs.get()
}

// checkToolsAnsweredOnce checks that every recorded tool call has exactly one result,
// after its call.
func checkToolsAnsweredOnce(t *testing.T, evs []*messages.Event) {
	t.Helper()
	called, results := map[string]uint64{}, map[string]int{}
	for _, ev := range evs {
		if c := ev.GetToolCalled(); c != nil {
			if _, dup := called[c.GetIdempotencyKey()]; dup {
				t.Fatalf("tool call %s recorded twice", c.GetIdempotencyKey())
			}
			called[c.GetIdempotencyKey()] = ev.GetSeq()
		}
		if r := ev.GetToolResult(); r != nil {
			at, ok := called[r.GetIdempotencyKey()]
			if !ok || at > ev.GetSeq() {
				t.Fatalf("result of %s at seq %d without its call before it", r.GetIdempotencyKey(), ev.GetSeq())
			}
			results[r.GetIdempotencyKey()]++
		}
	}
	if len(called) == 0 {
		t.Fatal("no tool call recorded")
	}
	for k := range called {
		if results[k] != 1 {
			t.Fatalf("tool call %s has %d results, want 1", k, results[k])
		}
	}
}

// TestToolWithoutEffectsStartsBeforeItsCallIsDurable: a tool declared without effects
// (tools.WithoutEffects, as write_todos is) starts while the append of its tool_called is
// still in flight, and its result follows the call in the journal; a tool with effects
// starts only once its tool_called is stored.
func TestToolWithoutEffectsStartsBeforeItsCallIsDurable(t *testing.T) {
	t.Run("without effects", func(t *testing.T) {
		gj := newGatedJournal(t, 10*time.Second, false)
		evs, seen := earlyToolRun(t, "peek", gj)
		if len(seen) != 1 || seen[0] {
			t.Fatalf("peek's runs saw its tool_called stored: %v; want one run, before the append that stores it returned", seen)
		}
		checkToolsAnsweredOnce(t, evs)
		checkCallsAnsweredOnce(t, evs)
	})
	t.Run("with effects", func(t *testing.T) {
		gj := newGatedJournal(t, 300*time.Millisecond, false)
		evs, seen := earlyToolRun(t, "poke", gj)
		if len(seen) != 1 || !seen[0] {
			t.Fatalf("poke's runs saw its tool_called stored: %v; want one run, after it was stored", seen)
		}
		checkToolsAnsweredOnce(t, evs)
	})
}

// TestToolWithoutEffectsRunsAgainWhenItsCallIsLost: when the append of the tool_called of
// a call started early fails, the result of that run is dropped with it; the grain
// reloads, the model is asked again, and the session records the call and one result.
func TestToolWithoutEffectsRunsAgainWhenItsCallIsLost(t *testing.T) {
	gj := newGatedJournal(t, 2*time.Second, true)
	evs, seen := earlyToolRun(t, "peek", gj)
	if len(seen) < 2 {
		t.Fatalf("peek ran %d times; want a run whose call was lost and one after the reload", len(seen))
	}
	checkToolsAnsweredOnce(t, evs)
	checkCallsAnsweredOnce(t, evs)
}
