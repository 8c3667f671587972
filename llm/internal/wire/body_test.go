package wire_test

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/fathom-agents/fathom/llm"
	"github.com/fathom-agents/fathom/llm/anthropic"
	"github.com/fathom-agents/fathom/llm/openai"
)

// writeCounter counts the writes net/http makes to a connection.
type writeCounter struct{ writes, bytes int }

func (w *writeCounter) Write(p []byte) (int, error) {
	w.writes++
	w.bytes += len(p)
	return len(p), nil
}

// oneWriteTransport writes each request as net/http's transport does (Request.Write
// through a bufio.Writer onto the connection) and answers with a fixed body.
type oneWriteTransport struct {
	conn   writeCounter
	answer string
}

func (t *oneWriteTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	bw := bufio.NewWriterSize(&t.conn, 4<<10)
	if err := req.Write(bw); err != nil {
		return nil, err
	}
	if err := bw.Flush(); err != nil {
		return nil, err
	}
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}}, Request: req,
		Body: io.NopCloser(strings.NewReader(t.answer))}, nil
}

// TestRequestIsOneWrite: a model call's request (headers and a body that fits the
// connection's buffer) goes out in one write, not its headers first and its body
// after (which cost a system call and a packet more per call).
func TestRequestIsOneWrite(t *testing.T) {
	req := llm.Request{Messages: []llm.Message{{Role: "user", Content: strings.Repeat("question ", 100)}}, MaxTokens: 10}
	for _, tc := range []struct {
		name   string
		answer string
		chat   func(hc *http.Client) error
	}{
		{"openai", `{"choices":[{"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}]}`, func(hc *http.Client) error {
			c, err := openai.New(openai.Config{BaseURL: "http://model.test/v1", HTTPClient: hc})
			if err != nil {
				return err
			}
			_, err = c.Chat(context.Background(), req)
			return err
		}},
		{"anthropic", `{"id":"m","type":"message","role":"assistant","model":"c","content":[{"type":"text","text":"ok"}],"stop_reason":"end_turn","usage":{"input_tokens":1,"output_tokens":1}}`, func(hc *http.Client) error {
			c, err := anthropic.New(anthropic.Config{BaseURL: "http://model.test", APIKey: "k", HTTPClient: hc})
			if err != nil {
				return err
			}
			_, err = c.Chat(context.Background(), req)
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rt := &oneWriteTransport{answer: tc.answer}
			if err := tc.chat(&http.Client{Transport: rt}); err != nil {
				t.Fatal(err)
			}
			if rt.conn.writes != 1 {
				t.Fatalf("the request (%d bytes) went out in %d writes, want 1", rt.conn.bytes, rt.conn.writes)
			}
		})
	}
}
