//go:build !race

package fathom_test

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/fathom-agents/fathom"
	"github.com/fathom-agents/fathom/gateway"
	"github.com/fathom-agents/fathom/gateway/a2a"
	"github.com/fathom-agents/fathom/internal/fathomtest"
	"github.com/fathom-agents/fathom/llm/mock"
)

// TestA2AAgentDelegatesAcrossNodes: a remote A2A agent (here another Fathom node's A2A
// server, behind its token) is an agent of the node's own: the planner's step of its type
// is sent to it as a task, and the remote result is the step's hand-off, which reaches the
// synthesis.
//
// Two nodes live in this process: Proto.Actor's remoting races on gRPC's global logger
// under -race, so the test runs in make test's pass without it (its name says AcrossNodes).
func TestA2AAgentDelegatesAcrossNodes(t *testing.T) {
	script, err := mock.ParseScript([]byte(`{"rules":[
 {"system_match":"FATHOM-ROLE: orchestrator","response":"{\"steps\":[{\"id\":\"check\",\"type\":\"custom\",\"description\":\"check the ledger\"}]}"},
 {"system_match":"FATHOM-ROLE: executor","response":"totals match the ledger (remote)"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	model := httptest.NewServer(mock.New(mock.Config{Script: script}).Handler())
	defer model.Close()
	cfg := fathom.DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.LLM = fathom.LLM{BaseURL: model.URL + "/v1", APIKey: "k", Model: "mock-model"}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	remote := fathomtest.Start(t, cfg)
	srv := fathomtest.Serve(t, remote, gateway.Config{Token: "remote-token"})

	client := &a2a.Client{URL: srv.URL, Token: "remote-token"}
	completed, result := runAuditor(t, "audit-a2a", nil, func(c *fathom.Config) {
		c.Agents = []fathom.Agent{fathom.A2AAgent("auditor", "Audits totals", client)}
	})
	if result != "audited" {
		t.Fatalf("result %q: the remote agent's hand-off did not reach the synthesis", result)
	}
	if len(completed) != 1 || completed[0].GetResult().GetStatus() != "completed" ||
		!strings.Contains(completed[0].GetResult().GetSummary(), "totals match the ledger (remote)") {
		t.Fatalf("the auditor's runs: %v", completed)
	}
	// A wrong token: the remote refuses, and the step's run fails naming it.
	bad := &a2a.Client{URL: srv.URL, Token: "wrong"}
	if _, err := bad.Handoff(ctx, "", "anything"); err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("a wrong token: %v", err)
	}
}
