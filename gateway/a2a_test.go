package gateway_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fathom-agents/fathom/gateway"
	"github.com/fathom-agents/fathom/gateway/a2a"
	"github.com/fathom-agents/fathom/internal/node"
	"github.com/fathom-agents/fathom/internal/testenv"
	"github.com/fathom-agents/fathom/llm/mock"
	"github.com/fathom-agents/fathom/webhooks"
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
// token (401), ListTasks, push configs (and the push to a real receiver), and A2A 0.3
// through the SDK's compat layer.
func TestA2AWithTheOfficialClient(t *testing.T) {
	dir := testenv.NodeA2A(t)
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatalf("node is not installed (scripts/install-node-a2a.sh installs it): %v", err)
	}
	var mu sync.Mutex
	var pushes []string // "path auth token state taskId"
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			StatusUpdate struct {
				TaskID string `json:"taskId"`
				Status struct {
					State string `json:"state"`
				} `json:"status"`
			} `json:"statusUpdate"`
		}
		_ = json.NewDecoder(r.Body).Decode(&body)
		mu.Lock()
		pushes = append(pushes, strings.Join([]string{r.URL.Path, r.Header.Get("Authorization"), r.Header.Get("X-A2A-Notification-Token"),
			body.StatusUpdate.Status.State, body.StatusUpdate.TaskID}, " "))
		mu.Unlock()
	}))
	defer hook.Close()
	g := startGW(t, gwOpts{script: a2aScript(), delayMS: 100, cfg: func(c *gateway.Config) { c.Authenticator = tenantTokens{} },
		node: func(c *node.Config) {
			c.Webhooks = webhooks.Config{Secret: "whsec_" + base64.StdEncoding.EncodeToString([]byte("a2a-official-client-secret-0123456789"))}
		}})
	var agents []a2a.AgentInfo
	for _, a := range g.n.Agents() {
		agents = append(agents, a2a.AgentInfo{Name: a.Name, Description: a.Description})
	}
	a2a.Mount(g.h, a2a.Config{Agents: agents, PushNotifications: true})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", filepath.Join("testdata", "a2a_client.cjs"), g.srv.URL, "acme", "globex", readToken, hook.URL)
	cmd.Env = append(cmd.Environ(), "NODE_PATH="+filepath.Join(dir, "node_modules"))
	out, err := cmd.CombinedOutput()
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if err != nil || len(lines) != 2 || lines[1] != "ok" || !strings.HasPrefix(lines[0], "push-task ") {
		t.Fatalf("the A2A client: %v\n%s", err, out)
	}
	// The push configs the client set: the kept one got the task's completion, with its
	// authentication and token; the deleted one got nothing.
	task := strings.TrimPrefix(lines[0], "push-task ")
	want := "/keep Bearer js-credentials js-token " + a2a.StateCompleted + " " + task
	testenv.Eventually(t, 30*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return slices.Contains(pushes, want)
	}, "the push receiver never got %q", want)
	mu.Lock()
	defer mu.Unlock()
	if len(pushes) != 1 {
		t.Fatalf("pushes %q, want only %q", pushes, want)
	}
}
