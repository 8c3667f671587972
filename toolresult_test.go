package fathom_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/fathom-agents/fathom"
	"github.com/fathom-agents/fathom/actors/session/core"
	"github.com/fathom-agents/fathom/gateway"
	"github.com/fathom-agents/fathom/internal/backends"
	"github.com/fathom-agents/fathom/internal/fathomtest"
	"github.com/fathom-agents/fathom/internal/testenv"
	"github.com/fathom-agents/fathom/llm/mock"
	"github.com/fathom-agents/fathom/messages"
	"github.com/fathom-agents/fathom/persistence"
	"github.com/fathom-agents/fathom/persistence/bolt"
	"github.com/fathom-agents/fathom/tools"
)

// bigResult is n bytes without a space: a head, filler and a tail, each recognisable.
func bigResult(tag string, n int) string {
	head, tail := tag+"-HEAD-", "-"+tag+"-TAIL"
	return head + strings.Repeat("x", n-len(head)-len(tail)) + tail
}

// TestLargeToolResultsAreStoredAsArtifacts: in one session the model calls a Go tool of
// the program that answers 4 MiB and a tool of an MCP server (the official Go SDK over
// streamable HTTP) that answers 1 MiB, neither with a space, and a Go tool that fails
// with a 600 KiB message. The session completes; the model read each result's head and
// tail around "[truncated: N bytes; full result stored as artifact
// {id}/results/{call_id} ...]"; the journal holds no event near 1 MiB, each tool_result
// (the failure too) keeps that note, an artifact_written event of type results with the
// full size precedes it, and the gateway's artifact route serves the whole result.
func TestLargeToolResultsAreStoredAsArtifacts(t *testing.T) {
	const goBytes, mcpBytes = 4 << 20, 1 << 20
	goOut, mcpOut := bigResult("GO", goBytes), bigResult("MCP", mcpBytes)
	// A failure's message is in its event twice (message, llm_text): 600 KiB is over 1 MiB.
	failMsg := bigResult("FAIL", 600<<10)

	mcpServer := sdk.NewServer(&sdk.Implementation{Name: "docs", Version: "1"}, nil)
	sdk.AddTool(mcpServer, &sdk.Tool{Name: "blob", Description: "Returns a large document."},
		func(context.Context, *sdk.CallToolRequest, struct{}) (*sdk.CallToolResult, any, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: mcpOut}}}, nil, nil
		})
	mcpHTTP := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return mcpServer }, nil))
	defer mcpHTTP.Close()

	// The model answers "read both previews" only when its context holds each result's
	// head, the note naming the artifact and the full size, and the tail.
	seen := func(tag string, n int) string {
		return tag + `-HEAD-x+\n…\n\[truncated: ` + strconv.Itoa(n) + ` bytes; full result stored as artifact \S+/results/call_\S+ [^\]]*\]\n…\nx+-` + tag + `-TAIL`
	}
	goSeen, mcpSeen := seen("GO", goBytes), seen("MCP", mcpBytes)
	script := mock.Script{Rules: []mock.Rule{
		{SystemMatch: "FATHOM-ROLE: orchestrator", Response: `{"steps":[{"id":"s","type":"custom","description":"read both documents"}]}`},
		{ToolMatch: ".", ContextMatch: "(?s)(" + goSeen + ".*" + mcpSeen + "|" + mcpSeen + ".*" + goSeen + ")", Response: "read both previews"},
		{ToolMatch: ".", Response: "a note is missing"},
		{SystemMatch: "FATHOM-ROLE: executor", ToolCalls: []mock.ToolCallRule{{Name: "bigfile", Arguments: "{}"}, {Name: "docs__blob", Arguments: "{}"}, {Name: "bigfail", Arguments: "{}"}}},
	}}

	cfg := fathomtest.Config(t, fathomtest.Model(t, script))
	cfg.MCPServers = []fathom.MCPServer{{Name: "docs", URL: mcpHTTP.URL}}
	cfg.Tools = []tools.Tool{tools.MustNew("bigfile", "Returns a large file.", tools.SandboxNone, func(context.Context, struct{}) (any, error) {
		return goOut, nil
	}), tools.MustNew("bigfail", "Fails at length.", tools.SandboxNone, func(context.Context, struct{}) (any, error) {
		return nil, errors.New(failMsg)
	})}
	if cfg.Session.MaxToolResult() != 256<<10 {
		t.Fatalf("default cap %d, want 256 KiB", cfg.Session.MaxToolResult())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	n, err := fathom.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			_ = n.Close(ctx)
		}
	}()
	id, err := n.StartSession(ctx, fathom.SessionRequest{Goal: "read the big documents"})
	if err != nil {
		t.Fatal(err)
	}
	var st *messages.SessionState
	testenv.Eventually(t, 60*time.Second, func() bool {
		st, err = n.State(ctx, id)
		return err == nil && st.GetStatus() == messages.SessionStatus_SESSION_STATUS_COMPLETED
	}, "session %s never completed (last: %v)", id, st.GetStatus())
	if st.GetResult() != "read both previews" {
		t.Fatalf("the model did not read both previews with their notes: result %q", st.GetResult())
	}

	h, err := n.Gateway(ctx, gateway.Config{})
	if err != nil {
		t.Fatal(err)
	}
	gw := httptest.NewServer(h)
	defer gw.Close()
	defer h.Shutdown(context.Background())
	artifactBody := func(path string) string {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, gw.URL+"/v1/sessions/"+id+"/artifacts/"+strings.TrimPrefix(path, id+"/"), nil)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		if err != nil || res.StatusCode != http.StatusOK {
			t.Fatalf("GET artifact %s: %d %v %.200s", path, res.StatusCode, err, b)
		}
		return string(b)
	}

	bodies := map[string]string{} // by path
	for _, a := range st.GetArtifacts() {
		if a.GetArtifactType() == "results" {
			bodies[a.GetPath()] = artifactBody(a.GetPath())
		}
	}

	// The journal, read as it is stored, once the node is closed.
	h.Shutdown(context.Background())
	if err := n.Close(ctx); err != nil {
		t.Fatal(err)
	}
	closed = true
	j, err := bolt.Open(filepath.Join(cfg.DataDir, backends.JournalFile), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	written := map[string]*messages.ArtifactWritten{} // by call id
	var results []*messages.ToolResult
	err = j.Load(ctx, id, 0, func(r persistence.Record) error {
		if len(r.Data) > 64<<10 {
			t.Errorf("event %d (%s) is %d bytes", r.Seq, r.Type, len(r.Data))
		}
		ev, err := core.DecodeRecord(r)
		if err != nil {
			return err
		}
		if a := ev.GetArtifactWritten(); a != nil {
			written[a.GetCallId()] = a
		}
		if tr := ev.GetToolResult(); tr != nil {
			results = append(results, tr)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != 3 {
		t.Fatalf("%d tool results, want 3", len(results))
	}
	full := map[string]string{"bigfile": goOut, "docs__blob": mcpOut}
	for _, tr := range results {
		a := written[tr.GetCallId()]
		path := id + "/results/" + tr.GetCallId()
		if tr.GetTool() == "bigfail" {
			f := tr.GetError()
			switch {
			case f == nil || f.GetErrorType() != "execution":
				t.Fatalf("bigfail's result is not its execution failure: %v", f)
			case a == nil || a.GetPath() != path || !strings.Contains(bodies[path], failMsg) || a.GetSize() != uint64(len(bodies[path])):
				t.Fatalf("bigfail's failure text is not stored whole at %s: %v (%d bytes served)", path, a, len(bodies[path]))
			case len(f.GetMessage())+len(f.GetLlmText()) > 4*core.ToolResultPreviewBytes+2048 ||
				!strings.Contains(f.GetLlmText(), "[truncated: "+strconv.Itoa(len(bodies[path]))+" bytes; full result stored as artifact "+path+" "):
				t.Fatalf("bigfail's failure keeps %d+%d bytes, or lacks the note:\n%s", len(f.GetMessage()), len(f.GetLlmText()), f.GetLlmText())
			}
			continue
		}
		want := full[tr.GetTool()]
		switch {
		case tr.GetError() != nil:
			t.Fatalf("%s failed: %v", tr.GetTool(), tr.GetError())
		case a == nil:
			t.Fatalf("no artifact_written for %s's call %s (have %v)", tr.GetTool(), tr.GetCallId(), written)
		case a.GetPath() != path || a.GetArtifactType() != "results" || a.GetSize() != uint64(len(want)):
			t.Fatalf("artifact_written of %s: %v, want %s of %d bytes", tr.GetTool(), a, path, len(want))
		case len(tr.GetResult()) > 2*core.ToolResultPreviewBytes+1024:
			t.Fatalf("tool_result of %s keeps %d bytes", tr.GetTool(), len(tr.GetResult()))
		case !strings.Contains(tr.GetResult(), "[truncated: "+strconv.Itoa(len(want))+" bytes; full result stored as artifact "+path+" "):
			t.Fatalf("tool_result of %s lacks the note with %s and %d bytes:\n%s", tr.GetTool(), path, len(want), tr.GetResult())
		case !strings.HasPrefix(tr.GetResult(), want[:core.ToolResultPreviewBytes]) || !strings.HasSuffix(tr.GetResult(), want[len(want)-core.ToolResultPreviewBytes:]):
			t.Fatalf("tool_result of %s does not keep the result's head and tail", tr.GetTool())
		case bodies[path] != want:
			t.Fatalf("the gateway served %d bytes of artifact %s, want the whole result of %s (%d bytes)", len(bodies[path]), path, tr.GetTool(), len(want))
		}
	}
}
