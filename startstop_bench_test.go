package fathom_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/fathom-agents/fathom"
	"github.com/fathom-agents/fathom/messages"
	"github.com/fathom-agents/fathom/persistence/bolt"
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

// BenchmarkBaselineJournalOpenClose is the floor of any in-process command: opening the
// embedded journal in a new data dir and closing it (BenchmarkLocalNodeStartStop's
// baseline in BENCHMARKS.md).
func BenchmarkBaselineJournalOpenClose(b *testing.B) {
	for i := 0; i < b.N; i++ {
		j, err := bolt.Open(filepath.Join(b.TempDir(), "journal.db"), bolt.Options{})
		if err != nil {
			b.Fatal(err)
		}
		if err := j.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLocalNodeStopAfterASession is the stop of an in-process node whose session
// (the demo model's) just ended: its events queued for the pub-sub topics are published
// before the member leaves, not failed one timeout after it.
func BenchmarkLocalNodeStopAfterASession(b *testing.B) {
	var stop time.Duration
	for i := 0; i < b.N; i++ {
		cfg := fathom.DefaultConfig()
		cfg.DataDir = b.TempDir()
		cfg.Cluster.Port = 0
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		n, err := fathom.Start(ctx, cfg)
		if err != nil {
			b.Fatal(err)
		}
		id, err := n.StartSession(ctx, fathom.SessionRequest{Goal: "Write a haiku"})
		if err != nil {
			b.Fatal(err)
		}
		for {
			st, err := n.State(ctx, id)
			if err != nil {
				b.Fatal(err)
			}
			if s := st.GetStatus(); s == messages.SessionStatus_SESSION_STATUS_COMPLETED || s == messages.SessionStatus_SESSION_STATUS_FAILED {
				break
			}
			select {
			case <-ctx.Done():
				b.Fatal("the session did not end")
			case <-time.After(10 * time.Millisecond):
			}
		}
		began := time.Now()
		if err := n.Close(ctx); err != nil {
			b.Fatal(err)
		}
		stop += time.Since(began)
		cancel()
	}
	b.ReportMetric(float64(stop.Milliseconds())/float64(b.N), "stop-ms/op")
}
