package openai_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/fathom-agents/fathom/llm"
	"github.com/fathom-agents/fathom/llm/llmtest"
	"github.com/fathom-agents/fathom/llm/mock"
	"github.com/fathom-agents/fathom/llm/openai"
)

// benchRequest is a step of a session as the step runner sends it: a system prompt, a
// history with a tool round trip, and the tools.
func benchRequest() llm.Request { return llmtest.StepRequest("gpt-4o-mini") }

// BenchmarkClientOverhead measures one chat call through the SDK-based client against
// the same in-process mock-llm over loopback HTTP, JSON and streamed, and the bare POST
// of a body encoded beforehand (json only). The difference is the client's own cost:
// encoding the request, decoding the answer, the SDK's option and middleware machinery.
// Run them in one process, interleaved, e.g.
//
//	go test -run '^$' -bench ClientOverhead -benchmem -count 5 ./llm/openai/
func BenchmarkClientOverhead(b *testing.B) {
	script, err := mock.ParseScript([]byte(`{"default":"The summary: actors isolate state, messages carry work, supervisors restart what fails."}`))
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(mock.New(mock.Config{Script: script}).Handler())
	defer srv.Close()
	hc := &http.Client{Timeout: time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	sdk, err := openai.New(openai.Config{BaseURL: srv.URL + "/v1", HTTPClient: hc, Timeout: time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	bare, err := newBareClient(hc, srv.URL+"/v1/chat/completions", benchRequest())
	if err != nil {
		b.Fatal(err)
	}
	clients := []struct {
		name string
		p    llm.Provider
	}{{"sdk", sdk}, {"bare", bare}}
	for _, stream := range []bool{false, true} {
		for _, c := range clients {
			mode := "json"
			if stream {
				mode = "stream"
			}
			if stream && c.p == bare {
				continue
			}
			b.Run(mode+"/"+c.name, func(b *testing.B) {
				req := benchRequest()
				if stream {
					req.OnDelta = func(string) {}
				}
				ctx := context.Background()
				b.ReportAllocs()
				for b.Loop() {
					resp, err := c.p.Chat(ctx, req)
					if err != nil || resp.Content == "" {
						b.Fatalf("%s: %q, %v", c.name, resp.Content, err)
					}
				}
			})
		}
	}
}

// bareClient is the floor of a call: the request's body encoded once beforehand, then
// per call a POST over the same pooled connection and the answer read whole, without
// decoding it. BenchmarkClientOverhead/json/bare is the baseline of the SDK client's
// per-call overhead (benchtable row llm-client).
type bareClient struct {
	hc   *http.Client
	url  string
	body []byte
}

// newBareClient encodes req as a chat completions body for url.
func newBareClient(hc *http.Client, url string, req llm.Request) (*bareClient, error) {
	type fn struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	}
	type call struct {
		ID       string `json:"id"`
		Type     string `json:"type"`
		Function fn     `json:"function"`
	}
	type msg struct {
		Role       string `json:"role"`
		Content    string `json:"content"`
		ToolCalls  []call `json:"tool_calls,omitempty"`
		ToolCallID string `json:"tool_call_id,omitempty"`
	}
	type tool struct {
		Type     string         `json:"type"`
		Function map[string]any `json:"function"`
	}
	body := struct {
		Model     string `json:"model"`
		Messages  []msg  `json:"messages"`
		MaxTokens int    `json:"max_completion_tokens"`
		Tools     []tool `json:"tools"`
	}{Model: req.Model, MaxTokens: req.MaxTokens}
	for _, m := range req.Messages {
		w := msg{Role: m.Role, Content: m.Content, ToolCallID: m.ToolCallID}
		for _, c := range m.ToolCalls {
			w.ToolCalls = append(w.ToolCalls, call{ID: c.ID, Type: "function", Function: fn{Name: c.Name, Arguments: c.Arguments}})
		}
		body.Messages = append(body.Messages, w)
	}
	for _, t := range req.Tools {
		body.Tools = append(body.Tools, tool{Type: "function", Function: map[string]any{"name": t.Name, "description": t.Description, "parameters": t.Parameters}})
	}
	data, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("encode bare request: %w", err)
	}
	return &bareClient{hc: hc, url: url, body: data}, nil
}

func (c *bareClient) Name() string { return "bare" }

// Chat posts the pre-encoded body (req is ignored) and returns the raw answer as Content.
func (c *bareClient) Chat(ctx context.Context, _ llm.Request) (llm.Response, error) {
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(c.body))
	if err != nil {
		return llm.Response{}, err
	}
	hr.Header.Set("Content-Type", "application/json")
	resp, err := c.hc.Do(hr)
	if err != nil {
		return llm.Response{}, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return llm.Response{}, fmt.Errorf("bare call: HTTP %d: %s, %v", resp.StatusCode, data, err)
	}
	return llm.Response{Content: string(data)}, nil
}
