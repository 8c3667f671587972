package core

import (
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"testing"
	"unsafe"

	"google.golang.org/protobuf/proto"

	"github.com/fathom-agents/fathom/memory"
	"github.com/fathom-agents/fathom/messages"
	"github.com/fathom-agents/fathom/tools"
)

// checkCache folds evs into s one at a time, each into a fresh copy as the grain does,
// and checks after each that the cache's history is History's.
func checkCache(t *testing.T, h *HistoryCache, s *messages.SessionState, evs []*messages.Event) *messages.SessionState {
	t.Helper()
	for _, ev := range evs {
		s = proto.Clone(s).(*messages.SessionState)
		fold(t, s, []*messages.Event{ev})
		want := History(s)
		if want == nil {
			want = []memory.Message{}
		}
		if got := h.History(s); !reflect.DeepEqual(got, want) {
			t.Fatalf("after event %d (%s): cached history has %d messages, History %d", ev.GetSeq(), ev.Type(), len(got), len(want))
		}
	}
	return s
}

// TestHistoryCacheMatchesHistory: the incremental history equals History after every
// event of the recorded demo (sub-agents whose hand-offs land between older messages)
// and of an orchestrator step with tool turns, a retry that resets its transcript and
// a second step, and after the state is reloaded with a shorter history.
func TestHistoryCacheMatchesHistory(t *testing.T) {
	t.Run("demo journal", func(t *testing.T) {
		id, evs := readDemo(t)
		var h HistoryCache
		checkCache(t, &h, NewState(id), evs)
	})
	t.Run("orchestrator steps, a retry and a reload", func(t *testing.T) {
		cfg := DefaultConfig()
		cfg.StepAttempts = 2
		var h HistoryCache
		s := NewState("s1")
		start, err := DecideStart(s, &messages.StartRequest{CommandId: "c1", Goal: "g"}, cfg, t0)
		if err != nil {
			t.Fatal(err)
		}
		s = checkCache(t, &h, s, start)
		s = checkCache(t, &h, s, DecideLLMResult(s, &LLMResult{CallID: "plan-1", Content: `{"steps":[{"id":"a","type":"custom","description":"look"},{"id":"b","type":"custom","description":"write"}]}`}, cfg, t0))
		for i := 1; i <= 3; i++ {
			s = checkCache(t, &h, s, DecideLLMResult(s, &LLMResult{CallID: s.GetPending().GetCallId(), Content: "turn", ToolCalls: calls(fmt.Sprintf("x%d:t", i))}, cfg, t0))
			key := s.GetPendingTools()[0].GetIdempotencyKey()
			s = checkCache(t, &h, s, DecideToolResult(s, &ToolResult{Key: key, Res: tools.Result{Output: "ok"}, Tokens: 3}, cfg, t0))
		}
		s = checkCache(t, &h, s, DecideLLMResult(s, &LLMResult{CallID: s.GetPending().GetCallId(), Err: errors.New("HTTP 429"), Retryable: true}, cfg, t0))
		s = checkCache(t, &h, s, DecideRetry(s, cfg, t0.Add(cfg.StepRetryDelay)))
		s = checkCache(t, &h, s, DecideLLMResult(s, &LLMResult{CallID: s.GetPending().GetCallId(), Content: "turn", ToolCalls: calls("y:t")}, cfg, t0))
		s = checkCache(t, &h, s, DecideToolResult(s, &ToolResult{Key: s.GetPendingTools()[0].GetIdempotencyKey(), Res: tools.Result{Output: "ok"}}, cfg, t0))
		// The grain reloads an older state (a write failed) and decides again: the same
		// seq now holds another message.
		reload := proto.Clone(s).(*messages.SessionState)
		checkCache(t, &h, s, DecideLLMResult(s, &LLMResult{CallID: s.GetPending().GetCallId(), Content: "turn", ToolCalls: calls("z:t")}, cfg, t0))
		s = checkCache(t, &h, reload, DecideLLMResult(reload, &LLMResult{CallID: reload.GetPending().GetCallId(), Content: "a done"}, cfg, t0))
		s = checkCache(t, &h, s, DecideLLMResult(s, &LLMResult{CallID: s.GetPending().GetCallId(), Content: "b done"}, cfg, t0))
		if s.GetStatus() != messages.SessionStatus_SESSION_STATUS_COMPLETED && len(s.GetSteps()[1].GetTranscript()) == 0 {
			t.Fatalf("the session did not reach step b: %s", s.GetStatus())
		}
		// Step a's second attempt (opening, tool call, result, answer) and step b (opening,
		// answer).
		if n := len(h.History(s)); n != 6 {
			t.Fatalf("history of %d messages, want 6", n)
		}
	})
}

// allocated is the bytes that f allocates, averaged over runs.
func allocated(runs int, f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range runs {
		f()
	}
	runtime.ReadMemStats(&after)
	return (after.TotalAlloc - before.TotalAlloc) / uint64(runs)
}

// TestHistoryCacheRoomIsProportional: the room a cache keeps for the calls to come is
// proportional to the history. The cache is built on a session's first call, when its
// history is a message or two, and lives as long as the session is active: a fixed room
// of 64 messages was 7 kB of every active session.
func TestHistoryCacheRoomIsProportional(t *testing.T) {
	cfg := DefaultConfig()
	s := NewState("s1")
	start, err := DecideStart(s, &messages.StartRequest{CommandId: "c1", Goal: "g"}, cfg, t0)
	if err != nil {
		t.Fatal(err)
	}
	fold(t, s, start)
	fold(t, s, DecideLLMResult(s, &LLMResult{CallID: "plan-1", Content: `{"steps":[{"id":"a","type":"custom","description":"look"}]}`}, cfg, t0))
	n := len(History(s))
	if n == 0 {
		t.Fatal("the first step's history is empty")
	}
	history := allocated(100, func() { _ = History(s) })
	cached := allocated(100, func() {
		var h HistoryCache
		_ = h.History(s)
	})
	size := uint64(unsafe.Sizeof(memory.Message{}))
	// The history again (the room is a new array), a quarter more, a step's messages, and
	// the cache's marks.
	if limit := history + uint64(n+n/4+16)*size + 512; cached > limit {
		t.Fatalf("a cache of a %d-message history allocates %d bytes, History %d: more than %d (room for %d messages)",
			n, cached, history, limit, (cached-history)/size)
	}
}
