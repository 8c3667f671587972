package sandbox_test

import (
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"os/exec"
	"testing"

	"github.com/fathom-agents/fathom/actors/session"
	"github.com/fathom-agents/fathom/internal/node"
	"github.com/fathom-agents/fathom/internal/node/nodetest"
	"github.com/fathom-agents/fathom/internal/sandboxd"
	"github.com/fathom-agents/fathom/llm/mock"
)

// startSandboxNode starts a node of the local cluster provider named cluster whose
// sessions run code in the node's local sandbox: under bubblewrap, or the best
// isolation there is when bubblewrap is not installed (a failure instead when
// FATHOM_TEST_REQUIRE_SERVICES is set). Its model is the mock with script. edit, when
// not nil, changes the config before the start. The node stops when the test ends.
func startSandboxNode(t *testing.T, script mock.Script, cluster string, edit func(*node.Config)) *node.Node {
	t.Helper()
	iso := sandboxd.IsolationBwrap
	if _, err := exec.LookPath("bwrap"); err != nil {
		if os.Getenv("FATHOM_TEST_REQUIRE_SERVICES") != "" {
			t.Fatalf("bubblewrap is required (FATHOM_TEST_REQUIRE_SERVICES) but not installed: %v", err)
		}
		iso = sandboxd.IsolationAuto
	}
	llmSrv := httptest.NewServer(mock.New(mock.Config{Script: script}).Handler())
	t.Cleanup(llmSrv.Close)
	cfg := node.Config{DataDir: t.TempDir(), Session: session.DefaultConfig(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	cfg.LLM.BaseURL, cfg.LLM.APIKey = llmSrv.URL+"/v1", "k"
	cfg.Cluster.Provider, cfg.Cluster.Name = "local", cluster
	cfg.Sandbox.Local, cfg.Sandbox.LocalIsolation = true, iso
	if edit != nil {
		edit(&cfg)
	}
	return nodetest.Start(t, cfg)
}
