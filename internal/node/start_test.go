package node_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/fathom-agents/fathom/internal/node"
)

// startLocalNode starts a node of the local cluster provider named cluster, its model
// API served by model over HTTP, on cfg (a temporary data directory when cfg names
// none), and stops it when the test ends.
func startLocalNode(t *testing.T, model http.Handler, cluster string, cfg node.Config) *node.Node {
	t.Helper()
	llmSrv := httptest.NewServer(model)
	t.Cleanup(llmSrv.Close)
	if cfg.DataDir == "" {
		cfg.DataDir = t.TempDir()
	}
	cfg.LLM.BaseURL, cfg.LLM.APIKey = llmSrv.URL+"/v1", "k"
	cfg.Cluster.Provider, cfg.Cluster.Name = "local", cluster
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	n, err := node.Start(ctx, cfg)
	if err != nil {
		t.Fatalf("start node: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := n.Stop(ctx); err != nil {
			t.Errorf("stop node: %v", err)
		}
	})
	return n
}
