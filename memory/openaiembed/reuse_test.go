package openaiembed_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/fathom-agents/fathom/internal/httpclient/dialtest"
	"github.com/fathom-agents/fathom/memory/openaiembed"
)

// Concurrent embedding calls to one endpoint reuse their connections
// (internal/httpclient), with the default HTTP client and with a caller's client that
// names no transport.
func TestConcurrentCallsReuseConnections(t *testing.T) {
	body := []byte(`{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.5,0.5,0.5,0.5]}],"model":"m","usage":{"prompt_tokens":1,"total_tokens":1}}`)
	dialtest.ExpectReuseInEachCase(t, body, 16, func(t *testing.T, url string, hc *http.Client) func() error {
		cl, err := openaiembed.New(openaiembed.Config{BaseURL: url + "/v1", APIKey: "k", Dimensions: 4, HTTPClient: hc})
		if err != nil {
			t.Fatal(err)
		}
		return func() error {
			_, err := cl.Embed(context.Background(), []string{"hello"})
			return err
		}
	})
}
