package tools_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fathom-agents/fathom/tools"
)

// The two examples of the seed design (000_f47ff647331ff5f9.txt, "Example LLM sees").
func TestFormatForLLMSeedExamples(t *testing.T) {
	timeout := tools.TimeoutError("web_search", 30*time.Second)
	want := "Tool `web_search` failed.\nError type: timeout\nMessage: Execution timed out after 30000ms\nThis error is not retryable."
	if got := timeout.FormatForLLM(); got != want {
		t.Errorf("timeout:\n%s\nwant:\n%s", got, want)
	}
	validation := tools.ValidationError("write_file", "path is required; content must be a string",
		tools.Field{Key: "params", Value: json.RawMessage(`{"path": null, "content": 123}`)})
	want = "Tool `write_file` failed.\nError type: validation\nMessage: path is required; content must be a string\n" +
		"This error may be resolved by trying again with different parameters.\nContext: params: %{path: nil, content: 123}"
	if got := validation.FormatForLLM(); got != want {
		t.Errorf("validation:\n%s\nwant:\n%s", got, want)
	}
}

func TestConstructorsAndContextVisibility(t *testing.T) {
	cases := []struct {
		err         *tools.ToolError
		typ         tools.ErrorType
		retryable   bool
		showContext bool
	}{
		{tools.ValidationError("t", "m", tools.Field{Key: "k", Value: 1}), tools.ErrValidation, true, true},
		{tools.ExecutionError("t", "m", false, tools.Field{Key: "k", Value: "v"}), tools.ErrExecution, false, true},
		{tools.TimeoutError("t", time.Second), tools.ErrTimeout, false, false},
		{tools.SandboxError("t", "sandbox unavailable", true), tools.ErrSandbox, true, false},
		{tools.PermissionError("t", "not allowed"), tools.ErrPermission, false, false},
		{tools.FromAPIError("t", 503, "busy"), tools.ErrExecution, true, true},
		{tools.FromAPIError("t", 404, "nope"), tools.ErrExecution, false, true},
		{tools.FromPanic("t", fmt.Errorf("boom")), tools.ErrExecution, false, true},
	}
	for i, c := range cases {
		if c.err.Type != c.typ || c.err.Retryable != c.retryable {
			t.Errorf("case %d: %+v", i, c.err)
		}
		shows := strings.Contains(c.err.FormatForLLM(), "\nContext: ")
		if shows != (c.showContext && len(c.err.Context) > 0) {
			t.Errorf("case %d (%s): context shown = %v\n%s", i, c.typ, shows, c.err.FormatForLLM())
		}
	}
	if got := tools.FromAPIError("api", 429, `{"e":1}`).FormatForLLM(); !strings.Contains(got, `Context: status: 429, body: "{\"e\":1}"`) {
		t.Errorf("api error context: %s", got)
	}
}

func TestNormalize(t *testing.T) {
	if tools.Normalize("t", nil) != nil {
		t.Fatal("nil error normalised to non-nil")
	}
	raw := tools.Normalize("t", errors.New("disk full"))
	if raw.Type != tools.ErrExecution || !raw.Retryable || raw.Message != "disk full" || raw.ToolName != "t" {
		t.Fatalf("raw: %+v", raw)
	}
	inner := tools.PermissionError("", "no")
	wrapped := tools.Normalize("named", fmt.Errorf("ctx: %w", inner))
	if wrapped.Type != tools.ErrPermission || wrapped.ToolName != "named" || inner.ToolName != "" {
		t.Fatalf("wrapped: %+v (inner %+v)", wrapped, inner)
	}
}
