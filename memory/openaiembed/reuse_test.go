package openaiembed_test

import (
	"context"
	"testing"

	"github.com/fathom-agents/fathom/internal/httpclient/dialtest"
	"github.com/fathom-agents/fathom/memory/openaiembed"
)

// Concurrent embedding calls to one endpoint reuse their connections
// (internal/httpclient), with the default HTTP client and with a caller's client that
// names no transport.
func TestConcurrentCallsReuseConnections(t *testing.T) {
	for _, c := range dialtest.Cases() {
		t.Run(c.Name, func(t *testing.T) {
			srv := dialtest.New(t, []byte(`{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.5,0.5,0.5,0.5]}],"model":"m","usage":{"prompt_tokens":1,"total_tokens":1}}`))
			cl, err := openaiembed.New(openaiembed.Config{BaseURL: srv.URL + "/v1", APIKey: "k", Dimensions: 4, HTTPClient: c.HTTPClient})
			if err != nil {
				t.Fatal(err)
			}
			srv.ExpectReuse(t, 16, func() error {
				_, err := cl.Embed(context.Background(), []string{"hello"})
				return err
			})
		})
	}
}
