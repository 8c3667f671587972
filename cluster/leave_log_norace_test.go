//go:build !race

// Two members in one process: excluded from -race runs like consul_norace_test.go.

package cluster_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/types/known/wrapperspb"

	fcluster "github.com/fathom-agents/fathom/cluster"
	"github.com/fathom-agents/fathom/internal/testenv"
)

// logBuffer collects JSON log lines from several goroutines.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// records returns the logged records whose message is msg.
func (l *logBuffer) records(msg string) []map[string]any {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for _, line := range strings.Split(l.b.String(), "\n") {
		var r map[string]any
		if json.Unmarshal([]byte(line), &r) == nil && r["msg"] == msg {
			out = append(out, r)
		}
	}
	return out
}

func startLoggingNode(t *testing.T, cfg fcluster.Config, logs *logBuffer) *fcluster.Node {
	t.Helper()
	cfg.Logger = slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	return startNode(t, cfg)
}

// TestGracefulLeaveOfAPeerIsNotAnError: two members of the local provider (each its own
// cluster) that talk over Proto.Actor's remoting, as members do: when one stops
// gracefully, neither logs the end of their connection as an ERROR.
func TestGracefulLeaveOfAPeerIsNotAnError(t *testing.T) {
	cfg := fcluster.DefaultConfig()
	var logsA, logsB logBuffer
	cfg.Name = "leave-a-" + t.Name()
	a := startLoggingNode(t, cfg, &logsA)
	cfg.Name = "leave-b-" + t.Name()
	b := startLoggingNode(t, cfg, &logsB)
	echo := actor.PropsFromFunc(func(ctx actor.Context) {
		if m, ok := ctx.Message().(*wrapperspb.StringValue); ok {
			ctx.Respond(m)
		}
	})
	pid, err := b.System().Root.SpawnNamed(echo, "leave-echo")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.System().Root.RequestFuture(pid, wrapperspb.String("hi"), 5*time.Second).Result(); err != nil {
		t.Fatalf("a -> b over remoting: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := b.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	const lost = "EndpointWriter lost connection"
	testenv.Eventually(t, 20*time.Second, func() bool { return len(logsA.records(lost)) > 0 },
		"a never logged the end of its connection to b")
	for name, logs := range map[string]*logBuffer{"a (stayed)": &logsA, "b (left)": &logsB} {
		for _, r := range logs.records(lost) {
			if r["level"] == "ERROR" {
				t.Errorf("%s logged a normal leave as an error: %v", name, r)
			}
		}
	}
}

// TestGracefulLeaveIsNotAnError: when a member leaves the cluster normally, the member
// that was talking to it logs the end of that connection at INFO, not as Proto.Actor's
// ERROR "EndpointWriter lost connection".
func TestGracefulLeaveIsNotAnError(t *testing.T) {
	addr := testenv.ConsulAddr(t)
	cfg := fcluster.DefaultConfig()
	cfg.Name = fmt.Sprintf("fathom-leave-%d", time.Now().UnixNano())
	cfg.Provider, cfg.ConsulAddr = fcluster.ProviderConsul, addr
	var logsA, logsB logBuffer
	a := startLoggingNode(t, cfg, &logsA)
	b := startLoggingNode(t, cfg, &logsB)
	testenv.Eventually(t, 20*time.Second, func() bool {
		return len(a.MemberAddresses()) == 2 && len(b.MemberAddresses()) == 2
	}, "both nodes see two members (a %v, b %v)", a.MemberAddresses(), b.MemberAddresses())
	// Calls from a to identities hosted on b open a's connection to b (and b's back).
	onB := 0
	for i := 0; i < 40 && onB < 3; i++ {
		got, err := call(a, fmt.Sprintf("id-%d", i), "x")
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(got, b.Address()+"|") {
			onB++
		}
	}
	if onB == 0 {
		t.Fatal("no identity was placed on b")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := b.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	const lost = "EndpointWriter lost connection"
	testenv.Eventually(t, 20*time.Second, func() bool { return len(logsA.records(lost)) > 0 },
		"a never logged the end of its connection to b")
	for name, logs := range map[string]*logBuffer{"a (stayed)": &logsA, "b (left)": &logsB} {
		for _, r := range logs.records(lost) {
			if r["level"] == "ERROR" {
				t.Errorf("%s logged a normal leave as an error: %v", name, r)
			}
		}
	}
}
