package sandboxd

import (
	"errors"
	"fmt"
	"os/exec"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/fathom-agents/fathom/messages/fsp"
)

// roundTrip executes print(1) on ws and waits for its result.
func roundTrip(ws *websocket.Conn, id string) error {
	b, err := fsp.Encode(&fsp.Execute{Header: fsp.NewHeader(fsp.TypeExecute, id, time.Now()), Language: fsp.LangPython,
		Code: "print(1)", Limits: fsp.Limits{TimeoutMS: 30000, MemoryMB: 128}})
	if err != nil {
		return err
	}
	if err := ws.WriteMessage(websocket.TextMessage, b); err != nil {
		return err
	}
	out := ""
	for {
		_ = ws.SetReadDeadline(time.Now().Add(60 * time.Second))
		_, frame, err := ws.ReadMessage()
		if err != nil {
			return err
		}
		m, err := fsp.Decode(frame)
		if err != nil {
			return err
		}
		switch v := m.(type) {
		case *fsp.Output:
			out += v.Data
		case *fsp.Error:
			return v
		case *fsp.Result:
			if v.ExitCode == nil || *v.ExitCode != 0 || out != "1\n" {
				return fmt.Errorf("result %+v, stdout %q", v, out)
			}
			return nil
		}
	}
}

var benchModes = []Isolation{IsolationBwrap, IsolationRlimits}

func benchServer(b *testing.B, mode Isolation, maxConcurrent int) *testServer {
	b.Helper()
	if mode == IsolationBwrap {
		if _, err := exec.LookPath("bwrap"); err != nil {
			b.Skip("bubblewrap not installed")
		}
	}
	return newTestServer(b, func(c *Config) { c.Isolation = mode; c.MaxConcurrent = maxConcurrent })
}

// BenchmarkSandboxRoundTrip is one execute → result of print(1) over a WebSocket, one at
// a time: compare with BenchmarkBaselineExec.
func BenchmarkSandboxRoundTrip(b *testing.B) {
	for _, mode := range benchModes {
		b.Run(string(mode), func(b *testing.B) {
			s := benchServer(b, mode, 4)
			c := s.dial(b)
			b.ResetTimer()
			for i := range b.N {
				if err := roundTrip(c.ws, fmt.Sprintf("b%d", i)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkBaselineExec runs the same interpreter on print(1) directly, as the sandbox's
// floor.
func BenchmarkBaselineExec(b *testing.B) {
	rts, err := findRuntimes(nil)
	if err != nil || rts[fsp.LangPython].interp == "" {
		b.Skip("no python")
	}
	py := rts[fsp.LangPython].interp
	b.Logf("interpreter %s", py)
	for range b.N {
		out, err := exec.Command(py, "-c", "print(1)").Output()
		if err != nil || string(out) != "1\n" {
			b.Fatalf("%s: %q %v", py, out, err)
		}
	}
}

// BenchmarkSandboxConcurrent15 is 15 clients, each on its own connection, executing
// print(1) back to back; it reports executions per second.
func BenchmarkSandboxConcurrent15(b *testing.B) {
	const clients = 15
	for _, mode := range benchModes {
		b.Run(string(mode), func(b *testing.B) {
			s := benchServer(b, mode, DefaultConfig().MaxConcurrent)
			conns := make([]*client, clients)
			for i := range conns {
				conns[i] = s.dial(b)
			}
			var next atomic.Int64
			var wg sync.WaitGroup
			errs := make(chan error, clients)
			b.ResetTimer()
			start := time.Now()
			for i, c := range conns {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						n := next.Add(1)
						if n > int64(b.N) {
							return
						}
						if err := roundTrip(c.ws, fmt.Sprintf("c%d-%d", i, n)); err != nil {
							errs <- err
							return
						}
					}
				}()
			}
			wg.Wait()
			b.StopTimer()
			close(errs)
			if err := errors.Join(<-errs); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "execs/s")
		})
	}
}
