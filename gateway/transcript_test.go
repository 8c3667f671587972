package gateway_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fathom-agents/fathom/internal/testenv"
	"github.com/fathom-agents/fathom/llm/mock"
)

// longReport is a markdown answer over the transcript's cut (4 KiB).
var longReport = "# Long report\n\n" + strings.Repeat("All work and no play makes a long report. ", 150) + "THE END"

// transcriptScript plans one custom step for goals about a long report, answered with
// longReport; other goals get the demo model's delegated plan (sub-agents, tool calls).
func transcriptScript(t *testing.T) *mock.Script {
	t.Helper()
	s, err := mock.ParseScript([]byte(fmt.Sprintf(`{"rules":[
		{"system_match":"FATHOM-ROLE: orchestrator","context_match":"a long report","response":"{\"steps\":[{\"id\":\"write\",\"type\":\"custom\",\"description\":\"write it\"}]}"},
		{"system_match":"FATHOM-ROLE: executor","context_match":"a long report","response":%q}]}`, longReport)))
	if err != nil {
		t.Fatal(err)
	}
	demo := mock.DemoScript()
	s.Rules, s.Default = append(s.Rules, demo.Rules...), demo.Default
	return &s
}

func awaitCompleted(t *testing.T, g *gw, id string) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, func() bool {
		_, st := call(t, g.srv, "GET", "/v1/sessions/"+id, token, nil)
		s, _ := st["state"].(map[string]any)
		return s["status"] == "SESSION_STATUS_COMPLETED"
	}, "session %s did not complete", id)
}

// TestTranscriptRoute: GET /v1/sessions/{id}/transcript reads a delegated session as a
// conversation per agent with its final result, a read token may read it, seq=N shows
// it as the journal held it then, and a cut value's "full" path serves the whole value.
func TestTranscriptRoute(t *testing.T) {
	g := startGW(t, gwOpts{script: transcriptScript(t)})
	for _, s := range []string{`{"goal":"Research the actor model","session_id":"tr-demo"}`, `{"goal":"Write a long report","session_id":"tr-long"}`} {
		if code, body := call(t, g.srv, "POST", "/v1/sessions", token, []byte(s)); code != 201 {
			t.Fatalf("start: %d %v", code, body)
		}
	}
	awaitCompleted(t, g, "tr-demo")
	awaitCompleted(t, g, "tr-long")
	head := len(g.journal("tr-demo"))

	code, tr := call(t, g.srv, "GET", "/v1/sessions/tr-demo/transcript", readToken, nil)
	if code != 200 || tr["status"] != "completed" || tr["goal"] != "Research the actor model" || tr["seq"] != float64(head) {
		t.Fatalf("transcript: %d status %v goal %v seq %v (head %d)", code, tr["status"], tr["goal"], tr["seq"], head)
	}
	result, _ := tr["result"].(map[string]any)
	if result == nil || result["text"] == "" || result["html"] == "" {
		t.Fatalf("no final result: %v", tr["result"])
	}
	agents, _ := tr["agents"].([]any)
	if len(agents) < 2 || agents[0].(map[string]any)["id"] != "orchestrator" {
		t.Fatalf("lanes: %v", agents)
	}
	tools, handoffs := 0, 0
	for _, a := range agents[1:] {
		for _, e := range a.(map[string]any)["entries"].([]any) {
			switch e := e.(map[string]any); e["kind"] {
			case "tool":
				if e["tool"] == "" || e["args"] == nil || (e["result"] == nil && e["error"] == nil) {
					t.Errorf("tool entry without its call or outcome: %v", e)
				}
				tools++
			case "handoff":
				handoffs++
			}
		}
	}
	if tools == 0 || handoffs == 0 {
		t.Fatalf("sub-agent lanes hold %d tool calls and %d hand-offs", tools, handoffs)
	}

	// Time travel: at seq 3 nothing later is there.
	code, past := call(t, g.srv, "GET", "/v1/sessions/tr-demo/transcript?seq=3", token, nil)
	if code != 200 || past["seq"] != float64(3) || past["status"] != "running" || past["result"] != nil {
		t.Fatalf("transcript at seq 3: %d seq %v status %v result %v", code, past["seq"], past["status"], past["result"])
	}
	for _, a := range past["agents"].([]any) {
		for _, e := range a.(map[string]any)["entries"].([]any) {
			if s := e.(map[string]any)["seq"].(float64); s > 3 {
				t.Errorf("an entry from seq %v in the transcript at seq 3", s)
			}
		}
	}

	// A result over the cut: its head, and the path of the whole.
	_, long := call(t, g.srv, "GET", "/v1/sessions/tr-long/transcript", token, nil)
	res, _ := long["result"].(map[string]any)
	if res == nil || res["cut"] != true || res["bytes"] != float64(len(longReport)) || strings.Contains(res["text"].(string), "THE END") {
		t.Fatalf("long result: %v", res)
	}
	full, _ := res["full"].(string)
	code, whole := call(t, g.srv, "GET", full, readToken, nil)
	if code != 200 || whole["text"] != longReport || whole["cut"] != nil || !strings.Contains(whole["html"].(string), "<h1") {
		t.Fatalf("GET %s: %d %v", full, code, whole)
	}

	// One event, whole.
	code, ev := call(t, g.srv, "GET", "/v1/sessions/tr-demo/events/1", token, nil)
	if code != 200 || ev["type"] != "session_started" || ev["seq"] != float64(1) || ev["goal"] != "Research the actor model" || ev["op"] != nil {
		t.Fatalf("event 1: %d %v", code, ev)
	}
	for _, c := range []struct {
		path string
		code int
		err  string
	}{
		{"/v1/sessions/nope/transcript", 404, "not_found"},
		{"/v1/sessions/nope/events/1", 404, "not_found"},
		{fmt.Sprintf("/v1/sessions/tr-demo/events/%d", head+1), 404, "not_found"},
		{"/v1/sessions/tr-demo/events/0", 400, "invalid_argument"},
		{"/v1/sessions/tr-demo/events/1?field=plan", 400, "invalid_argument"},
		{"/v1/sessions/tr-demo/transcript?seq=x", 400, "invalid_argument"},
		{fmt.Sprintf("/v1/sessions/tr-demo/transcript?seq=%d", head+1), 409, "failed_precondition"},
		{fmt.Sprintf("/v1/sessions/tr-demo/gantt?seq=%d", head+1), 409, "failed_precondition"},
		{"/v1/sessions/nope/gantt", 404, "not_found"},
	} {
		if code, body := call(t, g.srv, "GET", c.path, token, nil); code != c.code || errCode(body) != c.err {
			t.Errorf("GET %s: %d %v, want %d %s", c.path, code, body, c.code, c.err)
		}
	}
	if code, _ := call(t, g.srv, "GET", "/v1/sessions/tr-demo/transcript", "", nil); code != 401 {
		t.Errorf("transcript without a token: %d", code)
	}
}
