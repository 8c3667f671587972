package core_test

import (
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/fathom-agents/fathom/actors/session/core"
	"github.com/fathom-agents/fathom/actors/session/replay"
	"github.com/fathom-agents/fathom/messages"
	"github.com/fathom-agents/fathom/persistence"
	"github.com/fathom-agents/fathom/persistence/bolt"
)

// The journal corpus: testdata/corpus/NAME.ndjson are journals written by the build
// NAME names (a commit), recorded by testdata/corpus/record.sh with that build's binary
// (its header says how); NAME.state.json are the states they fold to. Every later build
// must fold each to the same states: that is what lets any session continue on a newer
// version. Add a file per release; never re-record an old one.
var recordCorpus = flag.String("record-corpus", "", "NAME=JOURNAL: write testdata/corpus/NAME.ndjson from the embedded journal JOURNAL (record.sh's)")

const corpusDir = "testdata/corpus"

// corpusKinds are the event kinds the corpus as a whole must hold: sub-agents, tools,
// a human's answer, an approval, a fork, a cancel.
var corpusKinds = []string{"subagent_started", "subagent_completed", "tool_called", "tool_result", "artifact_written",
	"hitl_requested", "hitl_received", "session_forked", "session_cancelled", "session_completed"}

// TestJournalCorpus folds every journal of the corpus, each written by an earlier build,
// with this build's Apply and through replay.Load, and checks each session's state equals
// the committed golden.
func TestJournalCorpus(t *testing.T) {
	if *recordCorpus != "" {
		name, path, ok := strings.Cut(*recordCorpus, "=")
		if !ok {
			t.Fatalf("-record-corpus %q: want NAME=JOURNAL", *recordCorpus)
		}
		record(t, path, filepath.Join(corpusDir, name+".ndjson"))
	}
	files, err := filepath.Glob(filepath.Join(corpusDir, "*.ndjson"))
	if err != nil || len(files) < 2 {
		t.Fatalf("the corpus has %d journals (%v), want one of 22f16bd and later ones", len(files), err)
	}
	seen := map[string]bool{}
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".ndjson")
		t.Run(name, func(t *testing.T) {
			streams, evs := readFixture(t, file)
			got := map[string]*messages.SessionState{}
			for _, id := range streams {
				st := core.NewState(id)
				for _, ev := range evs[id] {
					seen[ev.Type()] = true
					if err := core.Apply(st, ev); err != nil {
						t.Fatalf("fold %s: event %d (%s): %v", id, ev.GetSeq(), ev.Type(), err)
					}
				}
				if !core.Terminal(st) {
					t.Errorf("%s: ends %s, want a terminal state", id, st.GetStatus())
				}
				if loaded := loadThroughJournal(t, id, evs[id]); !proto.Equal(loaded, st) {
					t.Errorf("%s: replay.Load gives a state other than folding the events", id)
				}
				got[id] = st
			}
			checkGolden(t, filepath.Join(corpusDir, name+".state.json"), got)
		})
	}
	for _, k := range corpusKinds {
		if !seen[k] {
			t.Errorf("no journal of the corpus holds a %s event", k)
		}
	}
}

