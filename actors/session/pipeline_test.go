package session_test

import (
	"context"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/fathom-agents/fathom/actors/session"
	"github.com/fathom-agents/fathom/actors/session/core"
	"github.com/fathom-agents/fathom/internal/testenv"
	"github.com/fathom-agents/fathom/llm/mock"
	"github.com/fathom-agents/fathom/messages"
	"github.com/fathom-agents/fathom/persistence"
	"github.com/fathom-agents/fathom/persistence/journaltest"
)

// slowJournal makes every append take delay (a journal slower than the model), records
// how many steps each append carried, and fails the append numbered failAt (1-based;
// 0 never): a journaltest.Faulty made slow.
type slowJournal struct {
	*journaltest.Faulty
	mu      sync.Mutex
	answers []int // llm_responded events per successful append
}

func newSlowJournal(t *testing.T, delay time.Duration, failAt int64) *slowJournal {
	s := &slowJournal{Faulty: journaltest.NewFaulty(openJournal(t))}
	s.Slow(delay)
	s.FailAppend(failAt, errDown)
	s.OnAppend(func(_ string, recs []persistence.Record, _ uint64, err error) {
		if err != nil {
			return
		}
		answers := 0
		for _, r := range recs {
			if r.Type == "llm_responded" {
				answers++
			}
		}
		s.mu.Lock()
		s.answers = append(s.answers, answers)
		s.mu.Unlock()
	})
	return s
}

func (s *slowJournal) maxAnswersPerAppend() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := 0
	for _, a := range s.answers {
		m = max(m, a)
	}
	return m
}

// stepsScript plans n orchestrator steps and answers each at once.
func stepsScript(t *testing.T, n int) *mock.Script {
	t.Helper()
	steps := make([]string, n)
	for i := range steps {
		steps[i] = fmt.Sprintf(`{\"id\":\"s%d\",\"type\":\"custom\",\"description\":\"step %d\"}`, i+1, i+1)
	}
	script, err := mock.ParseScript([]byte(`{"rules":[` +
		`{"system_match":"FATHOM-ROLE: orchestrator","response":"{\"steps\":[` + strings.Join(steps, ",") + `]}"},` +
		`{"system_match":"FATHOM-ROLE: executor","response":"done {{.Step}}"}],"default":"?"}`))
	if err != nil {
		t.Fatal(err)
	}
	return &script
}

// checkExactlyOnce checks a finished session's events: contiguous seqs, one
// session_completed, every step completed once, every recorded call answered once.
func checkExactlyOnce(t *testing.T, evs []*messages.Event, steps int) {
	t.Helper()
	for i, ev := range evs {
		if ev.GetSeq() != uint64(i+1) {
			t.Fatalf("event %d has seq %d", i, ev.GetSeq())
		}
	}
	if last := evs[len(evs)-1]; last.Type() != "session_completed" {
		t.Fatalf("session ended with %v", last)
	}
	if n := count(evs, "session_completed"); n != 1 {
		t.Fatalf("%d session_completed", n)
	}
	completed := map[string]int{}
	for _, ev := range evs {
		if c := ev.GetStepCompleted(); c != nil {
			completed[c.GetStepId()]++
		}
	}
	if len(completed) != steps {
		t.Fatalf("%d steps completed, want %d", len(completed), steps)
	}
	for id, n := range completed {
		if n != 1 {
			t.Fatalf("step %s completed %d times", id, n)
		}
	}
	checkCallsAnsweredOnce(t, evs)
}

// checkCallsAnsweredOnce checks that every recorded LLM request is answered exactly once
// (a call started early whose append failed was cancelled, never answered twice).
func checkCallsAnsweredOnce(t *testing.T, evs []*messages.Event) {
	t.Helper()
	requested, responded := map[string]int{}, map[string]int{}
	for _, ev := range evs {
		if r := ev.GetLlmRequested(); r != nil {
			requested[r.GetCallId()]++
		}
		if r := ev.GetLlmResponded(); r != nil {
			responded[r.GetCallId()]++
		}
	}
	for id, n := range requested {
		if n != 1 || responded[id] != 1 {
			t.Fatalf("call %s: requested %d times, answered %d times; want 1 and 1", id, n, responded[id])
		}
	}
	if len(responded) != len(requested) {
		t.Fatalf("answers for %d calls, requests for %d", len(responded), len(requested))
	}
}

