package openaiembed_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/fathom-agents/fathom/internal/httpclient/dialtest"
	"github.com/fathom-agents/fathom/memory/openaiembed"
)

// Concurrent embedding calls to one endpoint reuse their connections
// (internal/httpclient), with the default HTTP client and with a caller's client that
// names no transport.
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
			srv := dialtest.New(t, []byte(`{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.5,0.5,0.5,0.5]}],"model":"m","usage":{"prompt_tokens":1,"total_tokens":1}}`))
			cl, err := openaiembed.New(openaiembed.Config{BaseURL: srv.URL + "/v1", APIKey: "k", Dimensions: 4, HTTPClient: c.hc})
			if err != nil {
				t.Fatal(err)
			}
			dialed := srv.Rounds(t, 3, calls, func() error {
				_, err := cl.Embed(context.Background(), []string{"hello"})
				return err
			})
			if dialed != calls {
				t.Fatalf("3 rounds of %d concurrent calls opened %d connections, want %d (one per call in flight, reused by later rounds)", calls, dialed, calls)
			}
		})
	}
}
