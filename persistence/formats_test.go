package persistence_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/fathom-agents/fathom/messages"
	"github.com/fathom-agents/fathom/persistence"
	"github.com/fathom-agents/fathom/persistence/memjournal"
)

// TestEventFormatsNameEveryEvent: every payload type of messages.Event declares the
// journal format that introduced it, no declared format is newer than the one this build
// writes, and the table names nothing that is not an event type. A release that adds an
// event type fails here until it declares it.
func TestEventFormatsNameEveryEvent(t *testing.T) {
	oneof := (&messages.Event{}).ProtoReflect().Descriptor().Oneofs().ByName("payload")
	if oneof == nil {
		t.Fatal("messages.Event has no oneof payload")
	}
	fields := oneof.Fields()
	names := map[string]bool{}
	for i := 0; i < fields.Len(); i++ {
		name := string(fields.Get(i).Name())
		names[name] = true
		f, ok := persistence.EventFormats[name]
		if !ok {
			t.Errorf("event type %s has no entry in persistence.EventFormats: declare the journal format that introduced it", name)
			continue
		}
		if f < 2 || f > persistence.Format {
			t.Errorf("event type %s is declared format %d; formats run from 2 to this build's %d", name, f, persistence.Format)
		}
	}
	for name := range persistence.EventFormats {
		if !names[name] {
			t.Errorf("persistence.EventFormats names %s, which is no payload of messages.Event", name)
		}
	}
}

// TestFormatGateHoldsNewerEvents: through FormatGate, an append (plain or indexed) with
// an event type newer than the cluster's lowest format is refused with a
// *FormatGateError naming it and stores nothing; once the lowest format reaches the
// event's, the same append is stored.
func TestFormatGateHoldsNewerEvents(t *testing.T) {
	const typ = "session_started"
	introduced := persistence.EventFormat(typ)
	var lowest atomic.Int64
	lowest.Store(int64(introduced - 1))
	mem := memjournal.New(memjournal.Options{})
	defer mem.Close()
	j := persistence.FormatGate(mem, func() int { return int(lowest.Load()) })
	ctx := context.Background()
	recs := []persistence.Record{{Seq: 1, Type: typ, Data: []byte("x")}}

	_, err := j.AppendIndexed(ctx, "s1", 0, recs, persistence.IndexEntry{SessionID: "s1", Status: persistence.StatusRunning})
	var ge *persistence.FormatGateError
	if !errors.As(err, &ge) || !errors.Is(err, persistence.ErrFormatGated) {
		t.Fatalf("indexed append of a %s while the lowest format is %d = %v; want a *FormatGateError", typ, introduced-1, err)
	}
	if ge.Type != typ || ge.Introduced != introduced || ge.Lowest != introduced-1 || ge.Stream != "s1" || !strings.Contains(err.Error(), "retry later") {
		t.Fatalf("gate error = %+v (%v)", ge, err)
	}
	if _, err := j.Append(ctx, "s2", 0, recs); !errors.Is(err, persistence.ErrFormatGated) {
		t.Fatalf("plain append = %v; want ErrFormatGated", err)
	}
	for _, s := range []string{"s1", "s2"} {
		if last, err := mem.LastSeq(ctx, s); err != nil || last != 0 {
			t.Fatalf("a refused append left stream %s at seq %d (%v)", s, last, err)
		}
	}

	if g, ok := j.(persistence.FormatGated); !ok || g.LowestFormat() != introduced-1 {
		t.Fatalf("the gated journal does not tell its lowest format (%d)", introduced-1)
	}

	lowest.Store(int64(introduced))
	if last, err := j.AppendIndexed(ctx, "s1", 0, recs, persistence.IndexEntry{SessionID: "s1", Status: persistence.StatusRunning}); err != nil || last != 1 {
		t.Fatalf("append once every member reads format %d = %d, %v", introduced, last, err)
	}
	if _, err := persistence.CheckSessionStore("gated", j); err != nil {
		t.Fatalf("the gated journal is not a whole SessionStore: %v", err)
	}
}
