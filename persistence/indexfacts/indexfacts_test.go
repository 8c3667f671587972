package indexfacts_test

import (
	"strings"
	"testing"

	"github.com/fathom-agents/fathom/messages"
	"github.com/fathom-agents/fathom/persistence"
	"github.com/fathom-agents/fathom/persistence/indexfacts"
)

func record(t *testing.T, ev *messages.Event) persistence.Record {
	t.Helper()
	data, err := messages.EncodeEvent(ev)
	if err != nil {
		t.Fatal(err)
	}
	return persistence.Record{Type: ev.Type(), Data: data}
}

// TestFactsOfEvents: the start's user and goal, the cost and tokens of every model call, nothing
// from other events or records that do not decode.
func TestFactsOfEvents(t *testing.T) {
	long := make([]byte, persistence.MaxIndexedGoalBytes+10)
	for i := range long {
		long[i] = 'g'
	}
	recs := []persistence.Record{
		record(t, &messages.Event{Seq: 1, Payload: &messages.Event_SessionStarted{SessionStarted: &messages.SessionStarted{Goal: string(long), UserId: "ann"}}}),
		record(t, &messages.Event{Seq: 2, Payload: &messages.Event_LlmResponded{LlmResponded: &messages.LlmResponded{Content: strings.Repeat("answer ", 500), Model: "m", CostUsd: 0.25, Usage: &messages.Usage{InputTokens: 9}}}}),
		record(t, &messages.Event{Seq: 3, Payload: &messages.Event_SessionCompleted{SessionCompleted: &messages.SessionCompleted{CostUsd: 99}}}),
		{Type: "llm_responded", Data: []byte{0xff, 0xff}},
		record(t, &messages.Event{Seq: 4, Payload: &messages.Event_LlmResponded{LlmResponded: &messages.LlmResponded{CostUsd: 0.5,
			Usage: &messages.Usage{InputTokens: 100, OutputTokens: 20, TotalTokens: 110}}}}),
		record(t, &messages.Event{Seq: 5, Payload: &messages.Event_ArtifactWritten{ArtifactWritten: &messages.ArtifactWritten{Path: "s/research/a.md", Size: 1500, Sha256: "ab"}}}),
		record(t, &messages.Event{Seq: 6, Payload: &messages.Event_ArtifactWritten{ArtifactWritten: &messages.ArtifactWritten{Path: "s/results/c1", Size: 70000}}}),
		{Type: "artifact_written", Data: []byte{0xff}},
	}
	f := indexfacts.Of(recs)
	if !f.Started || f.UserID != "ann" || len(f.Goal) != persistence.MaxIndexedGoalBytes || f.CostUSD != 0.75 {
		t.Fatalf("facts = started %v user %q goal %d bytes cost %v", f.Started, f.UserID, len(f.Goal), f.CostUSD)
	}
	if f.Tokens != 9+120 { // input only; input + output over a smaller total
		t.Fatalf("facts count %d tokens, want 129", f.Tokens)
	}
	if f.ArtifactBytes != 1500+70000 {
		t.Fatalf("facts count %d artifact bytes, want 71500", f.ArtifactBytes)
	}
	if f := indexfacts.Of(recs[1:]); f.Started || f.Goal != "" || f.CostUSD != 0.75 {
		t.Fatalf("facts without a start = %+v", f)
	}
}
