package sandbox

import (
	"context"
	"errors"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/fathom-agents/fathom/messages/fsp"
	"github.com/fathom-agents/fathom/tools"
)

// The benchmarks: the round trip of print(1) through pool + real sandbox, next
// to a bare exec of the same interpreter, and executions/s with 15 concurrent callers.
//
//	go test -run '^$' -bench . -benchtime 50x ./actors/sandbox/

func benchPool(b *testing.B, size int) *Pool {
	b.Helper()
	sb := startSandbox(b)
	cfg := testConfig(sb.url(), serverToken, discardLogger())
	cfg.PoolSize, cfg.PoolOverflow = size, 0
	p, _ := startPool(b, cfg)
	deadline := time.Now().Add(15 * time.Second)
	for {
		st, err := p.Stats(context.Background())
		if err == nil && st.Up == size {
			return p
		}
		if time.Now().After(deadline) {
			b.Fatalf("pool not up: %+v %v", st, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func BenchmarkRoundTripPrint1(b *testing.B) {
	p := benchPool(b, 1)
	ctx := context.Background()
	b.ResetTimer()
	for range b.N {
		res, err := p.Execute(ctx, Request{Language: fsp.LangPython, Code: "print(1)"})
		if err != nil || res.Stdout != "1\n" {
			b.Fatalf("%+v %v", res, err)
		}
	}
}

func BenchmarkBareExecPrint1(b *testing.B) {
	// The interpreter the sandbox picks (internal/sandboxd's order), with its flags.
	var py string
	for _, c := range []string{"/usr/bin/python3", "/usr/local/bin/python3", "python3"} {
		if p, err := exec.LookPath(c); err == nil {
			py = p
			break
		}
	}
	if py == "" {
		b.Skip("no python3")
	}
	for range b.N {
		out, err := exec.Command(py, "-u", "-c", "print(1)").Output()
		if err != nil || string(out) != "1\n" {
			b.Fatalf("%q %v", out, err)
		}
	}
}

func BenchmarkConcurrent15(b *testing.B) {
	p := benchPool(b, 15)
	ctx := context.Background()
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	work := make(chan struct{}, b.N)
	for range b.N {
		work <- struct{}{}
	}
	close(work)
	for range 15 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range work {
				// The sandbox answers SANDBOX_OVERLOADED past its concurrency bound: retry.
				for {
					_, err := p.Execute(ctx, Request{Language: fsp.LangPython, Code: "print(1)"})
					if err == nil {
						break
					}
					var te *tools.ToolError
					if !errors.As(err, &te) || !te.Retryable {
						b.Error(err)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "exec/s")
}
