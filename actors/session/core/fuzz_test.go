package core_test

import (
	"encoding/binary"
	"errors"
	"reflect"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/fathom-agents/fathom/actors/session/core"
	"github.com/fathom-agents/fathom/messages"
)

// Each event of a fuzz input is a mode byte, a uvarint length and that many bytes of a
// protobuf-encoded messages.Event. The mode says how much of the envelope is kept as
// decoded: fuzzFit sets the session id and the next seq (so the payload is what gets
// exercised), fuzzSeq keeps the decoded seq, fuzzRaw keeps both.
const (
	fuzzFit byte = iota
	fuzzSeq
	fuzzRaw
)

const fuzzSession = "s-fuzz"

// fuzzInput encodes evs as a fuzz input, each with mode.
func fuzzInput(t testing.TB, mode byte, evs ...*messages.Event) []byte {
	t.Helper()
	var out []byte
	for _, ev := range evs {
		b, err := proto.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, mode)
		out = binary.AppendUvarint(out, uint64(len(b)))
		out = append(out, b...)
	}
	return out
}

// fuzzEvents decodes a fuzz input: the events and their modes, stopping at the first
// malformed one (a fuzz input is any bytes; what does not decode ends it).
func fuzzEvents(data []byte) (evs []*messages.Event, modes []byte) {
	for len(data) > 1 {
		mode := data[0] % 3
		n, k := binary.Uvarint(data[1:])
		if k <= 0 || n > uint64(len(data)-1-k) {
			return evs, modes
		}
		chunk := data[1+k : 1+k+int(n)]
		data = data[1+k+int(n):]
		ev := &messages.Event{}
		if proto.Unmarshal(chunk, ev) != nil {
			continue
		}
		evs, modes = append(evs, ev), append(modes, mode)
	}
	return evs, modes
}

// FuzzApply folds random event sequences: Apply never panics, a bad event is an error
// wrapping ErrBadEvent, a refused event leaves the state as it was (Apply's contract),
// and the incremental history (HistoryCache) stays History's. An input's first byte picks how much of the recorded demo journal is folded
// first (so random events meet states deep in a session: a plan, sub-agents, pending
// calls and tools); the rest are the events. The seeds (run by plain `go test`) are the
// demo's events one by one, in and out of their place, broken variants of them and the
// whole journal; `go test -fuzz=FuzzApply` explores from there.
func FuzzApply(f *testing.F) {
	_, fixture := readFixture(f, fixtureFile)
	var demo []*messages.Event
	for _, evs := range fixture {
		for _, ev := range evs {
			ev = proto.Clone(ev).(*messages.Event)
			ev.SessionId = fuzzSession
			demo = append(demo, ev)
		}
		break
	}
	if len(demo) == 0 || len(demo) > 255 {
		f.Fatalf("the demo journal has %d events; the fuzz input's first byte indexes them", len(demo))
	}
	seed := func(prefix int, mode byte, evs ...*messages.Event) {
		f.Add(append([]byte{byte(prefix)}, fuzzInput(f, mode, evs...)...))
	}
	seed(0, fuzzRaw, demo...)
	for i := range demo {
		seed(i, fuzzFit, demo[i])               // each event in its place
		seed(i, fuzzFit, demo[(i+1)%len(demo)]) // the next one, skipping an event
		if i > 0 {
			seed(i, fuzzFit, demo[i-1]) // the previous one again
			seed(i, fuzzSeq, demo[i-1]) // a duplicate seq
		}
		broken := proto.Clone(demo[i]).(*messages.Event)
		broken.Payload = nil
		seed(i, fuzzFit, broken)
	}
	seed(0, fuzzRaw, &messages.Event{SessionId: "other", Seq: 1})
	f.Add([]byte{3, 0, 200, 1, 2, 3})

	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		st := core.NewState(fuzzSession)
		for _, ev := range demo[:int(data[0])%(len(demo)+1)] {
			if err := core.Apply(st, ev); err != nil {
				t.Fatalf("the demo journal does not fold: %v", err)
			}
		}
		var hist core.HistoryCache
		hist.History(st)
		evs, modes := fuzzEvents(data[1:])
		for i, ev := range evs {
			switch modes[i] {
			case fuzzFit:
				ev.SessionId, ev.Seq = fuzzSession, st.GetSeq()+1
			case fuzzSeq:
				ev.SessionId = fuzzSession
			}
			before := proto.Clone(st).(*messages.SessionState)
			next := core.CloneState(st) // what the grain folds decisions into
			if !proto.Equal(next, st) {
				t.Fatalf("event %d (%s): CloneState is not a copy of the state", i, ev.Type())
			}
			cerr := core.Apply(next, ev)
			if !proto.Equal(before, st) {
				t.Fatalf("event %d (%s): applying it to a CloneState copy changed the original", i, ev.Type())
			}
			err := core.Apply(st, ev)
			if (cerr == nil) != (err == nil) || (err == nil && !proto.Equal(next, st)) {
				t.Fatalf("event %d (%s): applied to a CloneState copy it folds differently (%v, %v)", i, ev.Type(), cerr, err)
			}
			if err == nil {
				if got, want := hist.History(st), core.History(st); len(want) > 0 && !reflect.DeepEqual(got, want) {
					t.Fatalf("event %d (%s): the incremental history differs from History", i, ev.Type())
				}
				continue
			}
			if !errors.Is(err, core.ErrBadEvent) {
				t.Fatalf("event %d (%s): error %v does not wrap ErrBadEvent", i, ev.Type(), err)
			}
			if !proto.Equal(before, st) {
				t.Fatalf("event %d (%s) was refused (%v) but changed the state", i, ev.Type(), err)
			}
		}
	})
}
