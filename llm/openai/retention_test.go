package openai_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"runtime/metrics"
	"strings"
	"testing"

	"github.com/fathom-agents/fathom/llm"
	"github.com/fathom-agents/fathom/llm/openai"
)

// TestResponseKeepsNoAnswerAlive checks that an llm.Response, which a session keeps for
// its life (its content, model and tool calls go into the history), does not keep the
// model's whole answer alive: the SDK's decoded strings are slices of the answer's text,
// so a response holding them holds every byte of the answer. Each answer here carries
// 256 kB the response does not need; holding 16 responses must not hold their answers.
func TestResponseKeepsNoAnswerAlive(t *testing.T) {
	const pad, calls = 256 << 10, 16
	padding := strings.Repeat("p", pad)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Accept") == "text/event-stream" {
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprintf(w, "data: {\"model\":\"m-served\",\"padding\":%q,\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\",\"tool_calls\":[{\"index\":0,\"id\":\"call_1\",\"type\":\"function\",\"function\":{\"name\":\"search\",\"arguments\":\"{\\\"q\\\":\\\"x\\\"}\"}}]},\"finish_reason\":\"tool_calls\"}]}\n\n", padding)
			fmt.Fprint(w, "data: [DONE]\n\n")
			return
		}
		fmt.Fprintf(w, `{"model":"m-served","padding":%q,"choices":[{"message":{"role":"assistant","content":"hello","tool_calls":[{"id":"call_1","type":"function","function":{"name":"search","arguments":"{\"q\":\"x\"}"}}]},"finish_reason":"tool_calls"}]}`, padding)
	}))
	defer srv.Close()
	c, err := openai.New(openai.Config{BaseURL: srv.URL + "/v1/", APIKey: "k", Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	for _, streamed := range []bool{false, true} {
		t.Run(fmt.Sprintf("streamed=%v", streamed), func(t *testing.T) {
			req := llm.Request{Messages: []llm.Message{{Role: "user", Content: "hi"}}}
			if streamed {
				req.OnDelta = func(string) {}
			}
			chat := func() llm.Response {
				resp, err := c.Chat(context.Background(), req)
				if err != nil {
					t.Fatal(err)
				}
				if len(resp.ToolCalls) != 1 || resp.ToolCalls[0].Name != "search" || resp.ToolCalls[0].Arguments != `{"q":"x"}` ||
					resp.ToolCalls[0].ID != "call_1" || resp.Model != "m-served" || resp.FinishReason != "tool_calls" {
					t.Fatalf("response %+v", resp)
				}
				return resp
			}
			chat() // the connection and the decoders' caches, before the baseline
			before := liveHeap()
			kept := make([]llm.Response, calls)
			for i := range kept {
				kept[i] = chat()
			}
			grown := liveHeap() - before
			runtime.KeepAlive(kept)
			if limit := int64(calls * pad / 4); grown > limit {
				t.Fatalf("%d responses keep %d bytes alive (more than %d): they hold their answers", calls, grown, limit)
			}
		})
	}
}

// liveHeap collects and returns the bytes of the heap objects the collection kept.
func liveHeap() int64 {
	runtime.GC()
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	return int64(s[0].Value.Uint64())
}
