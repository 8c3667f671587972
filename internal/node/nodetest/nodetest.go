// Package nodetest starts internal/node nodes for the tests of the packages a node is
// made of (the grain, the sandbox, the node itself), where the public fathom.Start of
// internal/fathomtest is too far from what they test.
package nodetest

import (
	"context"
	"testing"
	"time"

	"github.com/fathom-agents/fathom/internal/node"
)

// Start starts a node on cfg (a minute at most) and stops it when the test ends.
func Start(t testing.TB, cfg node.Config) *node.Node {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	n, err := node.Start(ctx, cfg)
	if err != nil {
		t.Fatalf("start node: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := n.Stop(ctx); err != nil {
			t.Errorf("stop node: %v", err)
		}
	})
	return n
}
