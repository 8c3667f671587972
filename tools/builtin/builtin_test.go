package builtin_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/fathom-agents/fathom/tools"
	"github.com/fathom-agents/fathom/tools/builtin"
)

func executor(t *testing.T, opts builtin.Options) *tools.Executor {
	t.Helper()
	reg, err := builtin.Registry(opts)
	if err != nil {
		t.Fatal(err)
	}
	return &tools.Executor{Registry: reg, Timeout: 2 * time.Second}
}

func run(e *tools.Executor, name, args string) tools.Result {
	return e.Run(context.Background(), tools.Call{ID: "c1", Name: name, Args: json.RawMessage(args)})
}

func TestSchemas(t *testing.T) {
	e := executor(t, builtin.Options{})
	want := map[string][]string{
		"write_todos":  {`"todos"`, `"in_progress"`, `"maxItems":50`},
		"web_search":   {`"query"`, `"max_results"`, `"maximum":10`},
		"code_execute": {`"language"`, `"python"`, `"javascript"`, `"shell"`, `"elixir"`, `"timeout_ms"`, `"maximum":300000`},
	}
	for name, parts := range want {
		tool, ok := e.Registry.Get(name)
		if !ok {
			t.Fatalf("%s not registered", name)
		}
		for _, p := range parts {
			if !strings.Contains(string(tool.Schema()), p) {
				t.Errorf("%s schema lacks %s: %s", name, p, tool.Schema())
			}
		}
	}
	if tool, _ := e.Registry.Get("code_execute"); tool.SandboxMode() != tools.SandboxExternal {
		t.Errorf("code_execute sandbox mode %s", tool.SandboxMode())
	}
}

func TestWriteTodos(t *testing.T) {
	e := executor(t, builtin.Options{})
	cases := []struct {
		name, args, want string
		errType          tools.ErrorType
	}{
		{"a plan", `{"todos":[{"content":"read","status":"completed"},{"content":"write","status":"in_progress"},{"content":"review","status":"pending"}]}`,
			"Updated todo list (3 items: 1 completed, 1 in progress, 1 pending):\n1. [x] read\n2. [~] write\n3. [ ] review", ""},
		{"cleared", `{"todos":[]}`, "Todo list cleared.", ""},
		{"two in progress", `{"todos":[{"content":"a","status":"in_progress"},{"content":"b","status":"in_progress"}]}`,
			"mark only the one you are working on", tools.ErrValidation},
		{"bad status", `{"todos":[{"content":"a","status":"doing"}]}`, "/todos/0/status", tools.ErrValidation},
		{"empty content", `{"todos":[{"content":"","status":"pending"}]}`, "/todos/0/content", tools.ErrValidation},
		{"blank content", `{"todos":[{"content":"   ","status":"pending"}]}`, "item 1 has no content", tools.ErrValidation},
		{"no list", `{}`, "todos", tools.ErrValidation},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := run(e, "write_todos", c.args)
			if c.errType == "" {
				if r.Err != nil || r.Output != c.want {
					t.Fatalf("output %q err %v, want %q", r.Output, r.Err, c.want)
				}
				return
			}
			if r.Err == nil || r.Err.Type != c.errType || !strings.Contains(r.Err.Message, c.want) {
				t.Fatalf("err %v, want %s containing %q", r.Err, c.errType, c.want)
			}
		})
	}
	todos, err := builtin.ParseTodos(json.RawMessage(cases[0].args))
	if err != nil || len(todos) != 3 || todos[1].Status != builtin.TodoInProgress {
		t.Fatalf("ParseTodos: %v %v", todos, err)
	}
	if _, err := builtin.ParseTodos(json.RawMessage(cases[2].args)); err == nil {
		t.Fatal("ParseTodos accepted two items in progress")
	}
}

