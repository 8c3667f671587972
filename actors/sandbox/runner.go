package sandbox

import (
	"context"
	"encoding/json"
	"time"

	"github.com/fathom-agents/fathom/messages/fsp"
	"github.com/fathom-agents/fathom/tools"
	"github.com/fathom-agents/fathom/tools/builtin"
)

// Runner routes the executor's external tools through the pool: it implements
// tools.ExternalRunner for code_execute (builtin.CodeArgs: language, code, stdin,
// timeout_ms) and returns the *Result, which the executor renders as JSON for the LLM.
type Runner struct {
	// Pool runs the executions.
	Pool *Pool
	// Output, when set, receives each call's stdout and stderr live, with the call
	// (session, step, idempotency key) it belongs to. It must not block.
	Output func(call tools.Call, c Chunk)
}

var _ tools.ExternalRunner = (*Runner)(nil)

// Run implements tools.ExternalRunner.
func (r *Runner) Run(ctx context.Context, t tools.Tool, args json.RawMessage) (any, error) {
	if t.Name() != "code_execute" {
		return nil, tools.SandboxError(t.Name(), "the sandbox runs code_execute only; "+t.Name()+" has no sandbox mapping", false)
	}
	var a builtin.CodeArgs
	if err := json.Unmarshal(args, &a); err != nil {
		return nil, tools.ValidationError(t.Name(), "arguments: "+err.Error())
	}
	req := Request{Tool: t.Name(), Language: fsp.Language(a.Language), Code: a.Code,
		Timeout: time.Duration(a.TimeoutMS) * time.Millisecond}
	if a.Stdin != "" {
		stdin := a.Stdin
		req.Stdin = &stdin
	}
	if r.Output != nil {
		call, _ := tools.CallInfo(ctx)
		out := r.Output
		req.Output = func(c Chunk) { out(call, c) }
	}
	res, err := r.Pool.Execute(ctx, req)
	if err != nil {
		return nil, err
	}
	return res, nil
}
