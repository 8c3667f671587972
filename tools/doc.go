// Package tools is Fathom's tool system: what a tool is (name, description, JSON Schema
// of its arguments, sandbox mode, execute function), how its arguments are validated,
// how it is run (timeout, panic recovery) and how every failure becomes a ToolError —
// the structured error the LLM reads as the tool's result and can correct itself from.
//
// A typed tool is a few lines:
//
//	type searchArgs struct {
//		Query string `json:"query" jsonschema:"minLength=1" jsonschema_description:"What to search for, as words."`
//		Limit int    `json:"limit,omitempty" jsonschema:"minimum=1,maximum=20"`
//	}
//	search := tools.New("web_search", "Search the web", tools.SandboxNone,
//		func(ctx context.Context, a searchArgs) (any, error) { ... })
//
// Put descriptions in `jsonschema_description:"..."`: inside `jsonschema:"..."` a comma
// separates options, so a description with a comma would be cut short.
//
// Tools return a result or an error; the executor normalises any error into a
// ToolError (a tool may return one itself for a precise type), converts panics and
// timeouts, and validates arguments against the schema before the tool sees them.
package tools