// searxng is a local server speaking SearXNG's JSON format.
func searxng(t *testing.T, h http.HandlerFunc) *builtin.SearXNG {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	s, err := builtin.NewSearXNG(builtin.SearXNGConfig{BaseURL: srv.URL + "/", Token: "tok", Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestWebSearchSearXNG(t *testing.T) {
	var gotQuery, gotAuth string
	ok := searxng(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/search" || r.URL.Query().Get("format") != "json" {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		gotQuery, gotAuth = r.URL.Query().Get("q"), r.Header.Get("Authorization")
		_, _ = w.Write([]byte(`{"query":"x","results":[
			{"title":"Proto.Actor","url":"https://proto.actor","content":"Ultra-fast distributed actors"},
			{"title":"Akka","url":"https://akka.io","content":"Actors on the JVM"},
			{"title":"Orleans","url":"https://learn.microsoft.com/orleans","content":"Virtual actors"}]}`))
	})
	e := executor(t, builtin.Options{Search: ok})
	r := run(e, "web_search", `{"query":"virtual actors & grains?","max_results":2}`)
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	want := "Results for \"virtual actors & grains?\":\n1. Proto.Actor — https://proto.actor\n   Ultra-fast distributed actors\n2. Akka — https://akka.io\n   Actors on the JVM"
	if r.Output != want {
		t.Fatalf("output %q", r.Output)
	}
	if gotQuery != "virtual actors & grains?" || gotAuth != "Bearer tok" {
		t.Fatalf("query %q auth %q", gotQuery, gotAuth)
	}

	cases := []struct {
		name      string
		h         http.HandlerFunc
		want      string
		errType   tools.ErrorType
		retryable bool
	}{
		{"empty", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(`{"results":[]}`)) }, "No results", "", false},
		{"server error", func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "engine crashed", http.StatusInternalServerError)
		}, "HTTP 500: engine crashed", tools.ErrExecution, true},
		{"rate limited", func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "too many", http.StatusTooManyRequests) }, "HTTP 429", tools.ErrExecution, true},
		{"forbidden", func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "format json not allowed", http.StatusForbidden)
		}, "HTTP 403", tools.ErrExecution, false},
		{"malformed", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(`<html>`)) }, "not the JSON format", tools.ErrExecution, true},
		{"slow", func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-r.Context().Done():
			case <-time.After(5 * time.Second):
			}
		}, "Timeout", tools.ErrExecution, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := executor(t, builtin.Options{Search: searxng(t, c.h)})
			r := run(e, "web_search", `{"query":"q"}`)
			if c.errType == "" {
				if r.Err != nil || !strings.Contains(r.Output, c.want) {
					t.Fatalf("output %q err %v", r.Output, r.Err)
				}
				return
			}
			if r.Err == nil || r.Err.Type != c.errType || r.Err.Retryable != c.retryable || !strings.Contains(r.Err.Message, c.want) {
				t.Fatalf("err %+v, want %s retryable=%v containing %q", r.Err, c.errType, c.retryable, c.want)
			}
		})
	}
}

func TestWebSearchUnconfiguredAndBadArgs(t *testing.T) {
	e := executor(t, builtin.Options{})
	r := run(e, "web_search", `{"query":"x"}`)
	if r.Err == nil || r.Err.Retryable || !r.Err.Config || !strings.Contains(r.Err.Message, "FATHOM_SEARXNG_URL") {
		t.Fatalf("unconfigured: %+v", r.Err)
	}
	r = run(e, "web_search", `{"query":"x","max_results":50}`)
	if r.Err == nil || r.Err.Type != tools.ErrValidation || !strings.Contains(r.Err.Message, "/max_results") {
		t.Fatalf("bad args: %+v", r.Err)
	}
	if _, err := builtin.NewSearXNG(builtin.SearXNGConfig{BaseURL: "ftp://x"}); err == nil {
		t.Fatal("ftp base URL accepted")
	}
	p, err := builtin.SearchFromEnv(func(string) string { return "" })
	if err != nil || p != nil {
		t.Fatalf("SearchFromEnv without URL: %v %v", p, err)
	}
}

// TestCodeExecuteGoesToTheSandbox: code_execute never runs in-process; without a
// sandbox the executor answers with a sandbox ToolError, with one it hands it over.
func TestCodeExecuteGoesToTheSandbox(t *testing.T) {
	e := executor(t, builtin.Options{})
	r := run(e, "code_execute", `{"language":"python","code":"print(1)"}`)
	if r.Err == nil || r.Err.Type != tools.ErrSandbox || !r.Err.Config {
		t.Fatalf("no sandbox: %+v", r.Err)
	}
	r = run(e, "code_execute", `{"language":"cobol","code":"x"}`)
	if r.Err == nil || r.Err.Type != tools.ErrValidation {
		t.Fatalf("bad language: %+v", r.Err)
	}
	var got json.RawMessage
	e.External = runnerFunc(func(_ context.Context, tool tools.Tool, args json.RawMessage) (any, error) {
		got = args
		return map[string]any{"exit_code": 0, "stdout": "1\n"}, nil
	})
	r = run(e, "code_execute", `{"language":"python","code":"print(1)"}`)
	if r.Err != nil || r.Output != `{"exit_code":0,"stdout":"1\n"}` || string(got) != `{"language":"python","code":"print(1)"}` {
		t.Fatalf("with a sandbox: %q %+v, args %s", r.Output, r.Err, got)
	}
}

type runnerFunc func(context.Context, tools.Tool, json.RawMessage) (any, error)

func (f runnerFunc) Run(ctx context.Context, t tools.Tool, args json.RawMessage) (any, error) {
	return f(ctx, t, args)
}
