package sandbox

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/fathom-agents/fathom/auth"
	"github.com/fathom-agents/fathom/messages/fsp"
)

// TestPoolSharesConnectionsBetweenTenants: with one connection and tenant A's three
// executions already waiting behind its running one, tenant B's execution is the next
// to run, not the last: the pool hands free connections out by fair share (smallest
// share for the weight, then stride passes: A's pass is one grant ahead of B's), not
// first come first served.
func TestPoolSharesConnectionsBetweenTenants(t *testing.T) {
	sb := startSandbox(t)
	cfg := testConfig(sb.url(), serverToken, discardLogger())
	cfg.PoolSize, cfg.PoolOverflow, cfg.CheckoutTimeout = 1, 0, 30*time.Second
	p, _ := startPool(t, cfg)
	waitStats(t, p, "connected", func(s Stats) bool { return s.Up == 1 })

	done := make(chan string, 5)
	run := func(tenant, name string) {
		ctx := auth.WithTenant(context.Background(), tenant)
		go func() {
			if _, err := p.Execute(ctx, Request{Language: fsp.LangShell, Code: "sleep 0.3; echo " + name}); err != nil {
				t.Errorf("%s: %v", name, err)
			}
			done <- name
		}()
	}
	run("acme", "a1")
	waitStats(t, p, "a1 running", func(s Stats) bool { return s.Busy == 1 && s.Waiting == 0 })
	for i, name := range []string{"a2", "a3", "a4"} {
		run("acme", name)
		waitStats(t, p, name+" waiting", func(s Stats) bool { return s.Waiting == i+1 })
	}
	run("globex", "b1")
	waitStats(t, p, "b1 waiting", func(s Stats) bool { return s.Waiting == 4 })

	var order []string
	for range 5 {
		select {
		case name := <-done:
			order = append(order, name)
		case <-time.After(60 * time.Second):
			t.Fatalf("executions did not finish; finished so far: %v", order)
		}
	}
	if i := slices.Index(order, "b1"); i > 1 {
		t.Fatalf("finish order %v: globex's only execution ran after acme's backlog, want it second", order)
	}
	if want := []string{"a1", "b1", "a2", "a3", "a4"}; !slices.Equal(order, want) {
		t.Fatalf("finish order %v, want %v", order, want)
	}
}
