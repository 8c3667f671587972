package core

import (
	"bufio"
	"encoding/json"
	"os"
	"testing"

	"github.com/fathom-agents/fathom/messages"
)

// readDemo reads the recorded demo journal (testdata/make-run.ndjson, see
// journal_fixture_test.go) for the package's internal tests: its session id and events.
func readDemo(t *testing.T) (string, []*messages.Event) {
	t.Helper()
	f, err := os.Open("testdata/make-run.ndjson")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var id string
	var evs []*messages.Event
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var l struct {
			Stream string `json:"stream"`
			Seq    uint64 `json:"seq"`
			Record []byte `json:"record"`
		}
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatal(err)
		}
		ev, err := messages.DecodeEvent(l.Seq, l.Record)
		if err != nil {
			t.Fatal(err)
		}
		id = l.Stream
		evs = append(evs, ev)
	}
	if err := sc.Err(); err != nil || len(evs) == 0 {
		t.Fatalf("read the demo journal: %v (%d events)", err, len(evs))
	}
	return id, evs
}
