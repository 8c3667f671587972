package anthropic_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/fathom-agents/fathom/llm"
	"github.com/fathom-agents/fathom/llm/anthropic"
	"github.com/fathom-agents/fathom/llm/mock"
)

// benchRequest is a step of a session as the step runner sends it: a system prompt, a
// history with tool round trips, the tools, and the step's task prompt last.
func benchRequest() llm.Request {
	schema := json.RawMessage(`{"type":"object","properties":{"query":{"type":"string"},"limit":{"type":"integer"}},"required":["query"]}`)
	msgs := []llm.Message{{Role: "system", Content: strings.Repeat("You are a careful research agent. ", 40)}}
	for i := range 4 {
		id := "call_" + string(rune('a'+i))
		msgs = append(msgs,
			llm.Message{Role: "user", Content: "Step: look into part " + string(rune('a'+i)) + " of the question and report"},
			llm.Message{Role: "assistant", ToolCalls: []llm.ToolCall{{ID: id, Name: "web_search", Arguments: `{"query":"actors"}`}}},
			llm.Message{Role: "tool", ToolCallID: id, Content: strings.Repeat("result line ", 30)},
			llm.Message{Role: "assistant", Content: "Part done: " + strings.Repeat("finding ", 20)})
	}
	msgs = append(msgs, llm.Message{Role: "user", Content: "Step: write the summary"}, llm.Message{Role: "system", Content: "Current step: write the summary\n"})
	return llm.Request{Model: "claude-sonnet-4-5", Messages: msgs, MaxTokens: 500, PromptCache: true, Tools: []llm.ToolSpec{
		{Name: "web_search", Description: "search the web", Parameters: schema},
		{Name: "read_file", Description: "read a file", Parameters: schema},
		{Name: "write_todos", Description: "plan", Parameters: schema},
	}}
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
