package fathom_test

import (
	"context"
	"testing"
	"time"

	"github.com/fathom-agents/fathom"
)

// BenchmarkLocalNodeStartStop is what every in-process command (fathom run, session
// send, input, cancel, delete, fork) pays before and after its work: starting a node with
// the local cluster provider on the embedded journal, and stopping it. The target is
// ≤ 300 ms per start and stop.
func BenchmarkLocalNodeStartStop(b *testing.B) {
	var start, stop time.Duration
	for i := 0; i < b.N; i++ {
		cfg := fathom.DefaultConfig()
		cfg.DataDir = b.TempDir()
		cfg.Cluster.Port = 0
		began := time.Now()
		n, err := fathom.Start(context.Background(), cfg)
		if err != nil {
			b.Fatal(err)
		}
		started := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if err := n.Close(ctx); err != nil {
			b.Fatal(err)
		}
		cancel()
		start += started.Sub(began)
		stop += time.Since(started)
	}
	b.ReportMetric(float64(start.Milliseconds())/float64(b.N), "start-ms/op")
	b.ReportMetric(float64(stop.Milliseconds())/float64(b.N), "stop-ms/op")
}
