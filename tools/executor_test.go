package tools_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fathom-agents/fathom/tools"
)

type writeFileArgs struct {
	Path    string `json:"path" jsonschema:"description=file to write,minLength=1"`
	Content string `json:"content" jsonschema:"description=text to write"`
	Mode    string `json:"mode,omitempty" jsonschema:"enum=overwrite,enum=append"`
}

func registry(t *testing.T, extra ...tools.Tool) *tools.Registry {
	t.Helper()
	writeFile := tools.MustNew("write_file", "Write a file", tools.SandboxNone, func(_ context.Context, a writeFileArgs) (any, error) {
		return map[string]any{"path": a.Path, "bytes": len(a.Content)}, nil
	})
	r, err := tools.NewRegistry(append([]tools.Tool{writeFile}, extra...)...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestSchemaGeneratedFromArgsStruct(t *testing.T) {
	tool := tools.MustNew("write_file", "Write a file", tools.SandboxNone, func(context.Context, writeFileArgs) (any, error) { return nil, nil })
	var s struct {
		Type                 string                     `json:"type"`
		Required             []string                   `json:"required"`
		AdditionalProperties *bool                      `json:"additionalProperties"`
		Properties           map[string]json.RawMessage `json:"properties"`
	}
	if err := json.Unmarshal(tool.Schema(), &s); err != nil {
		t.Fatal(err)
	}
	if s.Type != "object" || strings.Join(s.Required, ",") != "path,content" || s.AdditionalProperties == nil || *s.AdditionalProperties {
		t.Fatalf("schema %s", tool.Schema())
	}
	if !strings.Contains(string(s.Properties["mode"]), `"enum":["overwrite","append"]`) || !strings.Contains(string(s.Properties["path"]), `"description":"file to write"`) {
		t.Fatalf("properties %s", tool.Schema())
	}
}

func TestExecutorOutcomes(t *testing.T) {
	block := make(chan struct{})
	defer close(block)
	r := registry(t,
		tools.MustNew("boom", "panics", tools.SandboxNone, func(context.Context, struct{}) (any, error) { panic("kaput") }),
		tools.MustNew("stuck", "ignores its context", tools.SandboxNone, func(context.Context, struct{}) (any, error) { <-block; return nil, nil }),
		tools.MustNew("raw", "returns a plain error", tools.SandboxNone, func(context.Context, struct{}) (any, error) { return nil, errors.New("disk full") }),
		tools.MustNew("denied", "returns a ToolError", tools.SandboxNone, func(context.Context, struct{}) (any, error) {
			return nil, tools.PermissionError("", "needs approval")
		}),
		tools.MustNew("code_execute", "runs code", tools.SandboxExternal, func(context.Context, struct{}) (any, error) { return "never", nil }),
	)
	ex := &tools.Executor{Registry: r, Timeout: 100 * time.Millisecond}
	ctx := context.Background()
	cases := []struct {
		name, tool, args string
		typ              tools.ErrorType
		retryable        bool
		inMessage        string
	}{
		{"ok", "write_file", `{"path":"a.txt","content":"hi"}`, "", false, ""},
		{"missing and wrong type", "write_file", `{"path": null, "content": 123}`, tools.ErrValidation, true, "/content"},
		{"extra property", "write_file", `{"path":"a","content":"b","owner":"me"}`, tools.ErrValidation, true, "owner"},
		{"bad enum", "write_file", `{"path":"a","content":"b","mode":"truncate"}`, tools.ErrValidation, true, "/mode"},
		{"not json", "write_file", `{"path":`, tools.ErrValidation, true, "not valid JSON"},
		{"unknown tool", "nope", `{}`, tools.ErrValidation, true, "available tools: boom, code_execute"},
		{"panic", "boom", `{}`, tools.ErrExecution, false, "Tool crashed: kaput"},
		{"timeout", "stuck", `{}`, tools.ErrTimeout, false, "timed out after 100ms"},
		{"raw error", "raw", `{}`, tools.ErrExecution, true, "disk full"},
		{"tool's own ToolError", "denied", `{}`, tools.ErrPermission, false, "needs approval"},
		{"external without sandbox", "code_execute", `{}`, tools.ErrSandbox, false, "no sandbox"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := ex.Run(ctx, tools.Call{ID: "call-1", Name: c.tool, Args: json.RawMessage(c.args)})
			if res.CallID != "call-1" {
				t.Fatalf("call id %q", res.CallID)
			}
			if c.typ == "" {
				if res.Err != nil || res.Output != `{"bytes":2,"path":"a.txt"}` {
					t.Fatalf("result %q err %v", res.Output, res.Err)
				}
				return
			}
			if res.Err == nil {
				t.Fatalf("no error, output %q", res.Output)
			}
			if res.Err.Type != c.typ || res.Err.Retryable != c.retryable || !strings.Contains(res.Err.Message, c.inMessage) || res.Err.ToolName != c.tool {
				t.Fatalf("error %+v", res.Err)
			}
			if !strings.HasPrefix(res.Content(), "Tool `"+c.tool+"` failed.") {
				t.Fatalf("content %q", res.Content())
			}
		})
	}
}

func TestValidationErrorShowsArgumentsAsSent(t *testing.T) {
	ex := &tools.Executor{Registry: registry(t)}
	res := ex.Run(context.Background(), tools.Call{Name: "write_file", Args: json.RawMessage(`{"path": null, "content": 123}`)})
	if res.Err == nil || !strings.HasSuffix(res.Content(), "Context: params: %{path: nil, content: 123}") {
		t.Fatalf("content:\n%s", res.Content())
	}
}

func TestRegistryRejectsBadTools(t *testing.T) {
	ok := func(context.Context, struct{}) (any, error) { return nil, nil }
	if _, err := tools.NewRegistry(tools.MustNew("has space", "", tools.SandboxNone, ok)); err == nil {
		t.Error("bad name accepted")
	}
	if _, err := tools.NewRegistry(tools.MustNew("dup", "", tools.SandboxNone, ok), tools.MustNew("dup", "", tools.SandboxNone, ok)); err == nil {
		t.Error("duplicate accepted")
	}
}

func TestCancelledCallerIsNotATimeout(t *testing.T) {
	started := make(chan struct{})
	r := registry(t, tools.MustNew("wait", "waits for ctx", tools.SandboxNone, func(ctx context.Context, _ struct{}) (any, error) {
		close(started)
		<-ctx.Done()
		return nil, ctx.Err()
	}))
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-started; cancel() }() // the caller goes away while the tool runs
	res := (&tools.Executor{Registry: r, Timeout: 5 * time.Second}).Run(ctx, tools.Call{Name: "wait", Args: json.RawMessage(`{}`)})
	if res.Err == nil || res.Err.Type == tools.ErrTimeout {
		t.Fatalf("err %+v", res.Err)
	}
}

