package fathom_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fathom-agents/fathom"
	"github.com/fathom-agents/fathom/actors/sandbox"
	"github.com/fathom-agents/fathom/gateway"
	"github.com/fathom-agents/fathom/internal/buildinfo"
	"github.com/fathom-agents/fathom/internal/fathomtest"
	"github.com/fathom-agents/fathom/internal/testenv"
)

// TestDeadSandboxMakesTheNodeNotReady: a sandbox no connection can reach makes GET
// /readyz answer 503 naming the sandbox (without a token: no address, no error text;
// with one: why), drops fathom_sandbox_pool_size to 0, and is logged once, not at
// every connection's every retry.
func TestDeadSandboxMakesTheNodeNotReady(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "ws://" + l.Addr().String() + "/v1/ws"
	l.Close() // nothing listens there any more: every dial is refused

	logs := &testenv.Buffer{}
	cfg := fathom.DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.Logger = slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	sc := sandbox.DefaultConfig()
	sc.URL, sc.APIKey, sc.PoolSize = dead, "secret", 3
	sc.InitialBackoff, sc.MaxBackoff, sc.MaxRetries = 10*time.Millisecond, 20*time.Millisecond, 1000
	cfg.Sandbox.Client = sc
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	n := fathomtest.Start(t, cfg)
	srv := fathomtest.Serve(t, n, gateway.Config{Token: "write-token"})
	get := func(path, tok string) (int, string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+path, nil)
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}

	var code int
	var body string
	testenv.Eventually(t, 30*time.Second, func() bool {
		code, body = get("/readyz", "")
		return code == http.StatusServiceUnavailable
	}, "GET /readyz stayed %d %s with a dead sandbox", code, body)
	if !strings.Contains(body, "sandbox is not ready") || strings.Contains(body, "127.0.0.1") || strings.Contains(body, "refused") {
		t.Errorf("GET /readyz without a token = %s, want the part and no address or error text", body)
	}
	if code, body := get("/readyz", "write-token"); code != http.StatusServiceUnavailable || !strings.Contains(body, "every connection to the sandbox fails") {
		t.Errorf("GET /readyz with a token = %d %s, want why", code, body)
	}
	if _, metrics := get("/metrics", "write-token"); !strings.Contains(metrics, "\nfathom_sandbox_pool_size 0\n") {
		t.Errorf("fathom_sandbox_pool_size is not 0:\n%s", metrics)
	}
	// Many retries later the sandbox was still logged once.
	testenv.Eventually(t, 30*time.Second, func() bool {
		return strings.Count(logs.String(), "sandbox dial failed; retrying") >= 30
	}, "the connections did not retry")
	loud := 0
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, "sandbox") && (strings.Contains(line, `"level":"WARN"`) || strings.Contains(line, `"level":"ERROR"`)) {
			loud++
		}
	}
	if loud != 1 {
		t.Errorf("%d WARN/ERROR lines about the sandbox, want 1:\n%s", loud, logs.String())
	}
}

// TestReadyzTellsTheBuild: GET /readyz still answers the plain "ready" probes expect,
// with the node's build version and journal format in the Fathom-Version and
// Fathom-Journal-Format headers, and as JSON to a request that accepts it.
func TestReadyzTellsTheBuild(t *testing.T) {
	cfg := fathom.DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.Logger = slog.New(slog.DiscardHandler)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	n := fathomtest.Start(t, cfg)
	srv := fathomtest.Serve(t, n, gateway.Config{Token: "write-token"})
	get := func(accept string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/readyz", nil)
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res, string(b)
	}
	want, format := buildinfo.String(), strconv.Itoa(buildinfo.Format)
	res, body := get("")
	if res.StatusCode != 200 || body != "ready\n" || res.Header.Get("Fathom-Version") != want || res.Header.Get("Fathom-Journal-Format") != format {
		t.Fatalf("GET /readyz = %d %q, Fathom-Version %q, Fathom-Journal-Format %q; want ready, %q, %s",
			res.StatusCode, body, res.Header.Get("Fathom-Version"), res.Header.Get("Fathom-Journal-Format"), want, format)
	}
	res, body = get("text/html, application/json;q=0.9")
	var r gateway.Readiness
	if err := json.Unmarshal([]byte(body), &r); err != nil || res.StatusCode != 200 || r != (gateway.Readiness{Status: "ready", Version: want, JournalFormat: buildinfo.Format}) {
		t.Fatalf("GET /readyz as JSON = %d %q (%v)", res.StatusCode, body, err)
	}
}

// TestGatewayOutlivesItsSetupContext: the context given to Node.Gateway bounds nothing
// after it returns: once it is cancelled, GET /readyz still answers ready (it answered
// "journal is not ready" for good when the readiness check inherited the cancellation).
func TestGatewayOutlivesItsSetupContext(t *testing.T) {
	cfg := fathom.DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.Logger = slog.New(slog.DiscardHandler)
	n := fathomtest.Start(t, cfg)
	setup, cancel := context.WithCancel(context.Background())
	h, err := n.Gateway(setup, gateway.Config{})
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	defer h.Shutdown(context.Background())
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /readyz after the setup context ended = %d %s, want 200", rec.Code, rec.Body)
	}
}