// loadThroughJournal appends evs to a fresh embedded journal and loads them with replay.Load.
func loadThroughJournal(t *testing.T, id string, evs []*messages.Event) *messages.SessionState {
	t.Helper()
	j := freshJournal(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	recs, err := core.EncodeEvents(evs)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := j.Append(ctx, id, 0, recs); err != nil {
		t.Fatal(err)
	}
	st, _, err := replay.Load(ctx, j, id, 0)
	if err != nil {
		t.Fatalf("load %s: %v", id, err)
	}
	return st
}

func freshJournal(t *testing.T) persistence.Journal {
	t.Helper()
	j, err := bolt.Open(filepath.Join(t.TempDir(), "journal.db"), bolt.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	return j
}

// checkGolden compares the folded states with the golden file (rewritten first with
// -update-golden).
func checkGolden(t *testing.T, file string, got map[string]*messages.SessionState) {
	t.Helper()
	golden := map[string]json.RawMessage{}
	if *updateGolden {
		for id, st := range got {
			b, err := protojson.MarshalOptions{Multiline: true, Indent: "  "}.Marshal(st)
			if err != nil {
				t.Fatal(err)
			}
			golden[id] = json.RawMessage(b)
		}
		b, err := json.MarshalIndent(golden, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("read golden: %v", err)
	}
	golden = map[string]json.RawMessage{}
	if err := json.Unmarshal(b, &golden); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	ids := make([]string, 0, len(got))
	for id := range got {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	if len(golden) != len(got) {
		t.Fatalf("%s has %d sessions, the journal %d (%v)", file, len(golden), len(got), ids)
	}
	for _, id := range ids {
		want := &messages.SessionState{}
		if err := protojson.Unmarshal(golden[id], want); err != nil {
			t.Fatalf("%s: session %s: %v", file, id, err)
		}
		if !proto.Equal(got[id], want) {
			path := filepath.Join(t.TempDir(), id+".json")
			gb, _ := protojson.MarshalOptions{Multiline: true, Indent: "  "}.Marshal(got[id])
			_ = os.WriteFile(path, gb, 0o644)
			t.Errorf("session %s folds to a state other than %s's (folded state written to %s)", id, file, path)
		}
	}
}

// TestSnapshotOfAnotherFoldVersionIsRebuilt: replay.Load trusts a snapshot this build's
// fold made (EncodeState stamps core.FoldVersion), and rebuilds from the events a
// snapshot without the stamp (written before snapshots recorded it) or whose stamp
// names another seq (re-encoded by such a build), even when its state is wrong.
func TestSnapshotOfAnotherFoldVersionIsRebuilt(t *testing.T) {
	streams, evs := readFixture(t, filepath.Join(corpusDir, "22f16bd.ndjson"))
	id := streams[0]
	all := evs[id]
	mid := len(all) / 2
	want := core.NewState(id)
	half := core.NewState(id)
	for i, ev := range all {
		if err := core.Apply(want, ev); err != nil {
			t.Fatal(err)
		}
		if i < mid {
			if err := core.Apply(half, ev); err != nil {
				t.Fatal(err)
			}
		}
	}
	// A snapshot whose state is off: the goal differs from the session's.
	off := proto.Clone(half).(*messages.SessionState)
	off.Goal = "not the session's goal"
	unstamped, err := proto.MarshalOptions{Deterministic: true}.Marshal(off)
	if err != nil {
		t.Fatal(err)
	}
	stamped, err := core.EncodeState(off)
	if err != nil {
		t.Fatal(err)
	}
	// An older build's re-encoding of a state loaded from a stamped snapshot at seq 1
	// and folded on: the stamp it kept names seq 1.
	early := proto.Clone(off).(*messages.SessionState)
	early.Seq = 1
	earlyBytes, err := core.EncodeState(early)
	if err != nil {
		t.Fatal(err)
	}
	reencoded := append(unstamped[:len(unstamped):len(unstamped)], earlyBytes[len(mustMarshal(t, early)):]...)

	for _, c := range []struct {
		name    string
		data    []byte
		trusted bool
	}{
		{"stamped by this build", stamped, true},
		{"unstamped", unstamped, false},
		{"stamp of another seq", reencoded, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			j := freshJournal(t)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			recs, err := core.EncodeEvents(all)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := j.Append(ctx, id, 0, recs); err != nil {
				t.Fatal(err)
			}
			if err := j.SaveSnapshot(ctx, id, persistence.Snapshot{Seq: half.GetSeq(), Data: c.data, At: time.Now()}); err != nil {
				t.Fatal(err)
			}
			st, snapSeq, err := replay.Load(ctx, j, id, 0)
			if err != nil {
				t.Fatal(err)
			}
			if c.trusted {
				if snapSeq != half.GetSeq() || st.GetGoal() != off.GetGoal() {
					t.Fatalf("a snapshot of this build's fold was not used: from snapshot %d, goal %q", snapSeq, st.GetGoal())
				}
				return
			}
			if snapSeq != 0 || !proto.Equal(st, want) {
				t.Fatalf("Load trusted a snapshot of another fold version: from snapshot %d, goal %q, want the state rebuilt from the events", snapSeq, st.GetGoal())
			}
		})
	}
}

func mustMarshal(t *testing.T, s *messages.SessionState) []byte {
	t.Helper()
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
