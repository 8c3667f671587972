package sandbox_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/cluster"

	"github.com/fathom-agents/fathom/actors/session"
	"github.com/fathom-agents/fathom/internal/node"
	"github.com/fathom-agents/fathom/internal/sandboxd"
	"github.com/fathom-agents/fathom/internal/testenv"
	"github.com/fathom-agents/fathom/llm/mock"
	"github.com/fathom-agents/fathom/messages"
)

// processesRunning counts the host's processes whose command line is args (NUL-joined).
func processesRunning(args ...string) int {
	want := []byte(args[0])
	for _, a := range args[1:] {
		want = append(append(want, 0), a...)
	}
	paths, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	n := 0
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err == nil && bytes.Equal(bytes.TrimRight(b, "\x00"), want) {
			n++
		}
	}
	return n
}

// TestCancelStopsTheSandboxExecution: cancelling a session whose code_execute call runs
// in the node's local sandbox (bubblewrap) kills the sandboxed program at once (the FSP
// cancel), long before the execution's 30 s time limit.
func TestCancelStopsTheSandboxExecution(t *testing.T) {
	iso := sandboxd.IsolationBwrap
	if _, err := exec.LookPath("bwrap"); err != nil {
		if os.Getenv("FATHOM_TEST_REQUIRE_SERVICES") != "" {
			t.Fatalf("bubblewrap is required (FATHOM_TEST_REQUIRE_SERVICES) but not installed: %v", err)
		}
		iso = sandboxd.IsolationAuto
	}
	// A sleep no other process on the machine runs.
	secs := fmt.Sprintf("%d.%03d", 900+rand.IntN(99), rand.IntN(1000))
	script := mock.Script{Rules: []mock.Rule{
		{SystemMatch: "FATHOM-ROLE: orchestrator", Response: `{"steps":[{"id":"step-1","type":"custom","description":"wait","dependencies":[]}]}`},
		{SystemMatch: "FATHOM-ROLE: executor", ToolCalls: []mock.ToolCallRule{{Name: "code_execute",
			Arguments: `{"language":"shell","code":"exec sleep ` + secs + `"}`}}},
	}, Default: "done"}
	llmSrv := httptest.NewServer(mock.New(mock.Config{Script: script}).Handler())
	defer llmSrv.Close()
	cfg := node.Config{DataDir: t.TempDir(), Session: session.DefaultConfig(), Logger: slog.New(slog.NewTextHandler(discard{}, nil))}
	cfg.LLM.BaseURL, cfg.LLM.APIKey = llmSrv.URL+"/v1", "k"
	cfg.Cluster.Provider, cfg.Cluster.Name = "local", "sandbox-cancel"
	cfg.Sandbox.Local, cfg.Sandbox.LocalIsolation = true, iso
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
	if _, err := n.Session("s-cancel").Start(&messages.StartRequest{CommandId: "c1", Goal: "wait"}, cluster.WithTimeout(30*time.Second)); err != nil {
		t.Fatalf("start session: %v", err)
	}
	testenv.Eventually(t, 30*time.Second, func() bool { return processesRunning("sleep", secs) == 1 },
		"the sandboxed sleep %s never started", secs)
	began := time.Now()
	if _, err := n.Session("s-cancel").Cancel(&messages.CancelRequest{CommandId: "c2", Reason: "stop", By: "test"}, cluster.WithTimeout(10*time.Second)); err != nil {
		t.Fatalf("cancel: %v", err)
	}
	testenv.Eventually(t, 10*time.Second, func() bool { return processesRunning("sleep", secs) == 0 },
		"the sandboxed sleep %s still runs after the session was cancelled", secs)
	t.Logf("the sandboxed program stopped %v after the cancel", time.Since(began).Round(time.Millisecond))
}
