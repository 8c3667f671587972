package fathom_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/cluster"

	"github.com/fathom-agents/fathom"
	"github.com/fathom-agents/fathom/auth"
	"github.com/fathom-agents/fathom/internal/fathomtest"
	"github.com/fathom-agents/fathom/internal/testenv"
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
	cfg := fathomtest.Config(t, fathomtest.Model(t, mock.Script{Rules: []mock.Rule{
		{SystemMatch: "FATHOM-ROLE: orchestrator", DelayMS: 60_000, Response: `{"steps":[]}`},
	}, Default: "done"}))
	cfg.Quotas = fathom.Quotas{Default: fathom.TenantLimits{Weight: 1, MaxRunningSessions: 1}}
	n := fathomtest.Start(t, cfg)
	if _, err := n.StartSession(ctx, fathom.SessionRequest{ID: "run-1", Goal: "a slow one"}); err != nil {
		t.Fatal(err)
	}
	_, err := n.StartSession(ctx, fathom.SessionRequest{ID: "run-2", Goal: "one too many"})
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

// TestStartQueueWaitsForARunningSessionToEnd: a tenant with start_queue_timeout whose
// max_running_sessions are running does not get its start refused at once: the start
// waits, and goes through when one of its sessions ends; a start still over the limit
// when the queue time is up is refused (ErrResourceExhausted), after that time.
func TestStartQueueWaitsForARunningSessionToEnd(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var logs testenv.Buffer
	cfg := fathomtest.Config(t, fathomtest.Model(t, mock.Script{Rules: []mock.Rule{
		{SystemMatch: "FATHOM-ROLE: orchestrator", DelayMS: 60_000, Response: `{"steps":[]}`},
	}, Default: "done"}))
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	cfg.Quotas = fathom.Quotas{Default: fathom.TenantLimits{Weight: 1, MaxRunningSessions: 1},
		Named: map[string]fathom.TenantLimits{
			auth.DefaultTenant: {Weight: 1, MaxRunningSessions: 1, StartQueueTimeout: 60 * time.Second},
			"brief":            {Weight: 1, MaxRunningSessions: 1, StartQueueTimeout: 700 * time.Millisecond},
		}}
	n := fathomtest.Start(t, cfg)
	if _, err := n.StartSession(ctx, fathom.SessionRequest{ID: "run-1", Goal: "a slow one"}); err != nil {
		t.Fatal(err)
	}
	queued := make(chan error, 1)
	go func() {
		_, err := n.StartSession(ctx, fathom.SessionRequest{ID: "run-2", Goal: "waits its turn"})
		queued <- err
	}()
	// The second start was refused once (the quota's crossing is logged) and is waiting.
	testenv.Eventually(t, 30*time.Second, func() bool {
		return strings.Contains(logs.String(), "a start was refused")
	}, "the second start was never refused by max_running_sessions")
	select {
	case err := <-queued:
		t.Fatalf("the queued start returned while the first session runs: %v", err)
	default:
	}
	if err := n.Cancel(ctx, "run-1", "make room"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-queued:
		if err != nil {
			t.Fatalf("the queued start after the first session ended: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the queued start did not go through after the first session ended")
	}
	if st, err := n.State(ctx, "run-2"); err != nil || st.GetGoal() != "waits its turn" {
		t.Fatalf("the queued session: %v, %v", st, err)
	}

	// A tenant whose queue time runs out is refused after it.
	brief := auth.WithPrincipal(ctx, auth.Principal{Subject: "b", Tenant: "brief", Roles: []auth.Role{auth.RoleMember}})
	if _, err := n.StartSession(brief, fathom.SessionRequest{ID: "brief-1", Goal: "a slow one"}); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	_, err := n.StartSession(brief, fathom.SessionRequest{ID: "brief-2", Goal: "gives up"})
	if !errors.Is(err, fathom.ErrResourceExhausted) || time.Since(began) < 700*time.Millisecond {
		t.Fatalf("a start past the queue time: %v after %s, want ErrResourceExhausted after 700ms", err, time.Since(began))
	}
}
