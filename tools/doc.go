// Package tools is Fathom's tool system: what a tool is (name, description, JSON Schema
// of its arguments, sandbox mode, execute function), how its arguments are validated,
// how it is run (timeout, panic recovery) and how every failure becomes a ToolError —
// the structured error the LLM reads as the tool's result and can correct itself from.
//
// A typed tool is a few lines:
//
//	type searchArgs struct {
//		Query string `json:"query" jsonschema:"description=what to search for"`
//		Limit int    `json:"limit,omitempty" jsonschema:"minimum=1,maximum=20"`
//	}
//	search := tools.New("web_search", "Search the web", tools.SandboxNone,
//		func(ctx context.Context, a searchArgs) (any, error) { ... })
//
// Tools return a result or an error; the executor normalises any error into a
// ToolError (a tool may return one itself for a precise type), converts panics and
// timeouts, and validates arguments against the schema before the tool sees them.
package tools
