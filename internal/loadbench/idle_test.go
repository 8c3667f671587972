package loadbench

import (
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/cluster"

	"github.com/fathom-agents/fathom/internal/node"
	"github.com/fathom-agents/fathom/messages"
)

// grainRoot is where Proto.Actor's identity lookup spawns grains.
const grainRoot = "partition-activator/"

// activeGrainIDs lists the process ids (identity$n) of the grains activated on n whose
// identity starts with prefix. Other grains live there too: the cluster pub-sub topics
// (fathom.restarts, …) are grains that stay while they have subscribers.
func activeGrainIDs(n *node.Node, prefix string) []string {
	var ids []string
	for _, bucket := range n.Cluster().System().ProcessRegistry.LocalPIDs.LocalPIDs {
		for _, id := range bucket.Keys() {
			if rest, ok := strings.CutPrefix(id, grainRoot+prefix); ok && !strings.Contains(rest, "/") {
				ids = append(ids, prefix+rest)
			}
		}
	}
	return ids
}

// describeStuck says what the grains still active are doing: their process ids and, for
// a few, the session's state.
func describeStuck(n *node.Node, ids []string) string {
	var b strings.Builder
	for i, pid := range ids {
		if i == 5 {
			fmt.Fprintf(&b, " (+%d more)", len(ids)-i)
			break
		}
		id := pid[:strings.LastIndexByte(pid, '$')]
		st, err := n.Session(id).GetState(&messages.GetStateRequest{}, cluster.WithTimeout(10*time.Second))
		if err != nil {
			fmt.Fprintf(&b, "\n  %s: state: %v", pid, err)
			continue
		}
		s := st.GetState()
		fmt.Fprintf(&b, "\n  %s: status %s, seq %d, pending %q, retry_at %d, sub-agents %d",
			pid, s.GetStatus(), s.GetSeq(), s.GetPending().GetPurpose(), s.GetRetryAtUnixNano(), len(s.GetSubAgents()))
	}
	return b.String()
}

// warmSessions is the warm-up wave of BenchmarkPassivatedSessions.
const warmSessions = 50

