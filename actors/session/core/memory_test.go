package core_test

import (
	"testing"

	"github.com/fathom-agents/fathom/actors/session/core"
	"github.com/fathom-agents/fathom/messages"
)

// TestMemoryEventsFold: memory_saved upserts the state's memories by id (the newest
// record, in first-saved order), memory_deleted drops one; both round-trip through the
// event JSON dialect.
func TestMemoryEventsFold(t *testing.T) {
	s := core.NewState("s")
	evs := []*messages.Event{
		{Payload: &messages.Event_SessionStarted{SessionStarted: &messages.SessionStarted{Goal: "g", UserId: "u"}}},
		{Payload: &messages.Event_MemorySaved{MemorySaved: &messages.MemorySaved{MemoryId: "m1", Tenant: "acme", UserId: "u", Text: "first", Metadata: map[string]string{"kind": "fact"}, CreatedAtUnixNano: 5}}},
		{Payload: &messages.Event_MemorySaved{MemorySaved: &messages.MemorySaved{MemoryId: "m2", Tenant: "acme", UserId: "u", Text: "second"}}},
		{Payload: &messages.Event_MemorySaved{MemorySaved: &messages.MemorySaved{MemoryId: "m1", Tenant: "acme", UserId: "u", Text: "first, edited", Replaced: true}}},
		{Payload: &messages.Event_MemoryDeleted{MemoryDeleted: &messages.MemoryDeleted{MemoryId: "m2", Tenant: "acme", UserId: "u"}}},
	}
	var after []string
	for i, ev := range evs {
		ev.Seq, ev.SessionId, ev.AtUnixNano = uint64(i+1), "s", int64(i+1)
		b, err := messages.MarshalEventJSON(ev)
		if err != nil {
			t.Fatal(err)
		}
		back, err := messages.UnmarshalEventJSON(b)
		if err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		if back.Type() != ev.Type() || back.PayloadMessage() == nil {
			t.Fatalf("round trip of %s: %v", b, back)
		}
		if err := core.Apply(s, back); err != nil {
			t.Fatal(err)
		}
		var texts string
		for _, m := range s.GetMemories() {
			texts += m.GetMemoryId() + "=" + m.GetText() + ";"
		}
		after = append(after, texts)
	}
	want := []string{"", "m1=first;", "m1=first;m2=second;", "m1=first, edited;m2=second;", "m1=first, edited;"}
	for i := range want {
		if after[i] != want[i] {
			t.Fatalf("after event %d: %q, want %q", i+1, after[i], want[i])
		}
	}
	if evs[1].Type() != "memory_saved" || evs[4].Type() != "memory_deleted" {
		t.Fatalf("types %s %s", evs[1].Type(), evs[4].Type())
	}
}
