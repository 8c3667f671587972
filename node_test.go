package fathom_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/fathom-agents/fathom"
	"github.com/fathom-agents/fathom/gateway"
	"github.com/fathom-agents/fathom/gateway/mcpserver"
	"github.com/fathom-agents/fathom/internal/fathomtest"
)

// TestValidateNodeSettings: the settings the binary's flags set are checked by Validate,
// as an *Error with Op "config".
func TestValidateNodeSettings(t *testing.T) {
	for _, c := range []struct {
		name string
		edit func(*fathom.Config)
		want string
	}{
		{"unknown cluster provider", func(c *fathom.Config) { c.Cluster.Provider = "zookeeper" }, `unknown provider "zookeeper"`},
		{"unknown vector store", func(c *fathom.Config) { c.Memory.VectorStore = "faiss" }, `unknown vector store "faiss"`},
		{"pgvector without PostgreSQL", func(c *fathom.Config) { c.Memory.VectorStore = fathom.VectorStorePgvector }, "needs PostgreSQL"},
		{"unknown exporter", func(c *fathom.Config) { c.Telemetry.Exporter = "bogus" }, `unknown exporter "bogus"`},
		{"negative retention", func(c *fathom.Config) { c.Retention = -time.Hour }, "retention -1h0m0s is negative"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := fathom.DefaultConfig()
			c.edit(&cfg)
			err := cfg.Validate()
			var fe *fathom.Error
			if !errors.As(err, &fe) || fe.Op != "config" || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Validate() = %v, want a config error saying %q", err, c.want)
			}
		})
	}
}

// TestNodeServesGatewayAndMetrics: what fathom node uses of a Node: the gateway on the
// node's sessions (a session started through the Go API is read through it), the metrics
// listener's address, the cluster address and readiness, the MCP server at /mcp, the
// AG-UI endpoint at /v1/agui.
func TestNodeServesGatewayAndMetrics(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := fathom.DefaultConfig()
	cfg.DataDir, cfg.MetricsListen = t.TempDir(), "127.0.0.1:0"
	n := fathomtest.Start(t, cfg)
	if !n.UsesDemoModel() || n.Address() == "" || n.MetricsAddr() == "" {
		t.Fatalf("demo %v, address %q, metrics address %q", n.UsesDemoModel(), n.Address(), n.MetricsAddr())
	}
	if err := n.Ready(ctx); err != nil {
		t.Fatalf("ready: %v", err)
	}
	get := func(url string) (int, string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	if code, body := get("http://" + n.MetricsAddr() + "/metrics"); code != http.StatusOK || !strings.Contains(body, "# TYPE") {
		t.Fatalf("GET /metrics: %d %.200s", code, body)
	}
	srv := fathomtest.Serve(t, n, gateway.Config{})
	if code, body := get(srv.URL + "/readyz"); code != http.StatusOK {
		t.Fatalf("GET /readyz: %d %s", code, body)
	}
	// The MCP server of the node's agents is mounted at /mcp.
	mc, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).
		Connect(ctx, &mcp.StreamableClientTransport{Endpoint: srv.URL + mcpserver.Path}, nil)
	if err != nil {
		t.Fatalf("connect to /mcp: %v", err)
	}
	tools, err := mc.ListTools(ctx, nil)
	_ = mc.Close()
	if err != nil || len(tools.Tools) < 5 || tools.Tools[0].Name == "" {
		t.Fatalf("the tools of /mcp: %v %v", tools, err)
	}
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
	}
	if !slices.Contains(names, mcpserver.RunAgentTool) || !slices.Contains(names, "researcher") {
		t.Fatalf("the tools of /mcp: %v", names)
	}
	res, err := http.Post(srv.URL+"/v1/agui", "application/json", strings.NewReader(`{"runId":"r","messages":[]}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), "threadId is required") {
		t.Fatalf("POST /v1/agui (the AG-UI endpoint) on the node's gateway: %d %s", res.StatusCode, b)
	}
	id, err := n.StartSession(ctx, fathom.SessionRequest{ID: "gw-1", Goal: "Explain event sourcing in one sentence"})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(90 * time.Second)
	for {
		code, body := get(srv.URL + "/v1/sessions/" + id)
		if code == http.StatusOK && strings.Contains(body, "SESSION_STATUS_COMPLETED") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the gateway never showed %s completed: %d %.300s", id, code, body)
		}
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
	// The A2A server is mounted: the agent card names the node's agents as skills, and
	// the session is a task of the JSON-RPC binding.
	if code, body := get(srv.URL + "/.well-known/agent-card.json"); code != http.StatusOK || !strings.Contains(body, `"id":"researcher"`) ||
		!strings.Contains(body, `"url":"`+srv.URL+`/a2a"`) {
		t.Fatalf("GET the agent card: %d %.400s", code, body)
	}
	rpc := `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"` + id + `"}}`
	ares, err := http.Post(srv.URL+"/a2a", "application/json", strings.NewReader(rpc))
	if err != nil {
		t.Fatal(err)
	}
	defer ares.Body.Close()
	if b, _ := io.ReadAll(ares.Body); ares.StatusCode != http.StatusOK || !strings.Contains(string(b), `"state":"TASK_STATE_COMPLETED"`) {
		t.Fatalf("A2A GetTask: %d %.400s", ares.StatusCode, b)
	}
}