// waitPassivated waits until no grain whose identity starts with prefix is active on n
// (finished sessions passivate on their own), failing after 15 minutes.
func waitPassivated(b *testing.B, n *node.Node, prefix string) {
	b.Helper()
	deadline := time.Now().Add(15 * time.Minute)
	for len(activeGrainIDs(n, prefix)) > 0 {
		if time.Now().After(deadline) {
			ids := activeGrainIDs(n, prefix)
			b.Fatalf("%d finished sessions still active 15 minutes after the last finished:%s", len(ids), describeStuck(n, ids))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// writeHeapProfile writes the heap profile to path ("" writes none): with
// FATHOM_LOAD_IDLE_HEAP set, BenchmarkPassivatedSessions writes what the passivated
// sessions left in the heap, and the same after its first wave to path+".first"
// (go tool pprof -base path.first shows what the later waves added). With
// FATHOM_LOAD_ACTIVE_HEAP set, BenchmarkActiveSessions writes the heap before its run to
// path.base and mid-run to path. It reports failures with b.Error, so it may run on
// any goroutine.
func writeHeapProfile(b *testing.B, path string) { writeProfile(b, path, "heap", 0) }

// writeProfile writes the runtime profile name (runtime/pprof.Lookup) to path ("" writes
// none) at pprof's debug level debug, reporting failures with b.Error.
func writeProfile(b *testing.B, path, name string, debug int) {
	if path == "" {
		return
	}
	f, err := os.Create(path)
	if err != nil {
		b.Error(err)
		return
	}
	defer f.Close()
	if err := pprof.Lookup(name).WriteTo(f, debug); err != nil {
		b.Error(err)
	}
}

func settledRSS() float64 {
	runtime.GC()
	debug.FreeOSMemory()
	return rss()
}

// heapObjects is the bytes of live heap objects after a full collection.
func heapObjects() float64 {
	runtime.GC()
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return float64(s[0].Value.Uint64())
}

// idleWave is how many sessions BenchmarkPassivatedSessions runs at once.
const idleWave = 1000

// BenchmarkPassivatedSessions completes FATHOM_LOAD_IDLE_SESSIONS sessions (default
// 10,000; one step each, zero-latency model) on one node in waves of idleWave, waits
// after each wave until every finished session has passivated on its own (no client
// request), then touches each once (GetState, which activates it from its snapshot).
// Reported: how long the last wave took to passivate, the RSS left per passivated
// session against the peak RSS growth per session while they ran, activation latency
// p50/p99 (against the same request to the first wave's sessions once active), and the
// marginal cost of a passivated session: the RSS and live heap that the waves after the
// first added, per session. What the node keeps after its first wave is bounded by how
// many actors were ever active at once (Proto.Actor's process registry and child sets
// keep their peak size), not by how many sessions passivated; the marginal figures are
// what each further passivated session costs.
//
// A warm-up wave of warmSessions runs and passivates first, so the baseline RSS already
// holds what the node sets up once, on its first sessions, for all of them (the
// tokenizer's tables, pooled connections, worker stacks): the figure is what each
// passivated session leaves, not the node's one-time cost spread over the sessions.
func BenchmarkPassivatedSessions(b *testing.B) {
	sessions := envInt(b, "FATHOM_LOAD_IDLE_SESSIONS", 10000)
	if sessions < 2*idleWave {
		b.Fatalf("FATHOM_LOAD_IDLE_SESSIONS=%d: want at least %d (two waves)", sessions, 2*idleWave)
	}
	n := startNode(b, script(b, 1, 0))
	run(b, n, "warm", warmSessions)
	waitPassivated(b, n, "warm")
	for i := 0; b.Loop(); i++ {
		base := settledRSS()
		prefix := fmt.Sprintf("idle%d", i)
		var peak, firstRSS, firstHeap, idle float64
		var passivated time.Duration
		for done := 0; done < sessions; { // in waves, so the run measures idle, not load
			wave := min(idleWave, sessions-done)
			wp := fmt.Sprintf("%s-%d", prefix, done)
			_, _, _, p := run(b, n, wp, wave)
			peak = max(peak, p)
			finished := time.Now()
			waitPassivated(b, n, wp+"-")
			passivated = time.Since(finished)
			idle = settledRSS()
			if done == 0 {
				firstRSS, firstHeap = idle, heapObjects()
				if path := os.Getenv("FATHOM_LOAD_IDLE_HEAP"); path != "" {
					writeHeapProfile(b, path+".first")
				}
			}
			done += wave
		}
		lastHeap := heapObjects()
		writeHeapProfile(b, os.Getenv("FATHOM_LOAD_IDLE_HEAP"))
		lats := make([]time.Duration, 0, sessions)
		// The baseline: the same request to the same sessions, now active: asked right
		// after the activation, for the first idleWave sessions (asked after all of them,
		// the first ones could have passivated again, and the baseline would be an
		// activation too).
		active := make([]time.Duration, 0, min(sessions, idleWave))
		for done := 0; done < sessions; done += 1000 {
			for k := range min(1000, sessions-done) {
				id := fmt.Sprintf("%s-%d-%d", prefix, done, k)
				t0 := time.Now()
				if _, err := n.Session(id).GetState(&messages.GetStateRequest{}, cluster.WithTimeout(time.Minute)); err != nil {
					b.Fatalf("touch %s: %v", id, err)
				}
				lats = append(lats, time.Since(t0))
				if len(active) < cap(active) {
					t0 = time.Now()
					if _, err := n.Session(id).GetState(&messages.GetStateRequest{}, cluster.WithTimeout(time.Minute)); err != nil {
						b.Fatalf("touch %s again: %v", id, err)
					}
					active = append(active, time.Since(t0))
				}
			}
		}
		later := float64(sessions - idleWave)
		b.ReportMetric(passivated.Seconds(), "s-to-passivate")
		b.ReportMetric((idle-base)/float64(sessions), "RSS-B/idle-session")
		b.ReportMetric((idle-firstRSS)/later, "marginal-RSS-B/idle-session")
		b.ReportMetric((lastHeap-firstHeap)/later, "marginal-heap-B/idle-session")
		b.ReportMetric((peak-base)/float64(sessions), "RSS-B/active-session")
		b.ReportMetric(float64(percentile(lats, 0.5).Microseconds()), "p50-activation-µs")
		b.ReportMetric(float64(percentile(lats, 0.99).Microseconds()), "p99-activation-µs")
		b.ReportMetric(float64(percentile(active, 0.5).Microseconds()), "p50-active-µs")
		b.ReportMetric(float64(percentile(active, 0.99).Microseconds()), "p99-active-µs")
	}
}
