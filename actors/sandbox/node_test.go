package sandbox_test

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/cluster"

	"github.com/fathom-agents/fathom/actors/session"
	"github.com/fathom-agents/fathom/internal/node"
	"github.com/fathom-agents/fathom/llm/mock"
	"github.com/fathom-agents/fathom/messages"
)

// TestNodeRunsCodeInLocalSandbox: a node on embedded defaults with Sandbox.Local starts
// a sandbox server itself, and a session's code_execute call really runs there: the
// model asks for print(6*7) and the tool_result event carries 42.
func TestNodeRunsCodeInLocalSandbox(t *testing.T) {
	script := mock.Script{Rules: []mock.Rule{
		{SystemMatch: "FATHOM-ROLE: orchestrator", Response: `{"steps":[{"id":"step-1","type":"custom","description":"compute","dependencies":[]}]}`},
		{SystemMatch: "FATHOM-ROLE: executor", ToolMatch: `42`, Response: "The answer is 42."},
		{SystemMatch: "FATHOM-ROLE: executor", ToolCalls: []mock.ToolCallRule{{Name: "code_execute",
			Arguments: `{"language":"python","code":"print(6*7)"}`}}},
	}, Default: "done"}
	llmSrv := httptest.NewServer(mock.New(mock.Config{Script: script}).Handler())
	defer llmSrv.Close()

	log := slog.New(slog.NewTextHandler(discard{}, nil))
	cfg := node.Config{DataDir: t.TempDir(), Session: session.DefaultConfig(), Logger: log}
	cfg.LLM.BaseURL, cfg.LLM.APIKey = llmSrv.URL+"/v1", "k"
	cfg.Cluster.Provider, cfg.Cluster.Name = "local", "sandbox-e2e"
	cfg.Sandbox.Local = true
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	n, err := node.Start(ctx, cfg)
	if err != nil {
		t.Fatalf("start node: %v", err)
	}
	defer func() {
		sctx, scancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer scancel()
		if err := n.Stop(sctx); err != nil {
			t.Errorf("stop node: %v", err)
		}
	}()
	if n.Sandbox() == nil {
		t.Fatal("the node started no sandbox pool")
	}
	sub := n.Feed().Subscribe("s-code", 0)
	defer sub.Close()
	if _, err := n.Session("s-code").Start(&messages.StartRequest{CommandId: "c1", Goal: "compute 6*7"}, cluster.WithTimeout(30*time.Second)); err != nil {
		t.Fatalf("start session: %v", err)
	}
	var toolResult string
	for {
		ev, err := sub.Next(ctx)
		if err != nil {
			t.Fatalf("events: %v (tool result so far %q)", err, toolResult)
		}
		switch ev.GetPayload().(type) {
		case *messages.Event_ToolResult:
			r := ev.GetToolResult()
			if r.GetError() != nil {
				t.Fatalf("code_execute failed: %v", r.GetError())
			}
			toolResult = r.GetResult()
		case *messages.Event_SessionCompleted:
			if !strings.Contains(toolResult, `"stdout":"42\n"`) || !strings.Contains(toolResult, `"exit_code":0`) {
				t.Fatalf("tool result %q", toolResult)
			}
			return
		case *messages.Event_SessionFailed:
			t.Fatalf("session failed: %s", ev.GetSessionFailed().GetError())
		}
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
