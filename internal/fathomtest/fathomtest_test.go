package fathomtest_test

import (
	"context"
	"testing"
	"time"

	"github.com/fathom-agents/fathom"
	"github.com/fathom-agents/fathom/internal/fathomtest"
	"github.com/fathom-agents/fathom/messages"
)

// oneStep plans one step whose answer is the session's result.
const oneStep = `{"rules":[
 {"system_match":"FATHOM-ROLE: orchestrator","response":"{\"steps\":[{\"id\":\"s\",\"type\":\"custom\",\"description\":\"say it\"}]}"},
 {"system_match":"FATHOM-ROLE: executor","response":"said it"}]}`

// TestStartNodeRunsTheScriptedModel: the node StartNode starts runs a session to the end
// on the options' script, and Edit's settings reach it.
func TestStartNodeRunsTheScriptedModel(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	n := fathomtest.StartNode(t, fathomtest.Options{Rules: oneStep, Edit: func(c *fathom.Config) { c.DataDir, c.Journal = "", "memory" }})
	id, err := n.StartSession(ctx, fathom.SessionRequest{Goal: "say something"})
	if err != nil {
		t.Fatal(err)
	}
	if st := fathomtest.WaitStatus(ctx, t, n, id, messages.SessionStatus_SESSION_STATUS_COMPLETED); st.GetResult() != "said it" {
		t.Fatalf("result %q, want the scripted answer", st.GetResult())
	}
}
