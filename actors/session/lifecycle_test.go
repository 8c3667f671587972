package session_test

import (
	"bufio"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/fathom-agents/fathom/actors/session"
	"github.com/fathom-agents/fathom/internal/testenv"
	"github.com/fathom-agents/fathom/llm/mock"
	"github.com/fathom-agents/fathom/messages"
)

// lifecycleLines returns the info-level log lines of session id, by message.
func lifecycleLines(logs *testenv.Buffer, id string) map[string]map[string]any {
	out := map[string]map[string]any{}
	sc := bufio.NewScanner(strings.NewReader(logs.String()))
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) != nil || m["session_id"] != id || m["level"] != "INFO" {
			continue
		}
		out[m["msg"].(string)] = m
	}
	return out
}

// TestLifecycleLogLines: a session's lifecycle is logged at info with its session id:
// started, awaiting human (with the request), completed; failed (with the error) for a
// session that fails.
func TestLifecycleLogLines(t *testing.T) {
	t.Run("awaiting human then completed", func(t *testing.T) {
		var logs testenv.Buffer
		h := startHarness(t, harnessOpts{script: humanStepScript(t, ""), log: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))})
		if _, err := h.start("lived", "c1", "print copies"); err != nil {
			t.Fatal(err)
		}
		waitStatus(t, h, "lived", messages.SessionStatus_SESSION_STATUS_AWAITING_HUMAN)
		testenv.Eventually(t, 10*time.Second, func() bool {
			l := lifecycleLines(&logs, "lived")
			return l["session started"] != nil && l["session awaiting human"] != nil
		}, "no started / awaiting human lines for session lived:\n%s", logs.String())
		if aw := lifecycleLines(&logs, "lived")["session awaiting human"]; aw["request_id"] != "ask" || aw["kind"] != "step" {
			t.Fatalf("awaiting human line %v", aw)
		}
		if _, err := h.node.Session("lived").ProvideInput(&messages.ProvideInputRequest{CommandId: "in", StepId: "ask", Input: `{"n":3}`}, call()); err != nil {
			t.Fatal(err)
		}
		mustComplete(t, waitTerminal(t, h.j, "lived", 20*time.Second))
		testenv.Eventually(t, 10*time.Second, func() bool { return lifecycleLines(&logs, "lived")["session completed"] != nil },
			"no session completed line for session lived:\n%s", logs.String())
	})
	t.Run("failed", func(t *testing.T) {
		var logs testenv.Buffer
		script := &mock.Script{Rules: []mock.Rule{
			{SystemMatch: "FATHOM-PHASE: plan", Response: `{"steps":[{"id":"r","type":"research","description":"loop"}]}`},
			{SystemMatch: "FATHOM-ROLE: researcher", ToolCalls: []mock.ToolCallRule{{Name: "lookup", Arguments: `{"key":"x"}`}}},
		}, Default: "done"}
		h := startHarness(t, harnessOpts{script: script, log: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo})),
			cfg: func(c *session.Config) {
				c.SubAgentTools = map[string][]string{"researcher": {"lookup"}}
				c.MaxLLMCalls = 4
			}})
		if _, err := h.start("doomed", "c1", "loop"); err != nil {
			t.Fatal(err)
		}
		evs := waitTerminal(t, h.j, "doomed", 20*time.Second)
		want := evs[len(evs)-1].GetSessionFailed().GetError()
		if want == "" {
			t.Fatalf("the session ended with %s", evs[len(evs)-1].Type())
		}
		testenv.Eventually(t, 10*time.Second, func() bool { return lifecycleLines(&logs, "doomed")["session failed"] != nil },
			"no session failed line for session doomed:\n%s", logs.String())
		if l := lifecycleLines(&logs, "doomed"); l["session failed"]["error"] != want || l["session started"] == nil {
			t.Fatalf("lifecycle lines %v, want the failure %q", l, want)
		}
	})
}
