package fathom_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/cluster"

	"github.com/fathom-agents/fathom"
	"github.com/fathom-agents/fathom/llm/mock"
	"github.com/fathom-agents/fathom/messages"
)

// TestNodeQuotasRefuseAStartOverMaxRunningSessions: with Config.Quotas, a StartSession
// of a tenant (here the default one) running its max_running_sessions fails with the
// grain's RESOURCE_EXHAUSTED error (errors.Is fathom.ErrResourceExhausted) and its retry
// delay (fathom.RetryAfter); nothing is created.
func TestNodeQuotasRefuseAStartOverMaxRunningSessions(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	model := httptest.NewServer(mock.New(mock.Config{Script: mock.Script{Rules: []mock.Rule{
		{SystemMatch: "FATHOM-ROLE: orchestrator", DelayMS: 60_000, Response: `{"steps":[]}`},
	}, Default: "done"}}).Handler())
	defer model.Close()
	cfg := fathom.DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.LLM = fathom.LLM{BaseURL: model.URL + "/v1", APIKey: "k", Model: "mock-model"}
	cfg.Quotas = fathom.Quotas{Default: fathom.TenantLimits{Weight: 1, MaxRunningSessions: 1}}
	n, err := fathom.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close(context.Background())
	if _, err := n.StartSession(ctx, fathom.SessionRequest{ID: "run-1", Goal: "a slow one"}); err != nil {
		t.Fatal(err)
	}
	_, err = n.StartSession(ctx, fathom.SessionRequest{ID: "run-2", Goal: "one too many"})
	var ge *cluster.GrainErrorResponse
	if !errors.As(err, &ge) || ge.Reason != messages.ErrorReason_RESOURCE_EXHAUSTED.String() || ge.GetMetadata()[messages.RetryAfterKey] != "5" {
		t.Fatalf("second start: %v, want RESOURCE_EXHAUSTED with %s 5", err, messages.RetryAfterKey)
	}
	if d, ok := fathom.RetryAfter(err); !errors.Is(err, fathom.ErrResourceExhausted) || !ok || d != 5*time.Second {
		t.Fatalf("second start: %v, RetryAfter %s %v; want ErrResourceExhausted, retry after 5s", err, d, ok)
	}
	if _, err := n.State(ctx, "run-2"); !errors.Is(err, fathom.ErrNotFound) {
		t.Fatalf("the refused session: %v, want ErrNotFound", err)
	}
	if err := n.Cancel(ctx, "run-1", "done"); err != nil {
		t.Fatal(err)
	}
	if _, err := n.StartSession(ctx, fathom.SessionRequest{ID: "run-3", Goal: "after the first ended"}); err != nil {
		t.Fatalf("a start after the running session ended: %v", err)
	}
}
