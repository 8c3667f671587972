package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fathom-agents/fathom/actors/session/core"
	"github.com/fathom-agents/fathom/internal/testenv"
	"github.com/fathom-agents/fathom/messages"
	"github.com/fathom-agents/fathom/persistence"
	"github.com/fathom-agents/fathom/persistence/journaltest"
)

// getGantt reads GET path as a core.Gantt.
func getGantt(t *testing.T, g *gw, path string) (int, core.Gantt, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", g.srv.URL+path, nil)
	req.Header.Set("Authorization", "Bearer "+readToken)
	resp, err := g.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out core.Gantt
	if resp.StatusCode == 200 {
		if err := json.Unmarshal(raw, &out); err != nil {
			t.Fatalf("GET %s: %v in %s", path, err, raw)
		}
	}
	return resp.StatusCode, out, string(raw)
}

// TestGanttRoute: GET /v1/sessions/{id}/gantt of a completed demo session has a bar
// per step whose start and end are its step_started and step_completed events' times,
// the plan's graph (a node per step, its dependencies), and per-step cost that adds up
// to the session's; ?seq=N has nothing recorded after N; the WebSocket op answers the
// same; an unknown session and a seq past the end are refused.
func TestGanttRoute(t *testing.T) {
	g := startGW(t, gwOpts{})
	if code, body := call(t, g.srv, "POST", "/v1/sessions", token, []byte(`{"goal":"Write a haiku","session_id":"gantt-1"}`)); code != 201 {
		t.Fatalf("start: %d %v", code, body)
	}
	testenv.Eventually(t, 60*time.Second, func() bool {
		_, body := getJSON(t, g.srv.URL+"/v1/sessions/gantt-1", token)
		st, _ := body["state"].(map[string]any)
		return st["status"] == "SESSION_STATUS_COMPLETED"
	}, "gantt-1 never completed")
	var evs []*messages.Event
	err := g.n.Journal().Load(context.Background(), "gantt-1", 0, func(r persistence.Record) error {
		ev, err := messages.DecodeEvent(r.Seq, r.Data)
		evs = append(evs, ev)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	started, ended := map[string]int64{}, map[string]int64{}
	var firstEnd uint64
	for _, ev := range evs {
		switch p := ev.GetPayload().(type) {
		case *messages.Event_StepStarted:
			started[p.StepStarted.GetStepId()] = ev.GetAtUnixNano()
		case *messages.Event_StepCompleted:
			ended[p.StepCompleted.GetStepId()] = ev.GetAtUnixNano()
			if firstEnd == 0 {
				firstEnd = ev.GetSeq()
			}
		}
	}

	code, gt, raw := getGantt(t, g, "/v1/sessions/gantt-1/gantt")
	if code != 200 || gt.Seq != uint64(len(evs)) || gt.Status != "completed" {
		t.Fatalf("gantt: %d %s", code, raw)
	}
	bars := 0
	for _, s := range gt.Spans {
		if s.Kind != core.SpanStep {
			continue
		}
		bars++
		if s.StartUnixNano != started[s.StepID] || s.EndUnixNano != ended[s.StepID] || s.Status != "completed" {
			t.Errorf("step %s's bar %d..%d (%s), journal %d..%d", s.StepID, s.StartUnixNano, s.EndUnixNano, s.Status, started[s.StepID], ended[s.StepID])
		}
	}
	if bars != len(started) || bars != 4 {
		t.Fatalf("%d step bars for %d steps", bars, len(started))
	}
	if len(gt.Plans) != 1 || len(gt.Plans[0].Steps) != 4 {
		t.Fatalf("plans %+v", gt.Plans)
	}
	var edges []string
	for _, n := range gt.Plans[0].Steps {
		for _, d := range n.Dependencies {
			edges = append(edges, d+">"+n.ID)
		}
	}
	if strings.Join(edges, " ") != "s1>s2 s1>s3 s2>s4 s3>s4" {
		t.Fatalf("edges %v", edges)
	}
	var stepCalls uint32
	for _, s := range gt.Steps {
		stepCalls += s.LLMCalls
	}
	if stepCalls == 0 || stepCalls >= gt.Total.LLMCalls || gt.Total.TotalTokens == 0 {
		t.Fatalf("steps' calls %d, total %+v", stepCalls, gt.Total)
	}

	// At the first step's end: nothing recorded later, and that step's graph node completed.
	code, past, raw := getGantt(t, g, fmt.Sprintf("/v1/sessions/gantt-1/gantt?seq=%d", firstEnd))
	if code != 200 || past.Seq != firstEnd || past.Status != "executing" {
		t.Fatalf("gantt at seq %d: %d %s", firstEnd, code, raw)
	}
	for _, s := range past.Spans {
		if s.StartSeq > firstEnd || s.EndSeq > firstEnd {
			t.Fatalf("at seq %d, a bar from later: %+v", firstEnd, s)
		}
	}
	if st := past.Plans[0].Steps; st[0].Status != "completed" || st[3].Status != "pending" {
		t.Fatalf("graph at seq %d: %+v", firstEnd, st)
	}

	c := g.mustDial(readToken)
	c.send(map[string]any{"op": "gantt", "id": 1, "session_id": "gantt-1", "seq": firstEnd})
	if f := c.next("ack", 10*time.Second); f["result"].(map[string]any)["seq"] != float64(firstEnd) {
		t.Fatalf("ws gantt: %v", f)
	}
	for path, want := range map[string]int{
		"/v1/sessions/nope-1/gantt":                                  404,
		"/v1/sessions/gantt-1/gantt?seq=0":                           400,
		"/v1/sessions/gantt-1/gantt?seq=x":                           400,
		fmt.Sprintf("/v1/sessions/gantt-1/gantt?seq=%d", len(evs)+1): 409,
	} {
		if code, _, raw := getGantt(t, g, path); code != want {
			t.Errorf("GET %s = %d %s, want %d", path, code, raw, want)
		}
	}
}

// TestGanttMarksRestarts: a restart of a session's grain (its first journal append
// panics; the supervisor restarts it and the start is sent again) is a restart mark on
// the session's Gantt, on its time axis.
func TestGanttMarksRestarts(t *testing.T) {
	var cj *journaltest.Faulty
	g := startGW(t, gwOpts{journal: crashOnce(&cj)})
	cj.PanicNextAppend()
	start := []byte(`{"goal":"Write a haiku","session_id":"gantt-crash","command_id":"c1"}`)
	if code, body := call(t, g.srv, "POST", "/v1/sessions", token, start); code < 500 {
		t.Fatalf("start with a crashing journal: %d %v", code, body)
	}
	testenv.Eventually(t, 30*time.Second, func() bool {
		code, _ := call(t, g.srv, "POST", "/v1/sessions", token, start)
		return code == 201
	}, "the start after the restart was refused")
	testenv.Eventually(t, 60*time.Second, func() bool {
		evs := g.journal("gantt-crash")
		return len(evs) > 0 && evs[len(evs)-1]["type"] == "session_completed"
	}, "gantt-crash did not complete")
	code, gt, raw := getGantt(t, g, "/v1/sessions/gantt-crash/gantt")
	if code != 200 {
		t.Fatalf("gantt: %d %s", code, raw)
	}
	var restarts []core.Mark
	for _, m := range gt.Marks {
		if m.Kind == core.MarkRestart {
			restarts = append(restarts, m)
		}
	}
	if len(restarts) != 1 || restarts[0].UnixNano > gt.EndUnixNano || !strings.Contains(restarts[0].Label, "restart") {
		t.Fatalf("restart marks %+v on the axis %d..%d", restarts, gt.StartUnixNano, gt.EndUnixNano)
	}
}
