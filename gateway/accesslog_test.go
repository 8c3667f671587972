package gateway_test

import (
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fathom-agents/fathom/gateway"
	"github.com/fathom-agents/fathom/internal/testenv"
)

// TestAccessLog: every request is logged once answered (method, path, status, bytes,
// duration), health checks at debug, never the token; a WebSocket upgrade still works
// through the logging writer.
func TestAccessLog(t *testing.T) {
	t.Parallel()
	var logs testenv.Buffer
	g := startFake(t, gwOpts{cfg: func(c *gateway.Config) {
		c.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}})
	req, _ := http.NewRequest("GET", g.srv.URL+"/v1/sessions/no-such-session", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if _, err := http.Get(g.srv.URL + "/healthz"); err != nil {
		t.Fatal(err)
	}
	c := g.mustDial(token) // the upgrade goes through the access log's writer
	c.send(map[string]any{"op": "state", "session_id": "no-such-session", "id": 1})
	if f := c.next("error", 10*time.Second); f["code"] != "not_found" {
		t.Fatalf("state over the upgraded connection: %v", f)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(logs.String(), "path=/v1/sessions/no-such-session status=404") {
		if time.Now().After(deadline) {
			t.Fatalf("no access line for the 404:\n%s", logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	out := logs.String()
	if !strings.Contains(out, `msg="http request" method=GET path=/v1/sessions/no-such-session status=404 bytes=`) || !strings.Contains(out, "duration_ms=") {
		t.Fatalf("access line:\n%s", out)
	}
	if strings.Contains(out, "/healthz") {
		t.Errorf("a health check was logged at info:\n%s", out)
	}
	if strings.Contains(out, token) {
		t.Errorf("the token was logged:\n%s", out)
	}
}
