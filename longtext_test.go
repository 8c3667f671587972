package fathom_test

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/fathom-agents/fathom"
	"github.com/fathom-agents/fathom/internal/fathomtest"
	"github.com/fathom-agents/fathom/llm/mock"
	"github.com/fathom-agents/fathom/memory"
	"github.com/fathom-agents/fathom/messages"
	"github.com/fathom-agents/fathom/tools"
)

// longTextScript plans one research step; the researcher calls the tool "dump" and, once
// it has the tool's result, completes; the synthesis answers "done".
const longTextScript = `{"rules":[
 {"system_match":"FATHOM-PHASE: synthesize","response":"done"},
 {"system_match":"FATHOM-ROLE: researcher","tool_match":"xxxx","response":"` + "```" + `json\n{\"status\":\"completed\",\"summary\":\"read it\",\"confidence\":0.9}\n` + "```" + `"},
 {"system_match":"FATHOM-ROLE: researcher","tool_calls":[{"name":"dump","arguments":"{}"}]},
 {"system_match":"FATHOM-ROLE: orchestrator","response":"{\"steps\":[{\"id\":\"r\",\"type\":\"research\",\"description\":\"Read the dump\"}]}"}
]}`

// TestSessionsWithTextWithoutSpacesComplete: text without pre-token splits used to cost
// token counting time quadratic in its length (a 65,000-byte goal of one letter held a
// core for over a minute in planning; a tool result of 1 MiB without a space left the
// session at tool_called for minutes). A session with such a goal, whose tool returns
// such a result, plans, runs and completes well within the deadline.
func TestSessionsWithTextWithoutSpacesComplete(t *testing.T) {
	script, err := mock.ParseScript([]byte(longTextScript))
	if err != nil {
		t.Fatal(err)
	}
	cfg := fathomtest.Config(t, fathomtest.Model(t, script))
	cfg.LLM.Model = "gpt-4o-mini"
	cfg.Session.StepRetryDelay = 10 * time.Millisecond
	cfg.Tools = []tools.Tool{tools.MustNew("dump", "Returns a megabyte without a space.", tools.SandboxNone,
		func(context.Context, struct{}) (any, error) { return strings.Repeat("x", 1<<20), nil })}
	cfg.Session.SubAgentTools = map[string][]string{"researcher": {"dump"}}
	// Each count of these texts took minutes; the whole session takes seconds.
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	n := fathomtest.Start(t, cfg)
	goal := strings.Repeat("a", 65000)
	if _, err := n.StartSession(ctx, fathom.SessionRequest{ID: "long-goal", Goal: goal}); err != nil {
		t.Fatal(err)
	}
	sub := n.Follow("long-goal", 0)
	defer sub.Close()
	results := 0
	for {
		u, err := sub.NextUpdate(ctx)
		if err != nil {
			t.Fatalf("follow: %v (tool results so far: %d)", err, results)
		}
		if u.Event.GetToolResult() != nil {
			results++
		}
		if f := u.Event.GetSessionFailed(); f != nil {
			t.Fatalf("session failed: %s", f.GetError())
		}
		if c := u.Event.GetSessionCompleted(); c != nil {
			if results == 0 || c.GetResult() != "done" {
				t.Fatalf("completed with %q after %d tool results", c.GetResult(), results)
			}
			return
		}
	}
}

// TestCancelledSessionStopsCounting: counting a long text for a session stops when the
// session is cancelled. The planner answers 6 MiB of "é1" (four million pre-tokens for the
// regexp pre-tokeniser: seconds of CPU); once the tokenizer is counting it, the test
// cancels the session, and the tokenizer records the count as stopped
// (memory.TokenizerStats). Before, the count of a model's answer ran to its end on a
// shared worker whatever the session.
func TestCancelledSessionStopsCounting(t *testing.T) {
	answer := strings.Repeat("é1", 2<<20)
	script, err := json.Marshal(map[string]any{"rules": []map[string]string{{"system_match": "FATHOM-ROLE: orchestrator", "response": answer}}})
	if err != nil {
		t.Fatal(err)
	}
	sc, err := mock.ParseScript(script)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := memory.TokenizerForModel("gpt-4o-mini", "")
	if err != nil {
		t.Fatal(err)
	}
	cfg := fathomtest.Config(t, fathomtest.Model(t, sc))
	cfg.LLM.Model = "gpt-4o-mini"
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	n := fathomtest.Start(t, cfg)
	// A cancel can reach the grain after a fast count already ended (a loaded CI machine):
	// up to three sessions, each cancelled while a long count is under way; one stopped
	// count proves the point, none in three is the defect.
	const attempts = 3
	for i := 1; i <= attempts; i++ {
		id := fmt.Sprintf("long-answer-%d", i)
		// The tokenizer is the process's: a long count another test's node (or an
		// earlier attempt) left running would pass for this session's below.
		for tok.Stats().Busy != 0 {
			if ctx.Err() != nil {
				t.Fatal("a long count of an earlier test never ended")
			}
			runtime.Gosched()
		}
		before := tok.Stats()
		if _, err := n.StartSession(ctx, fathom.SessionRequest{ID: id, Goal: "Plan it."}); err != nil {
			t.Fatal(err)
		}
		// Wait until a long count is under way (the answer's), then cancel the session.
		for tok.Stats().Busy == 0 {
			if ctx.Err() != nil {
				t.Fatal("the answer was never counted")
			}
			runtime.Gosched()
		}
		if err := n.Cancel(ctx, id, "stop counting"); err != nil {
			t.Fatal(err)
		}
		for tok.Stats().Busy != 0 {
			if ctx.Err() != nil {
				t.Fatal("the count never ended")
			}
			runtime.Gosched()
		}
		st, err := n.State(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if st.GetStatus() != messages.SessionStatus_SESSION_STATUS_CANCELLED {
			t.Fatalf("status %s, want cancelled", st.GetStatus())
		}
		if s := tok.Stats(); s.Stopped > before.Stopped {
			return
		}
		t.Logf("attempt %d: the answer's count ended before the cancel reached it", i)
	}
	t.Fatalf("in %d sessions cancelled while their answer was counted, every count ran to its end", attempts)
}