// TestPipelinedCommitsGroupAndPublishInOrder: with a journal slower than the model, the
// grain decides answers while earlier appends are in flight and the appends queued
// meanwhile go out as one (a group commit); subscribers still get every event once, in
// order, and only events that are stored.
func TestPipelinedCommitsGroupAndPublishInOrder(t *testing.T) {
	const steps = 8
	sj := newSlowJournal(t, 40*time.Millisecond, 0)
	h := startHarness(t, harnessOpts{journal: sj, script: stepsScript(t, steps)})
	sub := h.node.Feed().Subscribe("p1", 0)
	defer sub.Close()
	if _, err := h.start("p1", "c1", "goal"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var live []*messages.Event
	for len(live) == 0 || live[len(live)-1].Type() != "session_completed" {
		rec, err := sub.Next(ctx)
		if err != nil {
			t.Fatalf("after %d live events: %v", len(live), err)
		}
		// Published only once stored: the journal already holds it.
		last, err := sj.LastSeq(ctx, "p1")
		if err != nil || last < rec.GetSeq() {
			t.Fatalf("event %d (%s) published before it was stored (journal at %d, %v)", rec.GetSeq(), rec.Type(), last, err)
		}
		live = append(live, rec)
	}
	evs := storedEvents(t, sj, "p1")
	checkExactlyOnce(t, evs, steps)
	if len(live) != len(evs) {
		t.Fatalf("%d live events, %d stored", len(live), len(evs))
	}
	for i, rec := range live {
		if rec.GetSeq() != evs[i].GetSeq() || rec.Type() != evs[i].Type() {
			t.Fatalf("live event %d is %d %s, stored %d %s", i, rec.GetSeq(), rec.Type(), evs[i].GetSeq(), evs[i].Type())
		}
	}
	if m := sj.maxAnswersPerAppend(); m < 2 {
		t.Fatalf("no append carried more than one step's answer (max %d): the commits were not pipelined", m)
	}
	// Snapshots are taken of durable states only: the newest one is the fold of the
	// events through its seq. They are saved in the background: wait for one.
	var snap persistence.Snapshot
	testenv.Eventually(t, 10*time.Second, func() bool {
		s, ok, err := sj.LoadSnapshot(ctx, "p1", math.MaxUint64)
		snap = s
		return err == nil && ok
	}, "no snapshot of a %d-event session", len(evs))
	got, err := core.DecodeState(snap.Data)
	if err != nil {
		t.Fatal(err)
	}
	want := core.NewState("p1")
	for _, ev := range evs[:snap.Seq] {
		if err := core.Apply(want, ev); err != nil {
			t.Fatal(err)
		}
	}
	if !proto.Equal(got, want) {
		t.Fatalf("snapshot at seq %d is not the fold of the events through it", snap.Seq)
	}
}

// TestPipelinedAppendFailureLosesNothing: an append that fails while others are queued
// behind it drops them (none is stored out of order), stops the call started early, and
// the grain reloads and finishes the session with every call answered exactly once.
func TestPipelinedAppendFailureLosesNothing(t *testing.T) {
	const steps = 16
	// Appends group many steps here (the journal is slow): the second and third appends
	// are pipelined ones with work queued behind them.
	for _, failAt := range []int64{2, 3} {
		t.Run(fmt.Sprintf("append %d fails", failAt), func(t *testing.T) {
			sj := newSlowJournal(t, 40*time.Millisecond, failAt)
			h := startHarness(t, harnessOpts{journal: sj, script: stepsScript(t, steps), cfg: func(c *session.Config) {
				c.MaxSteps, c.MaxIterations = steps, 2*steps
			}})
			if _, err := h.start("p1", "c1", "goal"); err != nil {
				t.Fatal(err)
			}
			evs := waitTerminal(t, sj, "p1", 30*time.Second)
			if sj.Appends() < failAt {
				t.Fatalf("only %d appends: the failure was never injected", sj.Appends())
			}
			checkExactlyOnce(t, evs, steps)
		})
	}
}
