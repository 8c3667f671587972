package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fathom-agents/fathom/auth"
	"github.com/fathom-agents/fathom/gateway/agui"
	"github.com/fathom-agents/fathom/internal/testenv"
)

// aguiFrame is one SSE frame of an AG-UI run: its id (a Position) and its event.
type aguiFrame struct {
	id string
	ev map[string]any
}

// aguiRunBody is the RunAgentInput of run runID on thread with goal text.
func aguiRunBody(thread, runID, text string) string {
	b, _ := json.Marshal(map[string]any{"threadId": thread, "runId": runID, "state": map[string]any{}, "tools": []any{}, "context": []any{},
		"messages": []any{map[string]any{"id": "m-" + runID, "role": "user", "content": text}}})
	return string(b)
}

// aguiStream posts the run body to node url's AG-UI endpoint with Last-Event-ID lastID
// (none when empty) and sends the stream's frames to out until it ends (closing out); an
// error when the node answers no stream.
func aguiStream(t *testing.T, url, body, lastID string, out chan<- aguiFrame) (*http.Response, error) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url+agui.Path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+faultToken)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		var b bytes.Buffer
		_, _ = b.ReadFrom(resp.Body)
		resp.Body.Close()
		return nil, fmt.Errorf("AG-UI run on %s: %d %s", url, resp.StatusCode, b.String())
	}
	go func() {
		defer close(out)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
		var f aguiFrame
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "id: "):
				f.id = strings.TrimPrefix(line, "id: ")
			case strings.HasPrefix(line, "data: "):
				_ = json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &f.ev)
			case line == "":
				if f.ev != nil { // a whole frame (a keepalive comment is none)
					out <- f
				}
				f = aguiFrame{}
			}
		}
	}()
	return resp, nil
}

// TestAGUIRunResumesOnAnotherNodeAfterKill: an AG-UI client follows a run through node
// A (its thread's session hosted there); A is killed with SIGKILL mid-run; the client
// posts the same RunAgentInput to node B with Last-Event-ID = the id of the last event
// it got: B reactivates the session, and the two streams together are the run exactly
// once: the same events as the run replayed from the journal afterwards, each message's
// text whole, ending in RUN_FINISHED with the success outcome.
func TestAGUIRunResumesOnAnotherNodeAfterKill(t *testing.T) {
	testenv.Faults(t)
	c, a, b := fiveStepPair(t, "done {{.Step}}: the journal keeps every word")
	// A thread whose session identity hashing places on A (the static token's tenant).
	var thread, sid string
	for i := 0; i < 1000 && thread == ""; i++ {
		th := fmt.Sprintf("agui-kill-%d", i)
		if s := agui.SessionID(auth.DefaultTenant, th); rendezvousOwner(t, s, a.member, b.member) == a.member {
			thread, sid = th, s
		}
	}
	if thread == "" {
		t.Fatal("no thread's session hashes to A")
	}
	body := aguiRunBody(thread, "run-1", "Count to five")

	frames := make(chan aguiFrame, 256)
	resp, err := aguiStream(t, a.url, body, "", frames)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got []aguiFrame
	steps := 0
	deadline := time.After(60 * time.Second)
	for steps < 2 { // into the second step, well before the end
		select {
		case f, ok := <-frames:
			if !ok {
				t.Fatalf("the stream through A ended early: %v", aguiTypes(got))
			}
			got = append(got, f)
			if len(got) == 1 {
				meta, _ := f.ev["metadata"].(map[string]any)
				fathom, _ := meta["fathom"].(map[string]any)
				if f.ev["type"] != "RUN_STARTED" || fathom["session_id"] != sid {
					t.Fatalf("the run through A starts with %v, want RUN_STARTED of session %s", f.ev, sid)
				}
			}
			if f.ev["type"] == "STEP_STARTED" {
				steps++
			}
		case <-deadline:
			t.Fatalf("the stream through A delivered only %v", aguiTypes(got))
		}
	}
	if owner := leaseOwner(t, c.conn, sid); owner != a.member {
		t.Fatalf("session %s is leased by %q, not by A (%s)", sid, owner, a.member)
	}
	c.kill(a)
	for f := range frames { // what A flushed before it died
		got = append(got, f)
	}
	lastID := got[len(got)-1].id
	for _, f := range got {
		if f.ev["type"] == "RUN_FINISHED" || f.ev["type"] == "RUN_ERROR" {
			t.Fatalf("the run ended before the kill: %v; make its steps slower", aguiTypes(got))
		}
	}
	fromA := len(got)

	// Through B, from the last event received: B may still route to the dead member until
	// it is gone from B's view (the run then answers an error before its stream: retry).
	frames2 := make(chan aguiFrame, 256)
	var resp2 *http.Response
	testenv.Eventually(t, 60*time.Second, func() bool {
		resp2, err = aguiStream(t, b.url, body, lastID, frames2)
		return err == nil
	}, "no stream through B: %v", err)
	defer resp2.Body.Close()
	timeout := time.After(120 * time.Second)
	for done := false; !done; {
		select {
		case f, ok := <-frames2:
			if !ok {
				t.Fatalf("the stream through B ended before the run finished: %v", aguiTypes(got[fromA:]))
			}
			got = append(got, f)
			done = f.ev["type"] == "RUN_FINISHED" || f.ev["type"] == "RUN_ERROR"
		case <-timeout:
			t.Fatalf("the run did not finish through B: %v", aguiTypes(got[fromA:]))
		}
	}
	t.Logf("%d events through A, %d through B (A killed after id %s)", fromA, len(got)-fromA, lastID)
	fin := got[len(got)-1].ev
	if outcome, _ := fin["outcome"].(map[string]any); fin["type"] != "RUN_FINISHED" || outcome["type"] != "success" {
		t.Fatalf("the run ends with %v", fin)
	}

	// The run replayed whole from the journal through B: what the client has is that.
	frames3 := make(chan aguiFrame, 1024)
	resp3, err := aguiStream(t, b.url, body, "", frames3)
	if err != nil {
		t.Fatal(err)
	}
	defer resp3.Body.Close()
	var whole []aguiFrame
	for f := range frames3 {
		whole = append(whole, f)
	}
	if a, w := aguiWithoutContent(got), aguiWithoutContent(whole); !sameJSON(a, w) {
		t.Fatalf("the events through A then B\n%v\nare not the run's\n%v", a, w)
	}
	if a, w := aguiTexts(got), aguiTexts(whole); !sameJSON(a, w) || len(a) == 0 {
		t.Fatalf("the texts through A then B %v, the run's %v", a, w)
	}
	c.finish(sid)
}

func aguiTypes(fs []aguiFrame) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = fmt.Sprint(f.ev["type"])
	}
	return out
}

// aguiWithoutContent is the events but TEXT_MESSAGE_CONTENT (a live stream's deltas cut
// a text differently from a replay's whole one: aguiTexts compares those).
func aguiWithoutContent(fs []aguiFrame) []map[string]any {
	var out []map[string]any
	for _, f := range fs {
		if f.ev["type"] != "TEXT_MESSAGE_CONTENT" {
			out = append(out, f.ev)
		}
	}
	return out
}

// aguiTexts is each message's text, its TEXT_MESSAGE_CONTENT deltas joined.
func aguiTexts(fs []aguiFrame) map[string]string {
	out := map[string]string{}
	for _, f := range fs {
		if f.ev["type"] == "TEXT_MESSAGE_CONTENT" {
			out[fmt.Sprint(f.ev["messageId"])] += fmt.Sprint(f.ev["delta"])
		}
	}
	return out
}

func sameJSON(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}
