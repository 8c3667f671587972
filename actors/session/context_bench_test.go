package session

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/fathom-agents/fathom/actors/session/core"
	"github.com/fathom-agents/fathom/memory"
	"github.com/fathom-agents/fathom/messages"
	"github.com/fathom-agents/fathom/prompts"
	"github.com/fathom-agents/fathom/tools"
)

// contextBenchState is a session whose one orchestrator step has recorded n transcript
// messages (tool turns: an assistant call, then its result, ~200 tokens each) and waits
// for its next LLM call.
func contextBenchState(n int) *messages.SessionState {
	st := &messages.StepState{
		Step:   &messages.PlanStep{Id: "a", Type: "custom", Description: "investigate the incident and write up what happened"},
		Status: messages.StepStatus_STEP_STATUS_IN_PROGRESS, Attempt: 1, StartedSeq: 3, OpeningTokens: 30,
	}
	s := &messages.SessionState{
		SessionId: "s-bench", Seq: 3, Status: messages.SessionStatus_SESSION_STATUS_EXECUTING, Goal: "find out why the nightly job failed",
		Config: &messages.SessionConfig{Model: "gpt-4o-mini", MaxIterations: 1 << 20, MaxSteps: 10},
		Steps:  []*messages.StepState{st},
	}
	for range n {
		appendTurnMessage(s)
	}
	s.Pending = &messages.PendingCall{CallId: "a/llm-next", StepId: "a", Purpose: core.PurposeStep, RequestedSeq: s.Seq}
	return s
}

// benchText is ~200 tokens of message content.
var benchText = strings.Repeat("the job read the queue, found a malformed record and stopped; ", 20)

// appendTurnMessage records the next transcript message of the step: an assistant tool
// call or its result, alternately.
func appendTurnMessage(s *messages.SessionState) {
	st := s.Steps[0]
	s.Seq++
	id := fmt.Sprintf("call_%d", len(st.Transcript)/2)
	e := &messages.TranscriptEntry{Seq: s.Seq, Role: "assistant", Content: benchText, Tokens: 200,
		ToolCalls: []*messages.ToolCallRequest{{Id: id, Name: "search", Arguments: `{"q":"queue"}`}}}
	if len(st.Transcript)%2 == 1 {
		e = &messages.TranscriptEntry{Seq: s.Seq, Role: "tool", Content: benchText, ToolCallId: id, Tokens: 200}
	}
	st.Transcript = append(st.Transcript, e)
}

func contextBenchDeps(b *testing.B) *Deps {
	p, err := prompts.Default()
	if err != nil {
		b.Fatal(err)
	}
	tok, err := memory.TokenizerForModel("gpt-4o-mini", memory.EncodingO200K)
	if err != nil {
		b.Fatal(err)
	}
	// The node's tools (none here): a step request lists them, as the grain's does.
	reg, err := tools.NewRegistry()
	if err != nil {
		b.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Core = cfg.Core.WithNode(tok, nil)
	return &Deps{Config: cfg, Prompts: p, Tokenizer: tok, Now: time.Now, Tools: &tools.Executor{Registry: reg}}
}

// BenchmarkStepContext measures the context of one step call as the grain builds it
// between two calls: the history grew by a tool turn's two messages since the last
// call (the grain's core.HistoryCache extends it), then memory.BuildContext fits it
// into the budget. Its cost does not depend on the history's length: compare
// messages=200 with messages=10000.
func BenchmarkStepContext(b *testing.B) {
	benchContext(b, false)
}

// BenchmarkStepContextRebuilt is BenchmarkStepContext with the history rebuilt from the
// whole state on every call (core.History, as before the cache): for comparison.
func BenchmarkStepContextRebuilt(b *testing.B) {
	benchContext(b, true)
}

func benchContext(b *testing.B, rebuild bool) {
	d := contextBenchDeps(b)
	for _, n := range []int{200, 10000} {
		b.Run(fmt.Sprintf("messages=%d", n), func(b *testing.B) {
			base := contextBenchState(n)
			s := proto.Clone(base).(*messages.SessionState)
			var h core.HistoryCache
			h.History(s)
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				if i%64 == 63 {
					// Keep the history at n messages: start again from the base state.
					b.StopTimer()
					s = proto.Clone(base).(*messages.SessionState)
					h.Reset()
					h.History(s)
					b.StartTimer()
				}
				appendTurnMessage(s)
				appendTurnMessage(s)
				s.Pending.RequestedSeq = s.Seq
				var hist []memory.Message
				if !rebuild {
					hist = h.History(s)
				}
				if _, info, err := buildContextRequest(ctx, d, s, s.Pending.CallId, hist); err != nil || info.GetRecentCount() == 0 {
					b.Fatalf("build context: %v (%v)", err, info)
				}
			}
		})
	}
}
