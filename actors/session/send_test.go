package session_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/cluster"
	"google.golang.org/protobuf/proto"

	"github.com/fathom-agents/fathom/actors/session/replay"
	"github.com/fathom-agents/fathom/internal/testenv"
	"github.com/fathom-agents/fathom/llm/mock"
	"github.com/fathom-agents/fathom/messages"
)

// TestSendRPCRunsAFollowUpTurn drives the grain's Send RPC: turn 1 runs a step that calls
// a tool; the follow-up's answer is a plan whose step calls the same tool again. The new
// step's id is prefixed (t2-s), so its idempotency key differs and the tool really runs
// again; the turn ends in session_completed. A retried command is a duplicate; the
// journal folds to the grain's state (thread included), and a send to a running session
// is refused with FAILED_PRECONDITION (turn 1's step call takes the model 1.5 s, so the
// session is still running when that send arrives, however loaded the machine).
func TestSendRPCRunsAFollowUpTurn(t *testing.T) {
	s, err := mock.ParseScript([]byte(`{"rules":[
		{"system_match":"FATHOM-FOLLOW-UP","context_match":"the answer is: value of k1","response":"{\"steps\":[{\"id\":\"s\",\"type\":\"custom\",\"description\":\"find it again\"}]}"},
		` + oneStepPlan + `,
		{"tool_match":"value of","response":"the answer is: {{.Tool}}"},
		{"match":"Step: find it again","tool_calls":[{"name":"lookup","arguments":"{\"key\":\"k1\"}"}]},
		{"match":"Step: find it","delay_ms":1500,"tool_calls":[{"name":"lookup","arguments":"{\"key\":\"k1\"}"}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	ex := &executions{}
	h := startHarness(t, harnessOpts{tools: testToolsWith(t, ex, nil), script: &s})
	if _, err := h.start("s1", "c1", "goal"); err != nil {
		t.Fatal(err)
	}
	send := func(cmd, content string) (*messages.CommandResponse, error) {
		return h.node.Session("s1").Send(&messages.SendRequest{CommandId: cmd, Content: content}, cluster.WithTimeout(10*time.Second))
	}
	if _, err := send("early", "hello"); err == nil || !strings.Contains(err.Error(), "send when it has completed") {
		t.Fatalf("send to a running session: %v", err)
	}
	mustComplete(t, waitTerminal(t, h.j, "s1", 20*time.Second))
	resp, err := send("m1", "once more, please")
	if err != nil || resp.GetDuplicate() {
		t.Fatalf("send: %v %v", resp, err)
	}
	var evs []*messages.Event
	testenv.Eventually(t, 20*time.Second, func() bool {
		evs = storedEvents(t, h.j, "s1")
		return count(evs, "session_completed") == 2 || count(evs, "session_failed") > 0
	}, "the follow-up turn never ended")
	mustComplete(t, evs)
	if m := ofType(evs, "message_received"); len(m) != 1 || m[0].GetMessageReceived().GetContent() != "once more, please" || m[0].GetMessageReceived().GetTokens() == 0 {
		t.Fatalf("message_received %v", m)
	}
	if ex.get("s1/s/tool-1") != 1 || ex.get("s1/t2-s/tool-1") != 1 {
		t.Fatalf("tool executions: turn 1 %d, turn 2 %d", ex.get("s1/s/tool-1"), ex.get("s1/t2-s/tool-1"))
	}
	again, err := send("m1", "once more, please")
	if err != nil || !again.GetDuplicate() || again.GetSeq() != resp.GetSeq() {
		t.Fatalf("retried send: %v %v", again, err)
	}
	if n := len(storedEvents(t, h.j, "s1")); n != len(evs) {
		t.Fatalf("the retried send stored %d events", n-len(evs))
	}
	st, err := h.state("s1")
	if err != nil {
		t.Fatal(err)
	}
	folded, _, err := replay.Load(context.Background(), h.j, "s1", 0)
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(folded, st.GetState()) {
		t.Fatalf("the journal folds to another state than the grain's")
	}
	var thread []string
	for _, e := range folded.GetThread() {
		thread = append(thread, e.GetRole()+":"+e.GetContent())
	}
	joined := strings.Join(thread, "|")
	if folded.GetTurn() != 2 || !strings.Contains(joined, "assistant:the answer is: value of k1") || !strings.HasSuffix(joined, "user:once more, please") {
		t.Fatalf("turn %d, thread %s", folded.GetTurn(), joined)
	}
}
