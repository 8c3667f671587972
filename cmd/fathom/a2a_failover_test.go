package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fathom-agents/fathom/internal/testenv"
)

// a2aFrame is one SSE frame of an A2A stream: its id (the event's seq, 0 for the task)
// and the stream response's status update.
type a2aFrame struct {
	id     uint64
	seq    uint64 // metadata.fathom.seq of a status update
	state  string
	isTask bool
}

// a2aStream opens an A2A SubscribeToTask stream of task id on node url from lastEventID
// and sends its frames to out until the stream ends (closing out); an error when the node
// answers no stream.
func a2aStream(t *testing.T, url, id string, lastEventID uint64, out chan<- a2aFrame) (*http.Response, error) {
	t.Helper()
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"SubscribeToTask","params":{"id":%q}}`, id)
	req, err := http.NewRequest(http.MethodPost, url+"/a2a", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+faultToken)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Last-Event-ID", strconv.FormatUint(lastEventID, 10))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		var b bytes.Buffer
		_, _ = b.ReadFrom(resp.Body)
		resp.Body.Close()
		return nil, fmt.Errorf("SubscribeToTask on %s: %d %s", url, resp.StatusCode, b.String())
	}
	go func() {
		defer close(out)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
		var f a2aFrame
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "id: "):
				f.id, _ = strconv.ParseUint(strings.TrimPrefix(line, "id: "), 10, 64)
			case strings.HasPrefix(line, "data: "):
				var m struct {
					Result struct {
						Task         *json.RawMessage `json:"task"`
						StatusUpdate *struct {
							Status   struct{ State string } `json:"status"`
							Metadata struct {
								Fathom struct{ Seq uint64 } `json:"fathom"`
							} `json:"metadata"`
						} `json:"statusUpdate"`
					} `json:"result"`
				}
				if json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &m) == nil {
					f.isTask = m.Result.Task != nil
					if u := m.Result.StatusUpdate; u != nil {
						f.seq, f.state = u.Metadata.Fathom.Seq, u.Status.State
					}
				}
			case line == "":
				if f.isTask || f.seq > 0 {
					out <- f
				}
				f = a2aFrame{}
			}
		}
	}()
	return resp, nil
}

// TestA2AStreamResumesOnAnotherNodeAfterKill: an A2A client follows a task through node
// A (the session hosted there); A is killed with SIGKILL mid-run; the client subscribes
// again through node B with Last-Event-ID = the last seq it got: B reactivates the
// session and the two streams together carry every event exactly once, up to
// TASK_STATE_COMPLETED.
func TestA2AStreamResumesOnAnotherNodeAfterKill(t *testing.T) {
	testenv.Faults(t)
	c, a, b := fiveStepPair(t, "done {{.Step}}")
	id := c.idOn("a2a-kill", a.member, a.member, b.member)
	c.startOn(a, id, a)

	frames := make(chan a2aFrame, 256)
	resp, err := a2aStream(t, a.url, id, 0, frames)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var seqs []uint64
	deadline := time.After(60 * time.Second)
	for len(seqs) < 6 { // into the steps, well before the end
		select {
		case f, ok := <-frames:
			if !ok {
				t.Fatalf("the stream through A ended early: %v", seqs)
			}
			if f.seq > 0 {
				seqs = append(seqs, f.seq)
				if f.id != f.seq {
					t.Fatalf("frame id %d for event %d", f.id, f.seq)
				}
			}
		case <-deadline:
			t.Fatalf("the stream through A delivered only %v", seqs)
		}
	}
	c.kill(a)
	for f := range frames { // what A flushed before it died
		if f.seq > 0 {
			seqs = append(seqs, f.seq)
		}
	}
	last := seqs[len(seqs)-1]
	if last >= 20 {
		t.Fatalf("the session ran to seq %d before the kill; make its steps slower", last)
	}

	// Through B, from the last event received: B may still route to the dead member until
	// it is gone from B's view (the subscription then answers an error: retry).
	frames2 := make(chan a2aFrame, 256)
	var resp2 *http.Response
	testenv.Eventually(t, 60*time.Second, func() bool {
		resp2, err = a2aStream(t, b.url, id, last, frames2)
		return err == nil
	}, "no stream through B: %v", err)
	defer resp2.Body.Close()
	timeout := time.After(120 * time.Second)
	for done, sawTask := false, false; !done; {
		select {
		case f, ok := <-frames2:
			if !ok {
				t.Fatalf("the stream through B ended before the task completed: %v", seqs)
			}
			if f.isTask {
				sawTask = true
				continue
			}
			if !sawTask {
				t.Fatal("the stream through B did not start with the task")
			}
			seqs = append(seqs, f.seq)
			done = f.state == "TASK_STATE_COMPLETED"
		case <-timeout:
			t.Fatalf("the task did not complete through B: %v", seqs)
		}
	}
	t.Logf("events through A then B: %v (A killed after seq %d)", seqs, last)
	for i, s := range seqs {
		if s != uint64(i+1) {
			t.Fatalf("events across the two streams are not 1..n exactly once: %v", seqs)
		}
	}
	c.finish(id)
}
