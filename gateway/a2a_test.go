package gateway_test

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fathom-agents/fathom/gateway"
	"github.com/fathom-agents/fathom/gateway/a2a"
	"github.com/fathom-agents/fathom/internal/testenv"
	"github.com/fathom-agents/fathom/llm/mock"
)

// a2aScript plans one step for most goals (its output, "An old silent pond", is the
// result), a human_input step ("Which colour?") for colour goals, and five steps for long
// jobs.
func a2aScript() *mock.Script {
	long := `{"steps":[{"id":"s1","type":"custom","description":"one"},{"id":"s2","type":"custom","description":"two"},` +
		`{"id":"s3","type":"custom","description":"three"},{"id":"s4","type":"custom","description":"four"},` +
		`{"id":"s5","type":"custom","description":"five"}]}`
	return &mock.Script{Rules: []mock.Rule{
		{SystemMatch: `FATHOM-ROLE: orchestrator`, ContextMatch: `colour`, Response: `{"steps":[{"id":"ask","type":"human_input","description":"Which colour?"},{"id":"paint","type":"custom","description":"paint the fence"}]}`},
		{SystemMatch: `FATHOM-ROLE: orchestrator`, ContextMatch: `long job`, Response: long},
		{SystemMatch: `FATHOM-ROLE: orchestrator`, Response: `{"steps":[{"id":"write","type":"custom","description":"write it"}]}`},
		{SystemMatch: `FATHOM-ROLE: executor`, Response: `An old silent pond`},
	}}
}

// TestA2AWithTheOfficialClient drives the A2A server with the official A2A JavaScript SDK
// (testdata/a2a_client.cjs): the public agent card; send (a new session, the result as an
// artifact), a follow-up turn, input-required and the answer, a stream (one status
// update per journaled event), get, cancel (and the refused second cancel), a
// resubscribe with Last-Event-ID after dropping the stream (every event exactly once),
// an unknown task and another tenant's task (the same -32001), a message to a working
// task (-32004), invalid params, a read-only token's send (-32000, permission_denied), no
// token (401), and A2A 0.3 through the SDK's compat layer.
func TestA2AWithTheOfficialClient(t *testing.T) {
	dir := testenv.NodeA2A(t)
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatalf("node is not installed (scripts/install-node-a2a.sh installs it): %v", err)
	}
	g := startGW(t, gwOpts{script: a2aScript(), delayMS: 100, cfg: func(c *gateway.Config) { c.Authenticator = tenantTokens{} }})
	var agents []a2a.AgentInfo
	for _, a := range g.n.Agents() {
		agents = append(agents, a2a.AgentInfo{Name: a.Name, Description: a.Description})
	}
	a2a.Mount(g.h, a2a.Config{Agents: agents})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", filepath.Join("testdata", "a2a_client.cjs"), g.srv.URL, "acme", "globex", readToken)
	cmd.Env = append(cmd.Environ(), "NODE_PATH="+filepath.Join(dir, "node_modules"))
	out, err := cmd.CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "ok" {
		t.Fatalf("the A2A client: %v\n%s", err, out)
	}
}
