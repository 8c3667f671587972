package gateway_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/fathom-agents/fathom/internal/testenv"
	"github.com/fathom-agents/fathom/persistence"
)

// sessionRows is the console's sessions table rows: the page has loaded when the 50th
// (the first page of the list) is visible.
const sessionRows = `[data-testid="sessions"] tbody tr`

// pageTimer is scripts/console-load.mjs: one headless Chromium that loads pages on
// request and tells how long each took.
type pageTimer struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Scanner
}

type pageLoad struct {
	MS    float64 `json:"ms"`
	HTML  string  `json:"html"`
	Error string  `json:"error"`
}

// startPageTimer starts the timer; it stops when tb ends (or after 10 minutes).
func startPageTimer(tb testing.TB, token string) *pageTimer {
	tb.Helper()
	playwright, chromium := testenv.ConsoleBrowser(tb)
	node, err := exec.LookPath("node")
	if err != nil {
		tb.Skipf("node not found: %v", err)
	}
	_, file, _, _ := runtime.Caller(0)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	cmd := exec.CommandContext(ctx, node, filepath.Join(filepath.Dir(file), "..", "scripts", "console-load.mjs"))
	cmd.Env = append(os.Environ(), "PLAYWRIGHT_DIR="+playwright, "CHROMIUM="+chromium, "TOKEN="+token)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		cancel()
		tb.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		cancel()
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		cancel()
		tb.Fatalf("start scripts/console-load.mjs: %v", err)
	}
	p := &pageTimer{cmd: cmd, in: in, out: bufio.NewScanner(out)}
	p.out.Buffer(make([]byte, 0, 64<<10), 16<<20)
	tb.Cleanup(func() {
		_ = in.Close()
		if err := cmd.Wait(); err != nil {
			tb.Logf("scripts/console-load.mjs: %v", err)
		}
		cancel()
	})
	return p
}

// load loads url in a fresh page until the nth match of selector is visible.
func (p *pageTimer) load(tb testing.TB, op, url, selector string, nth int) pageLoad {
	tb.Helper()
	req, _ := json.Marshal(map[string]any{"op": op, "url": url, "selector": selector, "nth": nth})
	if _, err := fmt.Fprintf(p.in, "%s\n", req); err != nil {
		tb.Fatalf("page timer: %v", err)
	}
	if !p.out.Scan() {
		tb.Fatalf("page timer stopped: %v", p.out.Err())
	}
	var res pageLoad
	if err := json.Unmarshal(p.out.Bytes(), &res); err != nil {
		tb.Fatalf("page timer answered %q: %v", p.out.Bytes(), err)
	}
	if res.Error != "" {
		tb.Fatalf("load %s: %s", url, res.Error)
	}
	return res
}

// BenchmarkConsoleLoad is the console's page load with 1,000 sessions in the index, in
// headless Chromium: navigation until the sessions page shows its first 50 rows (the
// page's script fetches the list from the gateway and renders it), in a fresh page each
// time; p50-ms is the median. Its baseline, in the same run and browser, is the same
// page as rendered (its DOM with the scripts removed, and the console's stylesheet) from
// a plain http.FileServer, until the same row is visible.
func BenchmarkConsoleLoad(b *testing.B) {
	var index indexedJournal
	g := startGW(b, gwOpts{journal: func(j persistence.Journal) persistence.Journal {
		index = j.(indexedJournal)
		return j
	}})
	seedSessions(b, index, 1000)
	timer := startPageTimer(b, token)
	console := g.srv.URL + "/console/"

	// The baseline page: what the console rendered, served as files.
	dump := timer.load(b, "dump", console, sessionRows, 49)
	dir := b.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "index.html"), []byte(dump.HTML), 0o600); err != nil {
		b.Fatal(err)
	}
	resp, err := http.Get(console + "console.css")
	if err != nil {
		b.Fatal(err)
	}
	css, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		b.Fatalf("GET console.css: %d %v", resp.StatusCode, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "console.css"), css, 0o600); err != nil {
		b.Fatal(err)
	}
	static := httptest.NewServer(http.FileServer(http.Dir(dir)))
	b.Cleanup(static.Close)

	for _, c := range []struct{ name, url string }{{"sessions=1000", console}, {"baseline=static", static.URL + "/"}} {
		b.Run(c.name, func(b *testing.B) {
			times := make([]float64, 0, b.N)
			for i := 0; i < b.N; i++ {
				times = append(times, timer.load(b, "load", c.url, sessionRows, 49).MS)
			}
			slices.Sort(times)
			b.ReportMetric(times[len(times)/2], "p50-ms")
		})
	}
}
