// Package fathomtest starts Fathom nodes for tests through the public fathom.Start, the
// way a program embedding Fathom does: a node on the embedded defaults whose model is
// the scripted mock (llm/mock) served over real HTTP on a loopback port, or a cluster of
// such nodes on the test Consul agent and one PostgreSQL database (internal/testenv).
// Everything started is stopped by t.Cleanup, so a test only says what differs:
//
//	n := fathomtest.StartNode(t, fathomtest.Options{Rules: `{"rules":[...]}`})
//	id, err := n.StartSession(ctx, fathom.SessionRequest{Goal: "..."})
//	fathomtest.WaitStatus(ctx, t, n, id, messages.SessionStatus_SESSION_STATUS_COMPLETED)
package fathomtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fathom-agents/fathom"
	fcluster "github.com/fathom-agents/fathom/cluster"
	"github.com/fathom-agents/fathom/gateway"
	"github.com/fathom-agents/fathom/internal/testenv"
	"github.com/fathom-agents/fathom/llm/mock"
	"github.com/fathom-agents/fathom/messages"
)

// Options configure the nodes StartNode and StartCluster start.
type Options struct {
	// Rules is the mock model's script in JSON (mock.ParseScript); when empty, Script is
	// used, and when that is empty too, mock.DemoScript.
	Rules string
	// Script is the mock model's script when Rules is empty.
	Script mock.Script
	// Edit, when set, changes each node's config before it starts (after the fixture's
	// own settings: what Edit sets wins).
	Edit func(*fathom.Config)
}

// script returns the options' model script.
func (o Options) script(t testing.TB) mock.Script {
	t.Helper()
	if o.Rules != "" {
		s, err := mock.ParseScript([]byte(o.Rules))
		if err != nil {
			t.Fatalf("parse the mock model's rules: %v", err)
		}
		return s
	}
	if len(o.Script.Rules) == 0 && o.Script.Default == "" {
		return mock.DemoScript()
	}
	return o.Script
}

// Model serves script as the scripted mock model on a loopback port until the test ends
// and returns its OpenAI-compatible base URL (ending in /v1).
func Model(t testing.TB, script mock.Script) string {
	t.Helper()
	srv := httptest.NewServer(mock.New(mock.Config{Script: script}).Handler())
	t.Cleanup(srv.Close)
	return srv.URL + "/v1"
}

// Config returns fathom.DefaultConfig with the journal in a fresh temporary directory and
// the model at modelURL (an OpenAI-compatible base URL, as Model returns).
func Config(t testing.TB, modelURL string) fathom.Config {
	t.Helper()
	cfg := fathom.DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.LLM = fathom.LLM{BaseURL: modelURL, APIKey: "k", Model: "mock-model"}
	return cfg
}

// StartNode starts a node on the embedded defaults (a local cluster member, the bolt
// journal in a temporary directory) whose model is the options' scripted mock. The node
// and the model are stopped when the test ends.
func StartNode(t testing.TB, o Options) *fathom.Node {
	t.Helper()
	cfg := Config(t, Model(t, o.script(t)))
	if o.Edit != nil {
		o.Edit(&cfg)
	}
	return Start(t, cfg)
}

// StartCluster starts n nodes, members of one Consul cluster named after the test (on the
// test Consul agent), sharing one fresh PostgreSQL database and one scripted model, and
// returns them in start order. Without the test services it skips (or fails under
// FATHOM_TEST_REQUIRE_SERVICES=1), as internal/testenv does.
//
// Two members in one process trip Proto.Actor's own data races (see docs/ARCHITECTURE.md):
// a test calling StartCluster with n > 1 belongs in a *_norace_test.go file.
func StartCluster(t testing.TB, n int, o Options) []*fathom.Node {
	t.Helper()
	consul, dsn := testenv.ConsulAddr(t), testenv.PostgresDSN(t)
	model := Model(t, o.script(t))
	name := clusterName(t)
	nodes := make([]*fathom.Node, 0, n)
	for i := 0; i < n; i++ {
		cfg := Config(t, model)
		cfg.PostgresDSN = dsn
		cfg.Cluster = fcluster.DefaultConfig()
		cfg.Cluster.Provider, cfg.Cluster.ConsulAddr, cfg.Cluster.Name = fcluster.ProviderConsul, consul, name
		if o.Edit != nil {
			o.Edit(&cfg)
		}
		nodes = append(nodes, Start(t, cfg))
	}
	return nodes
}

