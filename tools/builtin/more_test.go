package builtin_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/fathom-agents/fathom/tools"
	"github.com/fathom-agents/fathom/tools/builtin"
)

// TestSchemaDescriptionsAreWhole: every property of every built-in schema carries its
// full description (a comma inside `jsonschema:"description=..."` would cut it short).
func TestSchemaDescriptionsAreWhole(t *testing.T) {
	reg, err := builtin.Registry(builtin.Options{Artifacts: localStore(t, 0)})
	if err != nil {
		t.Fatal(err)
	}
	var walk func(tool, path string, s map[string]any)
	walk = func(tool, path string, s map[string]any) {
		props, _ := s["properties"].(map[string]any)
		for name, p := range props {
			ps := p.(map[string]any)
			d, _ := ps["description"].(string)
			if !strings.HasSuffix(d, ".") {
				t.Errorf("%s %s/%s: description %q is missing or cut short", tool, path, name, d)
			}
			walk(tool, path+"/"+name, ps)
		}
		if items, ok := s["items"].(map[string]any); ok {
			walk(tool, path+"/items", items)
		}
	}
	for _, tool := range reg.Tools() {
		var s map[string]any
		if err := json.Unmarshal(tool.Schema(), &s); err != nil {
			t.Fatalf("%s: %v", tool.Name(), err)
		}
		walk(tool.Name(), "", s)
	}
}

func TestWriteTodosLimits(t *testing.T) {
	e := executor(t, builtin.Options{})
	items := make([]string, builtin.MaxTodos+1)
	for i := range items {
		items[i] = fmt.Sprintf(`{"content":"step %d","status":"pending"}`, i)
	}
	tooMany := `{"todos":[` + strings.Join(items, ",") + `]}`
	r := run(e, "write_todos", tooMany)
	if r.Err == nil || r.Err.Type != tools.ErrValidation || !strings.Contains(r.Err.Message, "/todos") {
		t.Fatalf("51 items through the executor: %+v", r.Err)
	}
	if _, err := builtin.ParseTodos(json.RawMessage(tooMany)); err == nil {
		t.Fatal("ParseTodos accepted 51 items")
	}
	if _, err := builtin.ParseTodos(json.RawMessage(`{"todos":`)); err == nil || !strings.Contains(err.Error(), "write_todos arguments") {
		t.Fatalf("ParseTodos on truncated JSON: %v", err)
	}
	todos, err := builtin.ParseTodos(json.RawMessage(`{"todos":[]}`))
	if err != nil || len(todos) != 0 {
		t.Fatalf("ParseTodos on an empty list: %v %v", todos, err)
	}
	r = run(e, "write_todos", `{"todos":[{"content":"a","status":"in_progress"},{"content":"b","status":"pending"},{"content":"c","status":"in_progress"}]}`)
	if r.Err == nil || !strings.Contains(r.Err.Message, "items [1 3] are all in_progress") || !r.Err.Retryable {
		t.Fatalf("two in progress: %+v", r.Err)
	}
	if !strings.Contains(r.Content(), "Error type: validation") {
		t.Fatalf("the LLM reads: %s", r.Content())
	}
}

// TestSearXNGRequest checks the request the adapter sends and how it trims the answer.
func TestSearXNGRequest(t *testing.T) {
	var got *http.Request
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r
		_, _ = w.Write([]byte(`{"results":[{"title":" A ","url":"https://a","content":" a "},{"title":"B","url":"https://b"},{"title":"C","url":"https://c"}]}`))
	}))
	defer srv.Close()
	s, err := builtin.NewSearXNG(builtin.SearXNGConfig{BaseURL: srv.URL + "/searx"})
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.Search(context.Background(), "c++ & go/rust?=1", 2)
	if err != nil {
		t.Fatal(err)
	}
	if got.URL.Path != "/searx/search" || got.Method != http.MethodGet {
		t.Errorf("request %s %s", got.Method, got.URL.Path)
	}
	q := got.URL.Query()
	if q.Get("q") != "c++ & go/rust?=1" || q.Get("format") != "json" || q.Get("pageno") != "1" {
		t.Errorf("query %q", got.URL.RawQuery)
	}
	if got.Header.Get("Authorization") != "" || got.Header.Get("Accept") != "application/json" {
		t.Errorf("headers %v", got.Header)
	}
	want := []builtin.SearchResult{{Title: "A", URL: "https://a", Snippet: "a"}, {Title: "B", URL: "https://b"}}
	if fmt.Sprint(res) != fmt.Sprint(want) {
		t.Errorf("results %v, want %v", res, want)
	}
}

func TestWebSearchBoundsAndTimeouts(t *testing.T) {
	t.Run("oversized answer", func(t *testing.T) {
		big := `{"results":[{"title":"x","url":"https://x","content":"` + strings.Repeat("a", builtin.MaxSearchResponseBytes) + `"}]}`
		e := executor(t, builtin.Options{Search: searxng(t, func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(big)) })})
		r := run(e, "web_search", `{"query":"q"}`)
		if r.Err == nil || r.Err.Type != tools.ErrExecution || !strings.Contains(r.Err.Message, "exceeds") {
			t.Fatalf("err %+v", r.Err)
		}
	})
	t.Run("long error body", func(t *testing.T) {
		e := executor(t, builtin.Options{Search: searxng(t, func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, strings.Repeat("é", 1000), http.StatusBadGateway)
		})})
		r := run(e, "web_search", `{"query":"q"}`)
		if r.Err == nil || !r.Err.Retryable || !strings.Contains(r.Err.Message, "HTTP 502") || !strings.HasSuffix(r.Err.Message, "…") ||
			!utf8.ValidString(r.Err.Message) || len(r.Err.Message) > 300 {
			t.Fatalf("err %+v", r.Err)
		}
	})
	t.Run("call timeout before the HTTP timeout", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
			select {
			case <-r.Context().Done():
			case <-time.After(5 * time.Second):
			}
		}))
		defer srv.Close()
		s, err := builtin.NewSearXNG(builtin.SearXNGConfig{BaseURL: srv.URL, Timeout: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		reg, err := builtin.Registry(builtin.Options{Search: s})
		if err != nil {
			t.Fatal(err)
		}
		e := &tools.Executor{Registry: reg, Timeout: 100 * time.Millisecond}
		start := time.Now()
		r := run(e, "web_search", `{"query":"q"}`)
		if r.Err == nil || r.Err.Type != tools.ErrTimeout {
			t.Fatalf("err %+v", r.Err)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("took %v", d)
		}
	})
	t.Run("caller cancels", func(t *testing.T) {
		s := searxng(t, func(_ http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		if _, err := s.Search(ctx, "q", 5); err == nil || ctx.Err() == nil {
			t.Fatalf("err %v", err)
		}
	})
}

// TestCodeExecuteNeverRunsInProcess: calling Execute directly (bypassing the executor's
// routing) refuses with a sandbox error instead of running the code.
func TestCodeExecuteNeverRunsInProcess(t *testing.T) {
	_, err := builtin.CodeExecute().Execute(context.Background(), json.RawMessage(`{"language":"shell","code":"touch /tmp/pwned"}`))
	te := tools.Normalize("code_execute", err)
	if te == nil || te.Type != tools.ErrSandbox || te.Retryable {
		t.Fatalf("err %+v", err)
	}
}
