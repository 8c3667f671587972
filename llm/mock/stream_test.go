package mock_test

import (
	"context"
	"errors"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/fathom-agents/fathom/llm"
	"github.com/fathom-agents/fathom/llm/mock"
)

func streamServer(t *testing.T, script string) *httptest.Server {
	t.Helper()
	s, err := mock.ParseScript([]byte(script))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(mock.New(mock.Config{Script: s}).Handler())
	t.Cleanup(srv.Close)
	return srv
}

func TestStreamedDeltasArriveInOrder(t *testing.T) {
	srv := streamServer(t, `{"default":"one two three four five"}`)
	var deltas []string
	resp, err := client(t, srv, "").Chat(context.Background(), llm.Request{
		Messages: []llm.Message{{Role: "user", Content: "count"}},
		OnDelta:  func(d string) { deltas = append(deltas, d) },
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(deltas) != 5 || strings.Join(deltas, "") != "one two three four five" || resp.Content != "one two three four five" {
		t.Fatalf("deltas %q, content %q", deltas, resp.Content)
	}
	if resp.FinishReason != "stop" || resp.Usage.TotalTokens == 0 || resp.Usage.TotalTokens != resp.Usage.InputTokens+resp.Usage.OutputTokens {
		t.Fatalf("finish %q usage %+v", resp.FinishReason, resp.Usage)
	}
}

func TestStreamedToolCallsAreAssembled(t *testing.T) {
	srv := streamServer(t, `{"rules":[{"match":".*","tool_calls":[
		{"name":"write_todos","arguments":"{\"todos\":[{\"content\":\"a\",\"status\":\"pending\"}]}"},
		{"name":"web_search","arguments":"{\"query\":\"actors\"}"}]}]}`)
	resp, err := client(t, srv, "").Chat(context.Background(), llm.Request{
		Messages: []llm.Message{{Role: "user", Content: "plan"}},
		OnDelta:  func(string) { t.Error("text delta for a tool-call answer") },
	})
	if err != nil {
		t.Fatal(err)
	}
	if resp.FinishReason != "tool_calls" || len(resp.ToolCalls) != 2 {
		t.Fatalf("%+v", resp)
	}
	if c := resp.ToolCalls[0]; c.Name != "write_todos" || c.Arguments != `{"todos":[{"content":"a","status":"pending"}]}` || c.ID == "" {
		t.Fatalf("first call %+v", c)
	}
	if c := resp.ToolCalls[1]; c.Name != "web_search" || c.Arguments != `{"query":"actors"}` {
		t.Fatalf("second call %+v", c)
	}
}

func TestCutAndMalformedStreams(t *testing.T) {
	srv := streamServer(t, `{"rules":[
		{"match":"cut","response":"this answer will be cut in the middle","cut_stream":true},
		{"match":"bad","response":"x","malformed":true}]}`)
	c := client(t, srv, "")
	var got []string
	_, err := c.Chat(context.Background(), llm.Request{Messages: []llm.Message{{Role: "user", Content: "cut"}}, OnDelta: func(d string) { got = append(got, d) }})
	if !errors.Is(err, io.ErrUnexpectedEOF) || !llm.IsRetryable(err) {
		t.Fatalf("cut stream: %v (retryable %v)", err, llm.IsRetryable(err))
	}
	if len(got) == 0 || strings.Join(got, "") == "this answer will be cut in the middle" {
		t.Fatalf("deltas before the cut: %q", got)
	}
	_, err = c.Chat(context.Background(), llm.Request{Messages: []llm.Message{{Role: "user", Content: "bad"}}, OnDelta: func(string) {}})
	if err == nil || !strings.Contains(err.Error(), "malformed stream chunk") {
		t.Fatalf("malformed stream: %v", err)
	}
	_, err = c.Chat(context.Background(), llm.Request{Messages: []llm.Message{{Role: "user", Content: "bad"}}})
	if err == nil || !strings.Contains(err.Error(), "decode") {
		t.Fatalf("malformed body: %v", err)
	}
}

// TestSlowStream: a chunk_delay_ms rule spaces its deltas, so a watcher sees the answer
// grow over time.
func TestSlowStream(t *testing.T) {
	srv := streamServer(t, `{"rules":[{"match":".*","response":"one two three four","chunk_delay_ms":60}]}`)
	var at []time.Time
	resp, err := client(t, srv, "").Chat(context.Background(), llm.Request{
		Messages: []llm.Message{{Role: "user", Content: "slow"}},
		OnDelta:  func(string) { at = append(at, time.Now()) },
	})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Content != "one two three four" || len(at) != 4 {
		t.Fatalf("content %q, %d deltas", resp.Content, len(at))
	}
	if spread := at[3].Sub(at[0]); spread < 150*time.Millisecond {
		t.Fatalf("the deltas came within %s: not spaced by the chunk delay", spread)
	}
}
