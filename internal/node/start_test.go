package node_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/fathom-agents/fathom/internal/node"
	"github.com/fathom-agents/fathom/internal/node/nodetest"
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
	return nodetest.Start(t, cfg)
}
