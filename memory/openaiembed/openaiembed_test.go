package openaiembed_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/fathom-agents/fathom/llm"
	"github.com/fathom-agents/fathom/llm/mock"
	"github.com/fathom-agents/fathom/memory/hashembed"
	"github.com/fathom-agents/fathom/memory/openaiembed"
)

// TestAgainstMockLLM: the client against llm/mock's POST /v1/embeddings, in process.
// The mock serves the feature-hashing embeddings, so the answers must equal hashembed's.
func TestAgainstMockLLM(t *testing.T) {
	var requests atomic.Int32
	m := mock.New(mock.Config{Script: mock.DemoScript(), Token: "k"})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		m.Handler().ServeHTTP(w, r)
	}))
	defer srv.Close()
	c, err := openaiembed.New(openaiembed.Config{BaseURL: srv.URL + "/v1", APIKey: "k", Dimensions: 64, MaxBatch: 3})
	if err != nil {
		t.Fatal(err)
	}
	texts := make([]string, 7)
	for i := range texts {
		texts[i] = fmt.Sprintf("message number %d about actors", i)
	}
	vecs, err := c.Embed(context.Background(), texts)
	if err != nil {
		t.Fatal(err)
	}
	if len(vecs) != 7 || requests.Load() != 3 {
		t.Fatalf("%d vectors in %d requests, want 7 in 3", len(vecs), requests.Load())
	}
	for i, v := range vecs {
		want := hashembed.Vector(texts[i], 64)
		for j := range want {
			if v[j] != want[j] {
				t.Fatalf("text %d component %d: %v, want %v", i, j, v[j], want[j])
			}
		}
	}

	// Wrong key: an *llm.APIError, not retryable.
	bad, _ := openaiembed.New(openaiembed.Config{BaseURL: srv.URL + "/v1", APIKey: "nope", Dimensions: 64})
	_, err = bad.Embed(context.Background(), []string{"x"})
	var apiErr *llm.APIError
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusUnauthorized || llm.IsRetryable(err) {
		t.Fatalf("bad key: %v", err)
	}
}

func TestErrors(t *testing.T) {
	if _, err := openaiembed.New(openaiembed.Config{BaseURL: "ftp://x", Dimensions: 3}); err == nil {
		t.Error("bad URL accepted")
	}
	if _, err := openaiembed.New(openaiembed.Config{BaseURL: "http://x"}); err == nil {
		t.Error("missing dimensions accepted")
	}
	answers := map[string]string{
		"/short/embeddings": `{"data":[{"index":0,"embedding":[1,2]}]}`,
		"/count/embeddings": `{"data":[]}`,
		"/index/embeddings": `{"data":[{"index":5,"embedding":[1,2,3]}]}`,
		"/junk/embeddings":  `{"data":`,
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/busy/embeddings" {
			w.Header().Set("Retry-After", "2")
			w.WriteHeader(http.StatusTooManyRequests)
			fmt.Fprint(w, `{"error":{"message":"slow down","type":"rate_limit"}}`)
			return
		}
		fmt.Fprint(w, answers[r.URL.Path])
	}))
	defer srv.Close()
	for p := range answers {
		c, err := openaiembed.New(openaiembed.Config{BaseURL: srv.URL + p[:len(p)-len("/embeddings")], Dimensions: 3, OmitDimensions: true})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Embed(context.Background(), []string{"a"}); err == nil {
			t.Errorf("%s: no error", p)
		}
	}
	c, _ := openaiembed.New(openaiembed.Config{BaseURL: srv.URL + "/busy", Dimensions: 3})
	_, err := c.Embed(context.Background(), []string{"a"})
	var apiErr *llm.APIError
	if !errors.As(err, &apiErr) || !llm.IsRetryable(err) || apiErr.Message != "slow down" || apiErr.RetryAfter.Seconds() != 2 {
		t.Fatalf("429: %v", err)
	}
}
