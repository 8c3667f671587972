package session_test

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/cluster"

	"github.com/fathom-agents/fathom/internal/testenv"
	"github.com/fathom-agents/fathom/messages"
)

// TestUnpricedModelWarnsOnce: sessions on a model the price table does not know record
// cost_usd 0, and the node logs one warning for that model, however many calls and
// sessions use it.
func TestUnpricedModelWarnsOnce(t *testing.T) {
	const model = "unpriced-model-for-the-warning-test"
	var logs testenv.Buffer
	h := startHarness(t, harnessOpts{log: slog.New(slog.NewTextHandler(&logs, nil))})
	for _, id := range []string{"s1", "s2"} {
		_, err := h.node.Session(id).Start(&messages.StartRequest{CommandId: "c1", Goal: "write a haiku",
			Config: &messages.SessionConfig{Model: model}}, cluster.WithTimeout(10*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		evs := waitTerminal(t, h.j, id, 30*time.Second)
		mustComplete(t, evs)
		if n := count(evs, "llm_responded"); n < 2 {
			t.Fatalf("%s made %d calls, want several", id, n)
		}
		for _, ev := range ofType(evs, "llm_responded") {
			if c := ev.GetLlmResponded().GetCostUsd(); c != 0 {
				t.Fatalf("unpriced call cost %v", c)
			}
		}
	}
	out := logs.String()
	if n := strings.Count(out, "model has no price"); n != 1 || !strings.Contains(out, "model="+model) || !strings.Contains(out, "--prices FILE") {
		t.Fatalf("%d warnings, want one naming %s and --prices FILE:\n%s", n, model, out)
	}
}
