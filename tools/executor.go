package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Call is one tool call the LLM asked for.
type Call struct {
	// ID is the LLM's tool call id.
	ID string
	// Name is the tool.
	Name string
	// Args are the arguments as the LLM sent them (a JSON object).
	Args json.RawMessage
	// IdempotencyKey identifies the call across recoveries (session, step, call index):
	// a call whose result is recorded under this key is never executed again.
	IdempotencyKey string
	// SessionID and StepID say where the call was made (empty outside a session).
	SessionID, StepID string
	// SubAgentID is the sub-agent that made the call (empty for the orchestrator).
	SubAgentID string
	// UserID is the session's user (its user_id; empty when it has none): whose
	// long-term memory the memory tools read and write.
	UserID string
	// AgentType is the calling sub-agent's type (empty for the orchestrator).
	AgentType string
}

// Artifact describes an artifact a tool call stored in the session's workspace. Tools
// report them with RecordArtifact; the session records each as an artifact_written
// event with the call's result.
type Artifact struct {
	// Path is "{session_id}/{type}/{filename}" in the artifact store.
	Path string
	// Type is research | code | drafts | data | logs.
	Type        string
	Filename    string
	ContentType string
	Size        int64
	// SHA256 is the content's hex digest.
	SHA256 string
	// Overwrote is true when the path held an artifact before.
	Overwrote bool
}

type artifactsKey struct{}

// artifactLog collects the artifacts one call records; the tool's goroutine writes it
// and the executor reads it once the tool returned.
type artifactLog struct {
	mu   sync.Mutex
	list []Artifact
}

// RecordArtifact reports an artifact the running call stored. Outside the executor (no
// call in ctx) it does nothing.
func RecordArtifact(ctx context.Context, a Artifact) {
	l, ok := ctx.Value(artifactsKey{}).(*artifactLog)
	if !ok {
		return
	}
	l.mu.Lock()
	l.list = append(l.list, a)
	l.mu.Unlock()
}

func (l *artifactLog) take() []Artifact {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Artifact(nil), l.list...)
}

type callInfoKey struct{}

// CallInfo returns the call being executed, as the executor put it in the tool's
// context (tools read the idempotency key or session from it), and whether there is one.
func CallInfo(ctx context.Context) (Call, bool) {
	c, ok := ctx.Value(callInfoKey{}).(Call)
	return c, ok
}

// Result is the outcome of a call: Output on success, Err otherwise.
type Result struct {
	CallID string
	// Output is the tool's result rendered as the LLM reads it (strings as is, other
	// values as JSON).
	Output string
	// Err is the failure, already a ToolError.
	Err *ToolError
	// Duration is how long the call took.
	Duration time.Duration
	// Artifacts are the artifacts the call stored (RecordArtifact), also when it failed
	// after storing some.
	Artifacts []Artifact
	// Memories are the long-term memory writes the call made (RecordMemory).
	Memories []MemoryWrite
}

// Content is what goes back to the LLM as the tool message.
func (r Result) Content() string {
	if r.Err != nil {
		return r.Err.FormatForLLM()
	}
	return r.Output
}

// ExternalRunner runs tools whose SandboxMode is external (the sandbox pool).
type ExternalRunner interface {
	Run(ctx context.Context, t Tool, args json.RawMessage) (any, error)
}

// Executor validates and runs calls with a timeout, turning every failure — invalid
// arguments, errors, panics, timeouts, a missing sandbox — into a ToolError. It never
// panics and never blocks past the timeout. A tool runs on its own goroutine whose
// context is cancelled at the timeout; Go cannot kill a goroutine, so a tool that
// ignores its context keeps running in the background until it returns (its result is
// dropped). In-process tools must honour ctx; untrusted code belongs in the sandbox.
type Executor struct {
	// Registry holds the callable tools.
	Registry *Registry
	// Timeout bounds one call; zero means 30s.
	Timeout time.Duration
	// External runs external tools; nil means "no sandbox configured".
	External ExternalRunner
}

// Run executes one call.
func (e *Executor) Run(ctx context.Context, c Call) (res Result) {
	start := time.Now()
	res.CallID = c.ID
	defer func() { res.Duration = time.Since(start) }()
	t, ok := e.Registry.Get(c.Name)
	if !ok {
		res.Err = ValidationError(c.Name, fmt.Sprintf("unknown tool %q; available tools: %s", c.Name, e.names()))
		return res
	}
	if verr := e.Registry.Validate(c.Name, c.Args); verr != nil {
		res.Err = verr
		return res
	}
	timeout := e.Timeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	arts, mems := &artifactLog{}, &memoryLog{}
	cctx, cancel := context.WithTimeout(context.WithValue(context.WithValue(context.WithValue(ctx, callInfoKey{}, c), artifactsKey{}, arts), memoriesKey{}, mems), timeout)
	defer cancel()
	type outcome struct {
		out any
		err error
	}
	done := make(chan outcome, 1) // buffered: a tool that ignores ctx cannot leak a blocked send
	go func() {
		defer func() {
			if p := recover(); p != nil {
				done <- outcome{err: FromPanic(c.Name, p)}
			}
		}()
		var o outcome
		if t.SandboxMode() == SandboxExternal {
			if e.External == nil {
				o.err = SandboxError(c.Name, "no sandbox is configured for external tools", false).NotConfigured()
			} else {
				o.out, o.err = e.External.Run(cctx, t, c.Args)
			}
		} else {
			o.out, o.err = t.Execute(cctx, c.Args)
		}
		done <- o
	}()
	select {
	case o := <-done:
		res.Artifacts, res.Memories = arts.take(), mems.take()
		if o.err != nil {
			if errors.Is(o.err, context.DeadlineExceeded) && cctx.Err() != nil && ctx.Err() == nil {
				res.Err = TimeoutError(c.Name, timeout)
			} else {
				res.Err = Normalize(c.Name, o.err)
			}
			return res
		}
		out, err := render(o.out)
		if err != nil {
			res.Err = ExecutionError(c.Name, "result cannot be encoded: "+err.Error(), false)
			return res
		}
		res.Output = out
		return res
	case <-cctx.Done():
		if ctx.Err() != nil {
			res.Err = ExecutionError(c.Name, "cancelled: "+ctx.Err().Error(), true)
		} else {
			res.Err = TimeoutError(c.Name, timeout)
		}
		return res
	}
}

func (e *Executor) names() string {
	var s string
	for i, t := range e.Registry.Tools() {
		if i > 0 {
			s += ", "
		}
		s += t.Name()
	}
	return s
}

func render(v any) (string, error) {
	switch x := v.(type) {
	case nil:
		return "", nil
	case string:
		return x, nil
	case []byte:
		return string(x), nil
	case json.RawMessage:
		return string(x), nil
	}
	b, err := json.Marshal(v)
	return string(b), err
}
