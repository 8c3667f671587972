package gateway_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/fathom-agents/fathom/internal/testenv"
)

// TestConsoleMemoriesPage: the console's Memories page lists a user's long-term
// memories, searches them and deletes one, in a real browser
// (scripts/console-memories-e2e.mjs); the delete reaches the store.
func TestConsoleMemoriesPage(t *testing.T) {
	playwright, chromium := testenv.ConsoleBrowser(t)
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skipf("node not found: %v", err)
	}
	g := startGW(t, gwOpts{longTerm: true, script: rememberScript(t)})
	const text = "The user's locker code is LOCK-4417"
	if code, body := call(t, g.srv, "POST", "/v1/sessions", token, []byte(`{"goal":"REMEMBER `+text+`","user_id":"u1","session_id":"mem-console"}`)); code != 201 {
		t.Fatalf("start: %d %v", code, body)
	}
	waitSessionStatus(t, g, "mem-console", "SESSION_STATUS_COMPLETED")

	_, file, _, _ := runtime.Caller(0)
	script := filepath.Join(filepath.Dir(file), "..", "scripts", "console-memories-e2e.mjs")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, script)
	cmd.Env = append(os.Environ(), "CONSOLE_URL="+g.srv.URL+"/console/", "WRITE_TOKEN="+token,
		"PLAYWRIGHT_DIR="+playwright, "CHROMIUM="+chromium, "SCREENSHOTS="+os.Getenv("FATHOM_CONSOLE_SCREENSHOTS"),
		"MEMORY_USER=u1", "MEMORY_TEXT="+text, "MEMORY_QUERY=LOCK-4417")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	t.Logf("console-memories-e2e:\n%s", out.String())
	if err != nil {
		t.Fatalf("the memories page's end-to-end run failed: %v", err)
	}
	if _, body := fetchBody(t, g, "/v1/memories?user=u1"); strings.Contains(body, "LOCK-4417") {
		t.Fatalf("the memory deleted in the console is still in the store: %s", body)
	}
}

func fetchBody(t *testing.T, g *gw, path string) (int, string) {
	t.Helper()
	status, _, body := fetch(t, g, "GET", path, token, "")
	return status, string(body)
}
