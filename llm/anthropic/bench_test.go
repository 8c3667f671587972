package anthropic_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/fathom-agents/fathom/llm"
	"github.com/fathom-agents/fathom/llm/anthropic"
	"github.com/fathom-agents/fathom/llm/llmtest"
	"github.com/fathom-agents/fathom/llm/mock"
)

// benchRequest is a step of a session as the step runner sends it: a system prompt, a
// history with tool round trips, the tools, and the step's task prompt last.
func benchRequest() llm.Request {
	r := llmtest.StepRequest("claude-sonnet-4-5")
	r.PromptCache = true
	r.Messages = append(r.Messages, llm.Message{Role: "system", Content: "Current step: write the summary\n"})
	return r
}

// BenchmarkClientOverhead measures one Messages API call through the SDK-based client
// and a bare POST of the same body encoded beforehand (the answer read whole, not
// decoded), against the same in-process mock-llm over loopback HTTP: the difference is
// the client's own cost per call. Compare allocs/op and the sdk/bare ratio of one run:
//
//	go test -run '^$' -bench ClientOverhead -benchmem -count 5 ./llm/anthropic/
func BenchmarkClientOverhead(b *testing.B) {
	script, err := mock.ParseScript([]byte(`{"default":"The summary: actors isolate state, messages carry work, supervisors restart what fails."}`))
	if err != nil {
		b.Fatal(err)
	}
	rec := &recorder{}
	srv := httptest.NewServer(rec.wrap(mock.New(mock.Config{Script: script}).Handler()))
	defer srv.Close()
	hc := &http.Client{Timeout: time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	sdk, err := anthropic.New(anthropic.Config{BaseURL: srv.URL, HTTPClient: hc, Timeout: time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	// The bare client posts what the SDK client sent, recorded once.
	if _, err := sdk.Chat(context.Background(), benchRequest()); err != nil {
		b.Fatal(err)
	}
	body := rec.bodies[0]
	srv.Config.Handler = mock.New(mock.Config{Script: script}).Handler()
	bare := func() error {
		hr, err := http.NewRequestWithContext(context.Background(), http.MethodPost, srv.URL+"/v1/messages", bytes.NewReader(body))
		if err != nil {
			return err
		}
		hr.Header.Set("Content-Type", "application/json")
		hr.Header.Set("anthropic-version", anthropic.APIVersion)
		resp, err := hc.Do(hr)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		data, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK {
			return fmt.Errorf("bare call: HTTP %d: %s, %v", resp.StatusCode, data, err)
		}
		return nil
	}
	b.Run("json/sdk", func(b *testing.B) {
		req := benchRequest()
		b.ReportAllocs()
		for b.Loop() {
			if resp, err := sdk.Chat(context.Background(), req); err != nil || resp.Content == "" {
				b.Fatalf("%q, %v", resp.Content, err)
			}
		}
	})
	b.Run("json/bare", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := bare(); err != nil {
				b.Fatal(err)
			}
		}
	})
}
