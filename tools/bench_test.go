package tools_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/fathom-agents/fathom/tools"
)

type benchArgs struct {
	Query string `json:"query" jsonschema:"minLength=1"`
	Limit int    `json:"limit,omitempty" jsonschema:"minimum=1,maximum=10"`
}

func benchFn(_ context.Context, a benchArgs) (any, error) {
	return strings.ToUpper(a.Query), nil
}

var benchSink any

// BenchmarkDispatch is a tool call through the executor: lookup, schema validation,
// JSON decoding into the typed args, the call on its own goroutine with a timeout and
// panic recovery, and rendering the result. Compare with BenchmarkBaselineDirectCall.
func BenchmarkDispatch(b *testing.B) {
	reg, err := tools.NewRegistry(tools.MustNew("search", "s", tools.SandboxNone, benchFn))
	if err != nil {
		b.Fatal(err)
	}
	e := &tools.Executor{Registry: reg}
	call := tools.Call{ID: "c", Name: "search", Args: json.RawMessage(`{"query":"virtual actors","limit":3}`)}
	ctx := context.Background()
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		r := e.Run(ctx, call)
		if r.Err != nil {
			b.Fatal(r.Err)
		}
		benchSink = r.Output
	}
}

// BenchmarkBaselineDirectCall decodes the same arguments with encoding/json and calls the
// same function directly: what a hand-written tool call costs without the executor.
func BenchmarkBaselineDirectCall(b *testing.B) {
	args := json.RawMessage(`{"query":"virtual actors","limit":3}`)
	ctx := context.Background()
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		var a benchArgs
		if err := json.Unmarshal(args, &a); err != nil {
			b.Fatal(err)
		}
		out, err := benchFn(ctx, a)
		if err != nil {
			b.Fatal(err)
		}
		benchSink = out
	}
}
