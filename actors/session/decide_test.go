package session

import (
	"testing"

	"github.com/fathom-agents/fathom/actors/session/core"
	"github.com/fathom-agents/fathom/memory"
	"github.com/fathom-agents/fathom/messages"
)

// TestUnsummarizedTokensMatchesTheHistory: the allocation-free count the grain checks on
// every answer equals the memory library's count over the built history.
func TestUnsummarizedTokensMatchesTheHistory(t *testing.T) {
	s := &messages.SessionState{CurrentStepIndex: 1, Steps: []*messages.StepState{
		{StartedSeq: 3, OpeningTokens: 10, Transcript: []*messages.TranscriptEntry{{Seq: 4, Role: "assistant", Tokens: 7}, {Seq: 6, Role: "assistant", Tokens: 5}}},
		{StartedSeq: 8, OpeningTokens: 11, Transcript: []*messages.TranscriptEntry{{Seq: 9, Role: "assistant", Tokens: 13}}},
		{},
	}}
	hist := core.History(s)
	for through := uint64(0); through <= 10; through++ {
		if got, want := unsummarizedTokens(s, through), memory.UnsummarizedTokens(hist, through); got != want {
			t.Fatalf("through %d: %d, want %d", through, got, want)
		}
	}
}
