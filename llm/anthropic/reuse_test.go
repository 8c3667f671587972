package anthropic_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/fathom-agents/fathom/internal/httpclient/dialtest"
	"github.com/fathom-agents/fathom/llm"
	"github.com/fathom-agents/fathom/llm/anthropic"
)

// Concurrent calls to one endpoint reuse their connections (internal/httpclient), with
// the client's default HTTP client and with a caller's client that names no transport.
func TestConcurrentCallsReuseConnections(t *testing.T) {
	const calls = 16
	for _, c := range []struct {
		name string
		hc   *http.Client
	}{
		{"default client", nil},
		{"caller's client without transport", &http.Client{Timeout: time.Minute}},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := dialtest.New(t, []byte(`{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[{"type":"text","text":"ok"}],"stop_reason":"end_turn","usage":{"input_tokens":1,"output_tokens":1}}`))
			cl, err := anthropic.New(anthropic.Config{BaseURL: srv.URL, APIKey: "k", Model: "m", HTTPClient: c.hc})
			if err != nil {
				t.Fatal(err)
			}
			dialed := srv.Rounds(t, 3, calls, func() error {
				_, err := cl.Chat(context.Background(), llm.Request{Messages: []llm.Message{{Role: "user", Content: "hi"}}})
				return err
			})
			if dialed != calls {
				t.Fatalf("3 rounds of %d concurrent calls opened %d connections, want %d (one per call in flight, reused by later rounds)", calls, dialed, calls)
			}
		})
	}
}