// TestRegistryReplaceAndUnregister: a tool whose definition changes at run time is
// replaced in place (its new schema enforced), and a removed one is unknown.
func TestRegistryReplaceAndUnregister(t *testing.T) {
	type v1 struct {
		N int `json:"n"`
	}
	type v2 struct {
		S string `json:"s"`
	}
	r := registry(t, tools.MustNew("dyn", "v1", tools.SandboxNone, func(context.Context, v1) (any, error) { return "v1", nil }))
	ex := &tools.Executor{Registry: r}
	if err := r.Register(tools.MustNew("dyn", "again", tools.SandboxNone, func(context.Context, v1) (any, error) { return nil, nil })); err == nil {
		t.Fatal("Register accepted a second dyn")
	}
	if err := r.Replace(tools.MustNew("dyn", "v2", tools.SandboxNone, func(context.Context, v2) (any, error) { return "v2", nil })); err != nil {
		t.Fatal(err)
	}
	if res := ex.Run(context.Background(), tools.Call{Name: "dyn", Args: json.RawMessage(`{"n":1}`)}); res.Err == nil || res.Err.Type != tools.ErrValidation {
		t.Fatalf("the old schema still applies: %+v", res)
	}
	if res := ex.Run(context.Background(), tools.Call{Name: "dyn", Args: json.RawMessage(`{"s":"x"}`)}); res.Err != nil || res.Output != "v2" {
		t.Fatalf("replaced tool: %+v", res)
	}
	if !r.Unregister("dyn") || r.Unregister("dyn") {
		t.Fatal("Unregister did not report presence")
	}
	if _, ok := r.Get("dyn"); ok {
		t.Fatal("dyn still registered")
	}
	if tools.ValidName("a b") || !tools.ValidName("orders__lookup_order") {
		t.Fatal("ValidName")
	}
}
