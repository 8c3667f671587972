package sandbox

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/fathom-agents/fathom/messages/fsp"
	"github.com/fathom-agents/fathom/tools"
)

func asToolError(t *testing.T, err error) *tools.ToolError {
	t.Helper()
	var te *tools.ToolError
	if !errors.As(err, &te) {
		t.Fatalf("want a *tools.ToolError, got %T: %v", err, err)
	}
	return te
}

// TestGarbageFrames: a frame that is not FSP is logged with its context and fails the
// connection's pending execution as non-retryable; the connection stays usable.
func TestGarbageFrames(t *testing.T) {
	garbage := make(chan bool, 4)
	rs := newRawServer(t, "tok", func(c *websocket.Conn, ex *fsp.Execute) {
		writeFrame(c, &fsp.Ack{Header: fsp.NewHeader(fsp.TypeAck, ex.ID, time.Now())})
		if ex.Code == "garbage" {
			_ = c.WriteMessage(websocket.TextMessage, []byte(`{"v":1,"type":"stdout","id":`+`"`+ex.ID+`","data":42}`+"\x00not json"))
			garbage <- true
			return
		}
		writeFrame(c, &fsp.StatusUpdate{Header: fsp.NewHeader(fsp.TypeStatus, ex.ID, time.Now()), Status: fsp.StatusCompleted})
		zero := 0
		writeFrame(c, &fsp.Result{Header: fsp.NewHeader(fsp.TypeResult, ex.ID, time.Now()), ExitCode: &zero, DurationMS: 1})
	})
	var logs logBuffer
	cfg := testConfig(rs.wsURL(), "tok", logs.logger())
	cfg.PoolSize, cfg.PoolOverflow = 1, 0
	p, _ := startPool(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	_, err := p.Execute(ctx, Request{Language: fsp.LangPython, Code: "garbage"})
	te := asToolError(t, err)
	if te.Type != tools.ErrSandbox || te.Retryable || !strings.Contains(te.Message, "malformed") {
		t.Fatalf("garbage frame: want a non-retryable sandbox error about a malformed frame, got %+v", te)
	}
	<-garbage
	out := logs.String()
	for _, want := range []string{"malformed frame", "not json", "pending=", "url="} {
		if !strings.Contains(out, want) {
			t.Errorf("the malformed frame's log lacks %q:\n%s", want, out)
		}
	}
	// The connection lives on: the next execution succeeds on it.
	res, err := p.Execute(ctx, Request{Language: fsp.LangPython, Code: "ok"})
	if err != nil || res.Status != fsp.StatusCompleted || res.ExitCode == nil || *res.ExitCode != 0 {
		t.Fatalf("after the garbage: res %+v, err %v", res, err)
	}
}

// TestErrorFrameMapping: the sandbox's error frames become the ToolErrors of the table.
func TestErrorFrameMapping(t *testing.T) {
	rs := newRawServer(t, "tok", func(c *websocket.Conn, ex *fsp.Execute) {
		code := fsp.Code(ex.Code)
		writeFrame(c, fsp.NewError(ex.ID, code, "because "+string(code), time.Now()))
	})
	cfg := testConfig(rs.wsURL(), "tok", discardLogger())
	p, _ := startPool(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, tc := range []struct {
		code      fsp.Code
		typ       tools.ErrorType
		retryable bool
	}{
		{fsp.CodeTimeout, tools.ErrTimeout, false},
		{fsp.CodeOOM, tools.ErrExecution, false},
		{fsp.CodeOutputLimit, tools.ErrExecution, false},
		{fsp.CodeLanguageNotSupported, tools.ErrExecution, false},
		{fsp.CodeInvalidRequest, tools.ErrExecution, false},
		{fsp.CodeSandboxOverloaded, tools.ErrSandbox, true},
		{fsp.CodeInternalError, tools.ErrSandbox, true},
		{fsp.CodeNetworkError, tools.ErrSandbox, true},
	} {
		_, err := p.Execute(ctx, Request{Language: fsp.LangPython, Code: string(tc.code), Timeout: 3 * time.Second})
		te := asToolError(t, err)
		if te.Type != tc.typ || te.Retryable != tc.retryable {
			t.Errorf("%s: got type %s retryable %v (%s), want %s %v", tc.code, te.Type, te.Retryable, te.Message, tc.typ, tc.retryable)
		}
		if tc.typ != tools.ErrTimeout && !strings.Contains(te.Message, string(tc.code)) {
			t.Errorf("%s: the message does not name the code: %s", tc.code, te.Message)
		}
	}
}

// TestStreamingAndAccumulation: output chunks reach the live sink in order and the
// result accumulates them.
func TestStreamingAndAccumulation(t *testing.T) {
	rs := newRawServer(t, "tok", func(c *websocket.Conn, ex *fsp.Execute) {
		h := func(tp fsp.Type) fsp.Header { return fsp.NewHeader(tp, ex.ID, time.Now()) }
		writeFrame(c, &fsp.Ack{Header: h(fsp.TypeAck)})
		writeFrame(c, &fsp.StatusUpdate{Header: h(fsp.TypeStatus), Status: fsp.StatusRunning})
		writeFrame(c, &fsp.Output{Header: h(fsp.TypeStdout), Data: "one\n"})
		writeFrame(c, &fsp.Output{Header: h(fsp.TypeStderr), Data: "warn\n"})
		writeFrame(c, &fsp.Output{Header: h(fsp.TypeStdout), Data: "two\n"})
		writeFrame(c, &fsp.StatusUpdate{Header: h(fsp.TypeStatus), Status: fsp.StatusFailed})
		three := 3
		writeFrame(c, &fsp.Result{Header: h(fsp.TypeResult), ExitCode: &three, DurationMS: 12,
			ResourceUsage: &fsp.ResourceUsage{PeakMemoryMB: 5, CPUTimeMS: 2}})
	})
	p, _ := startPool(t, testConfig(rs.wsURL(), "tok", discardLogger()))
	var chunks []Chunk
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := p.Execute(ctx, Request{Language: fsp.LangShell, Code: "x", Output: func(c Chunk) { chunks = append(chunks, c) }})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != fsp.StatusFailed || *res.ExitCode != 3 || res.Stdout != "one\ntwo\n" || res.Stderr != "warn\n" ||
		res.DurationMS != 12 || res.ResourceUsage == nil || res.ResourceUsage.PeakMemoryMB != 5 {
		t.Fatalf("result %+v", res)
	}
	if len(chunks) != 3 || chunks[0].Data != "one\n" || chunks[1].Stream != fsp.TypeStderr || chunks[2].Data != "two\n" {
		t.Fatalf("chunks %+v", chunks)
	}
}
