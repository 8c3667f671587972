package core_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/fathom-agents/fathom/actors/session/core"
	"github.com/fathom-agents/fathom/actors/session/replay"
	"github.com/fathom-agents/fathom/messages"
	"github.com/fathom-agents/fathom/persistence"
	"github.com/fathom-agents/fathom/persistence/bolt"
)

// Recording the fixture again (only when the demo's journal is meant to change):
//
//	go run ./cmd/fathom run --data-dir /tmp/demo "Write a haiku about event sourcing"
//	go test ./actors/session/core/ -run TestRecordedJournalFoldsToTheGolden \
//	    -record-journal /tmp/demo/journal.db -update-golden
var (
	recordJournal = flag.String("record-journal", "", "re-record testdata/make-run.ndjson from this embedded journal (journal.db of `make run`)")
	updateGolden  = flag.Bool("update-golden", false, "rewrite testdata/make-run.state.json from the fold of the fixture")
)

const (
	fixtureFile = "testdata/make-run.ndjson"
	goldenFile  = "testdata/make-run.state.json"
)

// fixtureLine is one journal record of the fixture: the record's bytes exactly as the
// grain wrote them (messages.EncodeEvent), with its stream, seq and type for readers.
type fixtureLine struct {
	Stream string `json:"stream"`
	Seq    uint64 `json:"seq"`
	Type   string `json:"type"`
	Record []byte `json:"record"`
}

// readFixture decodes the fixture's records with the journal's one decoder
// (messages.DecodeEvent), grouped by stream in order.
func readFixture(t testing.TB, path string) (streams []string, evs map[string][]*messages.Event) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("open fixture: %v", err)
	}
	defer f.Close()
	evs = map[string][]*messages.Event{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for n := 1; sc.Scan(); n++ {
		var l fixtureLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("%s:%d: %v", path, n, err)
		}
		ev, err := messages.DecodeEvent(l.Seq, l.Record)
		if err != nil {
			t.Fatalf("%s:%d: %v", path, n, err)
		}
		if ev.Type() != l.Type {
			t.Fatalf("%s:%d: record holds a %s event, the line says %s", path, n, ev.Type(), l.Type)
		}
		if _, ok := evs[l.Stream]; !ok {
			streams = append(streams, l.Stream)
		}
		evs[l.Stream] = append(evs[l.Stream], ev)
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("read fixture: %v", err)
	}
	return streams, evs
}

// record writes the fixture out from every stream of the embedded journal at path.
func record(t *testing.T, path, out string) {
	j, err := bolt.Open(path, bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("open journal: %v", err)
	}
	defer j.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	infos, err := j.ListStreams(ctx, "")
	if err != nil {
		t.Fatalf("list streams: %v", err)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	for _, info := range infos {
		err := j.Load(ctx, info.ID, 0, func(r persistence.Record) error {
			return enc.Encode(fixtureLine{Stream: info.ID, Seq: r.Seq, Type: r.Type, Record: r.Data})
		})
		if err != nil {
			t.Fatalf("load %s: %v", info.ID, err)
		}
	}
	if err := os.WriteFile(out, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestRecordedJournalFoldsToTheGolden folds the journal `make run` wrote (the demo
// session: a plan, four sub-agents, their tools and hand-offs, the synthesis) and
// checks the state equals the committed golden: journals written today keep loading
// to the same state.
func TestRecordedJournalFoldsToTheGolden(t *testing.T) {
	if *recordJournal != "" {
		record(t, *recordJournal, fixtureFile)
	}
	streams, evs := readFixture(t, fixtureFile)
	if len(streams) == 0 {
		t.Fatalf("%s holds no events", fixtureFile)
	}
	got := map[string]*messages.SessionState{}
	for _, id := range streams {
		st := core.NewState(id)
		for _, ev := range evs[id] {
			if err := core.Apply(st, ev); err != nil {
				t.Fatalf("fold %s: event %d (%s): %v", id, ev.GetSeq(), ev.Type(), err)
			}
		}
		if !core.Terminal(st) {
			t.Errorf("%s: the demo session ends %s, want a terminal state", id, st.GetStatus())
		}
		got[id] = st
	}
	checkGolden(t, goldenFile, got)
}

// TestRecordedJournalThroughLoad: the same fixture through a journal and replay.Load gives
// the same state as folding the records by hand (Load is what the grain and the CLI's
// offline readers use).
func TestRecordedJournalThroughLoad(t *testing.T) {
	streams, evs := readFixture(t, fixtureFile)
	j := freshJournal(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, id := range streams {
		recs, err := core.EncodeEvents(evs[id])
		if err != nil {
			t.Fatal(err)
		}
		if _, err := j.Append(ctx, id, 0, recs); err != nil {
			t.Fatal(err)
		}
		loaded, snapSeq, err := replay.Load(ctx, j, id, 0)
		if err != nil {
			t.Fatalf("load %s: %v", id, err)
		}
		folded := core.NewState(id)
		for _, ev := range evs[id] {
			if err := core.Apply(folded, ev); err != nil {
				t.Fatal(err)
			}
		}
		if snapSeq != 0 || loaded.GetSeq() != uint64(len(evs[id])) || !proto.Equal(loaded, folded) {
			t.Errorf("%s: Load gives seq %d (from snapshot %d), %s; folding gives seq %d, %s", id, loaded.GetSeq(), snapSeq, loaded.GetStatus(), folded.GetSeq(), folded.GetStatus())
		}
	}
}
