package main

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fathom-agents/fathom/internal/testenv"
)

// TestA2AOfficialClientResumesOnAnotherNodeAfterKill: the official A2A JavaScript SDK
// (@a2a-js/sdk, testdata/a2a_failover.cjs) follows a task through node A with
// resubscribeTask; A is killed with SIGKILL mid-run, the SDK's stream breaks, and the
// client resubscribes through node B (a client made from B's agent card) with the last
// seq it got as Last-Event-ID: the status updates of the two streams carry every event
// exactly once, 1..n, the last one TASK_STATE_COMPLETED.
func TestA2AOfficialClientResumesOnAnotherNodeAfterKill(t *testing.T) {
	testenv.Faults(t)
	dir := testenv.NodeA2A(t)
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatalf("node is not installed (scripts/install-node-a2a.sh installs it): %v", err)
	}
	c, a, b := fiveStepPair(t, "done {{.Step}}")
	id := c.idOn("a2a-sdk-kill", a.member, a.member, b.member)
	c.startOn(a, id, a)

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", filepath.Join("testdata", "a2a_failover.cjs"), a.url, b.url, id, faultToken)
	cmd.Env = append(os.Environ(), "NODE_PATH="+filepath.Join(dir, "node_modules"))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var (
		seqs           []uint64
		killedAfter    uint64 // the last seq the client had when A was killed
		killed, broken bool
		afterBreak     int // status updates received after the stream through A broke
		final          string
		transcript     []string
	)
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		line := sc.Text()
		transcript = append(transcript, line)
		word, rest, _ := strings.Cut(line, " ")
		switch word {
		case "seq":
			n, _ := strconv.ParseUint(strings.Fields(rest)[0], 10, 64)
			seqs = append(seqs, n)
			if broken {
				afterBreak++
			}
			if !killed && len(seqs) == 6 { // into the steps, well before the end
				c.kill(a)
				killed, killedAfter = true, n
			}
		case "dropped":
			if !killed {
				t.Fatalf("the stream through A broke before the kill:\n%s", strings.Join(transcript, "\n"))
			}
			broken = true
		case "done":
			final = rest
		case "fail":
			t.Fatalf("the A2A client: %s\n%s\nstderr: %s", rest, strings.Join(transcript, "\n"), stderr.String())
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the A2A client: %v\n%s\nstderr: %s", err, strings.Join(transcript, "\n"), stderr.String())
	}
	t.Logf("the SDK's events through A then B: %v (A killed after seq %d)", seqs, killedAfter)
	if !broken || afterBreak == 0 || final != "TASK_STATE_COMPLETED" {
		t.Fatalf("want the stream through A broken, events through B, then completed:\n%s", strings.Join(transcript, "\n"))
	}
	for i, s := range seqs {
		if s != uint64(i+1) {
			t.Fatalf("events across the two streams are not 1..n exactly once: %v", seqs)
		}
	}
	c.finish(id)
}
