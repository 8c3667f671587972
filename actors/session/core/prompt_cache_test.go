package core

import (
	"reflect"
	"strings"
	"testing"

	"github.com/fathom-agents/fathom/llm"
	"github.com/fathom-agents/fathom/tools"
)

// TestStepCallsShareCacheablePrefix: every step call of a session sends the same system
// prompt, and each call's messages but the last are a prefix of the next call's, across
// steps too; the last message is the task prompt naming the current step. So a
// provider's prompt cache (OpenAI's automatic prefix caching, Anthropic's breakpoints)
// serves a call's whole history from the one before.
func TestStepCallsShareCacheablePrefix(t *testing.T) {
	s := planned(t, nil, `{"steps":[{"id":"a","type":"custom","description":"look into part one"},`+
		`{"id":"b","type":"custom","description":"look into part two"}]}`)
	cfg, p := DefaultConfig(), mustPrompts(t)
	var reqs []llm.Request
	var steps []string
	call := func(step string) string {
		t.Helper()
		req, err := BuildRequest(s, p, nil)
		if err != nil {
			t.Fatal(err)
		}
		reqs, steps = append(reqs, req), append(steps, step)
		return s.GetPending().GetCallId()
	}
	for _, step := range []string{"look into part one", "look into part two"} {
		id := call(step)
		fold(t, s, DecideLLMResult(s, &LLMResult{CallID: id, ToolCalls: calls("c-" + id + ":search")}, cfg, t0))
		key := s.GetPendingTools()[0].GetIdempotencyKey()
		fold(t, s, DecideToolResult(s, &ToolResult{Key: key, Res: tools.Result{CallID: "c-" + id, Output: "found " + step}}, cfg, t0))
		id = call(step)
		fold(t, s, DecideLLMResult(s, &LLMResult{CallID: id, Content: "done: " + step}, cfg, t0))
	}
	for i, req := range reqs {
		msgs := req.Messages
		last := msgs[len(msgs)-1]
		if last.Role != "system" || !strings.HasPrefix(last.Content, "Current step: "+steps[i]+"\n") {
			t.Fatalf("call %d: last message %+v, want the task prompt of %q", i, last, steps[i])
		}
		if msgs[0].Role != "system" || msgs[0].Content != reqs[0].Messages[0].Content || strings.Contains(msgs[0].Content, steps[i]) {
			t.Fatalf("call %d: system prompt %q is not the session's stable one %q", i, msgs[0].Content, reqs[0].Messages[0].Content)
		}
		if i == 0 {
			continue
		}
		stable := reqs[i-1].Messages[:len(reqs[i-1].Messages)-1]
		if len(msgs) <= len(stable) || !reflect.DeepEqual(msgs[:len(stable)], stable) {
			t.Fatalf("call %d does not start with call %d's messages before its task prompt:\n%+v\nwant prefix\n%+v", i, i-1, msgs, stable)
		}
	}
}