// clusterName is a Consul service name of the test's own: the test's name and a port the
// OS handed out, so tests (and reruns) never share a cluster.
func clusterName(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("pick a free port: %v", err)
	}
	defer l.Close()
	name := strings.ToLower(strings.NewReplacer("/", "-", "_", "-", " ", "-").Replace(t.Name()))
	return fmt.Sprintf("fathom-%s-%d", name, l.Addr().(*net.TCPAddr).Port)
}

// Start starts a node with cfg (fathom.Start) and closes it when the test ends.
//
// Under the race detector it refuses to start a second node while one is live in the
// process (a parallel test's, or the second member of a cluster): two members in one
// process trip Proto.Actor's own data races (its gRPC logger is set per member), which
// fail whichever test is running at the time. Such a test belongs in a
// *_norace_test.go file (built without -race; make test runs those separately). A node
// the test closed itself no longer counts.
func Start(t testing.TB, cfg fathom.Config) *fathom.Node {
	t.Helper()
	if raceDetector && liveNodes() > 0 {
		t.Fatalf("fathomtest: a second live node in one process under -race (Proto.Actor's own data races would fail a test at random): " +
			"run the nodes one at a time, or move the test to a *_norace_test.go file")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	n, err := fathom.Start(ctx, cfg)
	if err != nil {
		t.Fatalf("start the node: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := n.Close(ctx); err != nil {
			t.Logf("close the node: %v", err)
		}
		forget(n)
	})
	remember(n)
	return n
}

// started holds the nodes Start started whose test has not ended, in this process.
var started struct {
	sync.Mutex
	nodes []*fathom.Node
}

func remember(n *fathom.Node) {
	started.Lock()
	defer started.Unlock()
	started.nodes = append(started.nodes, n)
}

func forget(n *fathom.Node) {
	started.Lock()
	defer started.Unlock()
	started.nodes = slices.DeleteFunc(started.nodes, func(m *fathom.Node) bool { return m == n })
}

// liveNodes counts the started nodes not closed yet: those whose cluster member has not
// left (a closed node's readiness names the cluster).
func liveNodes() int {
	started.Lock()
	defer started.Unlock()
	live := 0
	for _, n := range started.nodes {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		var nr *gateway.NotReadyError
		if err := n.Ready(ctx); !errors.As(err, &nr) || nr.Part != "cluster" {
			live++
		}
		cancel()
	}
	return live
}

// WaitStatus polls session id's state until its status is want (30 s at most) and
// returns that state.
func WaitStatus(ctx context.Context, t testing.TB, n *fathom.Node, id string, want messages.SessionStatus) *messages.SessionState {
	t.Helper()
	var st *messages.SessionState
	var err error
	testenv.Eventually(t, 30*time.Second, func() bool {
		st, err = n.State(ctx, id)
		return err == nil && st.GetStatus() == want
	}, "session %s never reached %s (last: %v, %v)", id, want, st.GetStatus(), err)
	return st
}

// Serve serves n's gateway configured by cfg on a loopback HTTP server and returns the
// server; when the test ends the gateway shuts down, then the server closes.
func Serve(t testing.TB, n *fathom.Node, cfg gateway.Config) *httptest.Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	h, err := n.Gateway(ctx, cfg)
	if err != nil {
		t.Fatalf("start the gateway: %v", err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(func() { // the gateway first: it ends the streams the server would wait for
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := h.Shutdown(ctx); err != nil {
			t.Logf("shut the gateway down: %v", err)
		}
		srv.Close()
	})
	return srv
}
