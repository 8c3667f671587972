package sandbox_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/cluster"

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
	// A sleep no other process on the machine runs.
	secs := fmt.Sprintf("%d.%03d", 900+rand.IntN(99), rand.IntN(1000))
	script := mock.Script{Rules: []mock.Rule{
		{SystemMatch: "FATHOM-ROLE: orchestrator", Response: `{"steps":[{"id":"step-1","type":"custom","description":"wait","dependencies":[]}]}`},
		{SystemMatch: "FATHOM-ROLE: executor", ToolCalls: []mock.ToolCallRule{{Name: "code_execute",
			Arguments: `{"language":"shell","code":"exec sleep ` + secs + `"}`}}},
	}, Default: "done"}
	n := startSandboxNode(t, script, "sandbox-cancel", nil)
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
