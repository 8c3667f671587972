package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/fathom-agents/fathom/actors/session"
	"github.com/fathom-agents/fathom/gateway"
	"github.com/fathom-agents/fathom/internal/node"
	"github.com/fathom-agents/fathom/internal/node/nodetest"
	"github.com/fathom-agents/fathom/internal/testenv"
	"github.com/fathom-agents/fathom/persistence"
)

const token = "s3cret-token"

// startGateway runs a real node (embedded journal, built-in demo model, local cluster)
// behind the gateway.
func startGateway(t *testing.T) (*httptest.Server, *node.Node) {
	t.Helper()
	cfg := node.Config{
		DataDir: t.TempDir(),
		Session: session.DefaultConfig(),
		Logger:  slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	cfg.Cluster.Provider = "local"
	cfg.Cluster.Name = "gw-" + gateway.NewID("t")
	n := nodetest.Start(t, cfg)
	h, err := gateway.New(gateway.Config{Token: token, Sessions: n.GatewaySessions(), Feed: n.Feed(), Logger: cfg.Logger})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv, n
}

func call(t *testing.T, srv *httptest.Server, method, path, auth string, body []byte) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, srv.URL+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", "Bearer "+auth)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if len(raw) > 0 && raw[0] == '{' {
		if err := json.Unmarshal(raw, &out); err != nil {
			t.Fatalf("%s %s: bad JSON %q: %v", method, path, raw, err)
		}
	}
	return resp.StatusCode, out
}

func errCode(m map[string]any) string {
	e, _ := m["error"].(map[string]any)
	s, _ := e["code"].(string)
	return s
}

func TestGatewayStartsAndReadsSessions(t *testing.T) {
	srv, n := startGateway(t)

	status, out := call(t, srv, "POST", "/v1/sessions", token,
		[]byte(`{"goal":"write a haiku","session_id":"gw-1","command_id":"c-1"}`))
	if status != http.StatusCreated || out["session_id"] != "gw-1" || out["duplicate"] != false {
		t.Fatalf("start = %d %v", status, out)
	}
	// A retry of the same command is acknowledged without a second start.
	status, out = call(t, srv, "POST", "/v1/sessions", token,
		[]byte(`{"goal":"write a haiku","session_id":"gw-1","command_id":"c-1"}`))
	if status != http.StatusCreated || out["duplicate"] != true {
		t.Fatalf("retry = %d %v", status, out)
	}
	testenv.Eventually(t, 20*time.Second, func() bool {
		_, st := call(t, srv, "GET", "/v1/sessions/gw-1", token, nil)
		s, _ := st["state"].(map[string]any)
		return s["status"] == "SESSION_STATUS_COMPLETED"
	}, "session gw-1 did not complete")
	_, st := call(t, srv, "GET", "/v1/sessions/gw-1", token, nil)
	if st["host"] != n.Address() {
		t.Errorf("host = %v, want %s", st["host"], n.Address())
	}
	// Exactly one session_started in the journal despite the retry.
	starts := 0
	err := n.Journal().Load(context.Background(), "gw-1", 0, func(r persistence.Record) error {
		if r.Type == "session_started" {
			starts++
		}
		return nil
	})
	if err != nil || starts != 1 {
		t.Fatalf("session_started events = %d (err %v), want 1", starts, err)
	}
}

func TestGatewayRejectsBadInput(t *testing.T) {
	t.Parallel()
	srv := startFake(t, gwOpts{}).srv
	big := `{"goal":"` + strings.Repeat("x", gateway.MaxBodyBytes) + `"}`
	for _, tc := range []struct {
		name, method, path, auth, body string
		status                         int
		code                           string
	}{
		{"no token", "POST", "/v1/sessions", "", `{"goal":"x"}`, 401, "unauthenticated"},
		{"wrong token", "GET", "/v1/sessions/x", "nope", "", 401, "unauthenticated"},
		{"malformed JSON", "POST", "/v1/sessions", token, `{"goal":`, 400, "invalid_argument"},
		{"unknown field", "POST", "/v1/sessions", token, `{"goal":"x","colour":"red"}`, 400, "invalid_argument"},
		{"empty goal", "POST", "/v1/sessions", token, `{"goal":"  "}`, 400, "invalid_argument"},
		{"oversize body", "POST", "/v1/sessions", token, big, 413, "invalid_argument"},
		{"unknown session", "GET", "/v1/sessions/never-started", token, "", 404, "not_found"},
		{"unknown route", "GET", "/v2/nothing", token, "", 404, "not_found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, out := call(t, srv, tc.method, tc.path, tc.auth, []byte(tc.body))
			if status != tc.status || errCode(out) != tc.code {
				t.Fatalf("= %d %v, want %d %s", status, out, tc.status, tc.code)
			}
		})
	}
	// Health needs no token.
	if status, _ := call(t, srv, "GET", "/healthz", "", nil); status != 200 {
		t.Errorf("healthz = %d", status)
	}
	if status, _ := call(t, srv, "GET", "/readyz", "", nil); status != 200 {
		t.Errorf("readyz = %d", status)
	}
}
