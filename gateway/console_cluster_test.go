package gateway_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/fathom-agents/fathom/internal/buildinfo"
	"github.com/fathom-agents/fathom/internal/testenv"
	"github.com/fathom-agents/fathom/persistence/journaltest"
)

// TestConsoleClusterPage drives the console's cluster page in headless Chromium
// (scripts/console-cluster-e2e.mjs, playwright-core): the member is listed with its
// build version and the session it hosts (one waiting for a human answer), and the
// restarts feed, holding the forced restarts of two sessions, narrows to one session's
// when filtered by session, and to none for another member's.
func TestConsoleClusterPage(t *testing.T) {
	playwright, chromium := testenv.ConsoleBrowser(t)
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skipf("node not found: %v", err)
	}
	var cj *journaltest.Faulty
	g := startGW(t, gwOpts{script: humanScript(t), journal: crashOnce(&cj)})
	restarts := func() string {
		req, _ := http.NewRequest("GET", g.srv.URL+"/v1/restarts", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return ""
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	// Two forced restarts: each session's grain panics in its first append.
	for _, id := range []string{"crash-a", "crash-b"} {
		cj.PanicNextAppend()
		_, _ = call(t, g.srv, "POST", "/v1/sessions", token, []byte(`{"goal":"crash me","session_id":"`+id+`"}`))
		testenv.Eventually(t, 30*time.Second, func() bool { return strings.Contains(restarts(), `"session_id":"`+id+`"`) },
			"the forced restart of %s is not in /v1/restarts", id)
	}
	// crash-a and crash-b run on (the demo plan) and end; hosted-1 waits for a human answer.
	if code, body := call(t, g.srv, "POST", "/v1/sessions", token, []byte(`{"goal":"Print copies of a haiku","session_id":"hosted-1"}`)); code != 201 {
		t.Fatalf("start hosted-1: %d %v", code, body)
	}
	testenv.Eventually(t, 60*time.Second, func() bool {
		_, out := call(t, g.srv, "GET", "/v1/cluster", token, nil)
		ds, _ := out["member_details"].([]any)
		if len(ds) != 1 {
			return false
		}
		m := ds[0].(map[string]any)
		_, body := call(t, g.srv, "GET", "/v1/sessions/hosted-1", token, nil)
		st, _ := body["state"].(map[string]any)
		return m["sessions_hosted"] == 1.0 && st["status"] == "SESSION_STATUS_AWAITING_HUMAN"
	}, "the member never hosted exactly hosted-1")

	_, file, _, _ := runtime.Caller(0)
	script := filepath.Join(filepath.Dir(file), "..", "scripts", "console-cluster-e2e.mjs")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	shots := os.Getenv("FATHOM_CONSOLE_SCREENSHOTS")
	cmd := exec.CommandContext(ctx, node, script)
	cmd.Env = append(os.Environ(), "CONSOLE_URL="+g.srv.URL+"/console/", "WRITE_TOKEN="+token,
		"PLAYWRIGHT_DIR="+playwright, "CHROMIUM="+chromium, "SCREENSHOTS="+shots,
		"VERSION="+buildinfo.String(), "HOSTED=1", "RESTART_SESSIONS=crash-a,crash-b")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	t.Logf("console-cluster-e2e:\n%s", out.String())
	if err != nil {
		t.Fatalf("the cluster page's end-to-end run failed: %v", err)
	}
}
