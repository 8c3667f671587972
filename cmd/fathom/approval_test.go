package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fathom-agents/fathom/internal/testenv"
	"github.com/fathom-agents/fathom/llm/mock"
)

// approvalModel is a model whose one step writes an artifact with write_artifact, then
// answers with what the tool returned; env runs fathom against it with a configuration
// file whose approval section lists write_artifact.
func approvalModel(t *testing.T) (env []string, cfgPath string) {
	t.Helper()
	base := startMockLLM(t, scriptJSON(t, mock.Script{Rules: []mock.Rule{
		{SystemMatch: "FATHOM-ROLE: orchestrator", Response: `{"steps":[{"id":"s","type":"custom","description":"save the notes"}]}`},
		{SystemMatch: "FATHOM-ROLE: executor", ToolMatch: ".", Response: "tool said: {{.Tool}}"},
		{SystemMatch: "FATHOM-ROLE: executor", ToolCalls: []mock.ToolCallRule{{Name: "write_artifact", Arguments: `{"type":"research","filename":"notes.md","content":"draft"}`}}},
	}, Default: "done"}))
	cfgPath = filepath.Join(t.TempDir(), "fathom.yaml")
	if err := os.WriteFile(cfgPath, []byte("approval:\n  tools: [write_artifact]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return cleanEnv("OPENAI_BASE_URL="+base, "OPENAI_API_KEY=k", "FATHOM_MODEL=mock-model"), cfgPath
}

// TestApprovalWithRunAndSessionInput: with approval.tools in --config, `fathom run` stops
// (exit 3) at the write_artifact call's approval request without writing anything; a
// bad edit is refused and the request keeps waiting; an edit runs the call once with the
// edited arguments.
func TestApprovalWithRunAndSessionInput(t *testing.T) {
	t.Parallel()
	env, cfgPath := approvalModel(t)
	data := filepath.Join(t.TempDir(), "data")
	r := fathom(t, env, "run", "--config", cfgPath, "--data-dir", data, "--json", "--session-id", "a1", "save notes")
	evs := jsonEvents(t, r.stdout)
	last := evs[len(evs)-1]
	if r.code != 3 || last["type"] != "hitl_requested" || last["kind"] != "approval" || last["tool"] != "write_artifact" ||
		!strings.Contains(last["args"].(string), `"filename":"notes.md"`) || last["call_id"] == "" {
		t.Fatalf("run: exit %d, last event %v\n%s", r.code, last, r.stderr)
	}
	for _, ev := range evs {
		if ev["type"] == "artifact_written" || ev["type"] == "tool_result" {
			t.Fatalf("the call ran before its approval: %v", ev)
		}
	}
	bad := fathom(t, env, "session", "input", "--config", cfgPath, "--data-dir", data, "a1", "s", `{"decision":"edit","args":{"type":"secret","filename":"x.md","content":"c"}}`)
	if bad.code != 1 || !strings.Contains(bad.stderr, "invalid_argument") || !strings.Contains(bad.stderr, "do not match its schema") {
		t.Fatalf("bad edit: exit %d\n%s%s", bad.code, bad.stdout, bad.stderr)
	}
	good := fathom(t, env, "session", "input", "--config", cfgPath, "--data-dir", data, "--json", "a1", "s", `{"decision":"edit","args":{"type":"research","filename":"final.md","content":"approved text"}}`)
	evs = nil
	for _, line := range strings.Split(strings.TrimSpace(good.stdout), "\n") {
		var ev map[string]any
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("session input printed %q: %v\n%s", line, err, good.stderr)
		}
		evs = append(evs, ev)
	}
	var written, results []map[string]any
	var decision any
	for _, ev := range evs {
		switch ev["type"] {
		case "artifact_written":
			written = append(written, ev)
		case "tool_result":
			results = append(results, ev)
		case "hitl_received":
			decision = ev["decision"]
		}
	}
	if good.code != 0 || decision != "edit" || len(written) != 1 || len(results) != 1 || evs[len(evs)-1]["type"] != "session_completed" ||
		!strings.Contains(fmtAny(written[0]), "final.md") {
		t.Fatalf("edit: exit %d, decision %v, artifact_written %v, tool_result %v\n%s", good.code, decision, written, results, good.stderr)
	}
	text := fathom(t, env, "session", "timeline", "--data-dir", data, "a1")
	for _, want := range []string{"? the call of write_artifact in step s waits for approval: write_artifact({", `{"decision":"approve"} | {"decision":"edit","args":{...}}`,
		"then: reject (the call does not run)",
		"answer with: fathom session input --request-id a1/s/tool-1 a1 s JSON", "✓ human decided edit on a1/s/tool-1 (step s)"} {
		if !strings.Contains(text.stdout, want) {
			t.Fatalf("timeline text lacks %q:\n%s", want, text.stdout)
		}
	}
}

// TestApprovalOverTheGateway: `fathom node` with FATHOM_CONFIG holds the call; POST
// /v1/sessions/{id}/input refuses a malformed decision (400) and a reject gives the
// model the message as the call's rejected error.
func TestApprovalOverTheGateway(t *testing.T) {
	t.Parallel()
	env, cfgPath := approvalModel(t)
	const tok = "approval-token"
	p := startNode(t, append(env, "FATHOM_CONFIG="+cfgPath), "--data-dir", t.TempDir(), "--token", tok)
	if code, body := httpJSON(t, "POST", p.url+"/v1/sessions", tok, map[string]any{"goal": "save notes", "session_id": "g1"}); code != 201 {
		t.Fatalf("start: %d %v", code, body)
	}
	var awaiting []any
	testenv.Eventually(t, 20*time.Second, func() bool {
		_, st := httpJSON(t, "GET", p.url+"/v1/sessions/g1", tok, nil)
		state, _ := st["state"].(map[string]any)
		awaiting, _ = state["awaiting"].([]any)
		return state["status"] == "SESSION_STATUS_AWAITING_HUMAN"
	}, "g1 never waited for an approval")
	if req, _ := awaiting[0].(map[string]any); len(awaiting) != 1 || req["kind"] != "approval" || req["tool"] != "write_artifact" {
		t.Fatalf("awaiting %v", awaiting)
	}
	code, body := httpJSON(t, "POST", p.url+"/v1/sessions/g1/input", tok, map[string]any{"step_id": "s", "input": map[string]any{"decision": "later"}})
	if code != 400 || !strings.Contains(fmtAny(body), "is not one of") {
		t.Fatalf("malformed decision: %d %v", code, body)
	}
	code, body = httpJSON(t, "POST", p.url+"/v1/sessions/g1/input", tok, map[string]any{"step_id": "s", "input": map[string]any{"decision": "reject", "message": "no writes today"}})
	if code != 200 {
		t.Fatalf("reject: %d %v", code, body)
	}
	var result any
	testenv.Eventually(t, 20*time.Second, func() bool {
		_, st := httpJSON(t, "GET", p.url+"/v1/sessions/g1", tok, nil)
		state, _ := st["state"].(map[string]any)
		result = state["result"]
		return state["status"] == "SESSION_STATUS_COMPLETED"
	}, "g1 never completed after the reject")
	if res, _ := result.(string); !strings.HasPrefix(res, "tool said: Tool `write_artifact` failed.") || !strings.Contains(res, "Error type: rejected\nMessage: no writes today") {
		t.Fatalf("result %v: the model must read the reject message as the tool's rejected error", result)
	}
	p.stop(t)
}

func fmtAny(v any) string { return fmt.Sprint(v) }
