package anthropic_test

import (
	"context"
	"testing"

	"github.com/fathom-agents/fathom/internal/httpclient/dialtest"
	"github.com/fathom-agents/fathom/llm"
	"github.com/fathom-agents/fathom/llm/anthropic"
)

// Concurrent calls to one endpoint reuse their connections (internal/httpclient), with
// the client's default HTTP client and with a caller's client that names no transport.
func TestConcurrentCallsReuseConnections(t *testing.T) {
	for _, c := range dialtest.Cases() {
		t.Run(c.Name, func(t *testing.T) {
			srv := dialtest.New(t, []byte(`{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[{"type":"text","text":"ok"}],"stop_reason":"end_turn","usage":{"input_tokens":1,"output_tokens":1}}`))
			cl, err := anthropic.New(anthropic.Config{BaseURL: srv.URL, APIKey: "k", Model: "m", HTTPClient: c.HTTPClient})
			if err != nil {
				t.Fatal(err)
			}
			srv.ExpectReuse(t, 16, func() error {
				_, err := cl.Chat(context.Background(), llm.Request{Messages: []llm.Message{{Role: "user", Content: "hi"}}})
				return err
			})
		})
	}
}
