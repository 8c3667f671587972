package anthropic_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/fathom-agents/fathom/internal/httpclient/dialtest"
	"github.com/fathom-agents/fathom/llm"
	"github.com/fathom-agents/fathom/llm/anthropic"
)

// Concurrent calls to one endpoint reuse their connections (internal/httpclient), with
// the client's default HTTP client and with a caller's client that names no transport.
func TestConcurrentCallsReuseConnections(t *testing.T) {
	body := []byte(`{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[{"type":"text","text":"ok"}],"stop_reason":"end_turn","usage":{"input_tokens":1,"output_tokens":1}}`)
	dialtest.ExpectReuseInEachCase(t, body, 16, func(t *testing.T, url string, hc *http.Client) func() error {
		cl, err := anthropic.New(anthropic.Config{BaseURL: url, APIKey: "k", Model: "m", HTTPClient: hc})
		if err != nil {
			t.Fatal(err)
		}
		return func() error {
			_, err := cl.Chat(context.Background(), llm.Request{Messages: []llm.Message{{Role: "user", Content: "hi"}}})
			return err
		}
	})
}
