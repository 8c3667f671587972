package main

import (
	"context"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fathom-agents/fathom/internal/testenv"
)

// TestGrainClientExample runs examples/grain-client, a service that joins the cluster
// through Consul (a member hosting no kinds), against a `fathom node`: it starts a session
// with the generated protobuf client, follows its events on the session's pub-sub topic
// (every seq from 1, none missing or repeated) and answers its human input, until the
// session completes with the answer used.
func TestGrainClientExample(t *testing.T) {
	t.Parallel()
	consul := testenv.ConsulAddr(t)
	dsn := testenv.PostgresDSN(t)
	env := humanModel(t)
	name := "fathom-grain-client-" + freePort(t)
	node := startNode(t, env, "--consul", consul, "--postgres", dsn, "--cluster-name", name, "--token", "t")

	bin := filepath.Join(t.TempDir(), "grain-client")
	if out, err := exec.Command("go", "build", "-o", bin, "../../examples/grain-client").CombinedOutput(); err != nil {
		t.Fatalf("build the example: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "-consul", consul, "-cluster", name, "-id", "gc-1", "-goal", "print copies", "-answer", `{"n": 3}`)
	cmd.Env = cleanEnv()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("grain-client: %v\n%s", err, out)
	}
	lines := regexp.MustCompile(`(?m)^(\d+) (\w+)$`).FindAllStringSubmatch(string(out), -1)
	var types []string
	for i, m := range lines {
		if want := i + 1; m[1] != strconv.Itoa(want) {
			t.Fatalf("event %d printed with seq %s:\n%s", want, m[1], out)
		}
		types = append(types, m[2])
	}
	got := strings.Join(types, " ")
	for _, want := range []string{"session_started", "hitl_requested", "hitl_received", "session_completed"} {
		if !strings.Contains(got, want) {
			t.Fatalf("no %s among the followed events %q:\n%s", want, got, out)
		}
	}
	if !strings.Contains(string(out), "result: printed") {
		t.Fatalf("no result line:\n%s", out)
	}
	// The journal holds exactly what the client followed.
	evs := auditJournal(t, dsn, "gc-1")
	if len(evs) != len(types) {
		t.Fatalf("journal has %d events, the client followed %d", len(evs), len(types))
	}
	node.stop(t)
}
