package sandbox

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/fathom-agents/fathom/auth"
	"github.com/fathom-agents/fathom/messages/fsp"
	"github.com/fathom-agents/fathom/tools"
)

// ActorName is the pool actor's name in the actor system ("/sandbox" in the design's
// supervision tree).
const ActorName = "sandbox"

// Request is one execution.
type Request struct {
	// Tool names the tool on whose behalf the code runs, for ToolErrors. Default
	// "code_execute".
	Tool string
	// Language is the code's language (python, javascript, shell, elixir).
	Language fsp.Language
	// Code is the program.
	Code string
	// Stdin, when not nil, is the program's standard input.
	Stdin *string
	// Timeout is the execution's time limit; zero means Config.DefaultTimeout, and it is
	// capped at Config.MaxTimeout.
	Timeout time.Duration
	// Env is laid over Config.Env. When ctx carries a span, TRACEPARENT (and TRACESTATE)
	// are added for it unless Env sets TRACEPARENT.
	Env map[string]string
	// Output, when set, receives stdout and stderr live (see OutputFunc).
	Output OutputFunc
}

// Pool is a handle on the sandbox pool actor; it is safe for concurrent use. New makes
// the handle, Start spawns the actor: a node can hand the handle (through a Runner) to
// its tool executor before its actor system is ready to spawn, and start the pool after.
type Pool struct {
	cfg   Config
	token *tokenStore
	run   atomic.Pointer[running]

	startMu  sync.Mutex
	stopOnce sync.Once
	stopErr  error
}

// running is a started pool: the actor and its system.
type running struct {
	system *actor.ActorSystem
	pid    *actor.PID
}

// New validates cfg and returns a pool that is not started yet: Execute fails with a
// retryable sandbox error until Start.
func New(cfg Config) (*Pool, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Pool{cfg: cfg, token: newTokenStore(cfg.APIKey)}, nil
}

// Start is New followed by Pool.Start.
func Start(system *actor.ActorSystem, cfg Config) (*Pool, error) {
	p, err := New(cfg)
	if err != nil {
		return nil, err
	}
	if err := p.Start(system); err != nil {
		return nil, err
	}
	return p, nil
}

// Start spawns the pool actor (named ActorName) in system. The connections dial in the
// background: Start does not wait for the sandbox. Spawn after the system's remote (if
// any) is started: Proto.Actor sets the system's address there.
func (p *Pool) Start(system *actor.ActorSystem) error {
	p.startMu.Lock()
	defer p.startMu.Unlock()
	if p.run.Load() != nil {
		return errors.New("start sandbox pool: already started")
	}
	pid, err := system.Root.SpawnNamed(newPoolProps(p.cfg, p.cfg.Logger.With("component", "sandbox"), p.token), ActorName)
	if err != nil {
		return fmt.Errorf("start sandbox pool: %w", err)
	}
	p.run.Store(&running{system: system, pid: pid})
	return nil
}

// PID is the pool actor, nil before Start.
func (p *Pool) PID() *actor.PID {
	if r := p.run.Load(); r != nil {
		return r.pid
	}
	return nil
}

// Execute runs one execution through the pool and waits for its outcome. Every failure
// is a *tools.ToolError (see the package doc for the mapping). When ctx ends first, the
// execution is cancelled on the sandbox (best effort) and a timeout error (deadline) or
// a retryable execution error (cancellation) is returned.
func (p *Pool) Execute(ctx context.Context, r Request) (*Result, error) {
	ex, err := p.newExecution(ctx, r)
	if err != nil {
		return nil, err
	}
	run := p.run.Load()
	if run == nil {
		return nil, tools.SandboxError(ex.tool, "the sandbox pool is not started yet", true)
	}
	run.system.Root.Send(run.pid, &submit{exec: ex})
	select {
	case o := <-ex.reply:
		if o.err != nil {
			return nil, o.err
		}
		return o.res, nil
	case <-ctx.Done():
		run.system.Root.Send(run.pid, &abandon{id: ex.id})
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, timeoutError(ex.tool, ex.limit)
		}
		return nil, tools.ExecutionError(ex.tool, "cancelled: "+ctx.Err().Error(), true)
	}
}

func (p *Pool) newExecution(ctx context.Context, r Request) (*execution, error) {
	if r.Tool == "" {
		r.Tool = "code_execute"
	}
	limit := r.Timeout
	if limit <= 0 {
		limit = p.cfg.DefaultTimeout
	}
	limit = min(limit, p.cfg.MaxTimeout)
	deadline := time.Now().Add(limit + p.cfg.TimeoutGrace)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	env := maps.Clone(p.cfg.Env)
	if len(r.Env) > 0 {
		if env == nil {
			env = map[string]string{}
		}
		maps.Copy(env, r.Env)
	}
	env = withTraceContext(ctx, env, r.Env)
	id, err := newExecutionID()
	if err != nil {
		return nil, tools.SandboxError(r.Tool, "execution id: "+err.Error(), true)
	}
	frame := &fsp.Execute{
		Header:   fsp.NewHeader(fsp.TypeExecute, id, time.Now()),
		Language: r.Language, Code: r.Code, Stdin: r.Stdin, Env: env,
		Limits: fsp.Limits{TimeoutMS: limit.Milliseconds(), MemoryMB: p.cfg.MemoryMB, CPUShares: p.cfg.CPUShares, MaxOutputBytes: p.cfg.MaxOutputBytes},
	}
	return &execution{id: id, tool: r.Tool, tenant: auth.TenantOf(ctx), frame: frame, limit: limit, deadline: deadline, output: r.Output,
		reply: make(chan outcome, 1)}, nil
}

// Environment variables carrying the W3C trace context of the execute_tool span into the
// sandbox, as OpenTelemetry SDKs read them (an instrumented program joins the session's
// trace).
const (
	EnvTraceParent = "TRACEPARENT"
	EnvTraceState  = "TRACESTATE"
)

// withTraceContext adds TRACEPARENT (and TRACESTATE) for the span in ctx to env, unless
// the request's own env sets them.
func withTraceContext(ctx context.Context, env, own map[string]string) map[string]string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return env
	}
	if _, set := own[EnvTraceParent]; set {
		return env
	}
	carrier := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, carrier)
	if carrier["traceparent"] == "" {
		return env
	}
	if env == nil {
		env = map[string]string{}
	}
	env[EnvTraceParent] = carrier["traceparent"]
	if ts := carrier["tracestate"]; ts != "" {
		env[EnvTraceState] = ts
	}
	return env
}

func newExecutionID() (string, error) {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return "exec_" + hex.EncodeToString(b), nil
}

// Stats returns a snapshot of the pool's connections and queue.
func (p *Pool) Stats(ctx context.Context) (Stats, error) {
	timeout := 5 * time.Second
	if d, ok := ctx.Deadline(); ok {
		// A future with a negative timeout would wait forever.
		if timeout = time.Until(d); timeout <= 0 {
			return Stats{}, fmt.Errorf("sandbox pool stats: %w", context.DeadlineExceeded)
		}
	}
	run := p.run.Load()
	if run == nil {
		return Stats{}, errors.New("sandbox pool stats: not started")
	}
	res, err := run.system.Root.RequestFuture(run.pid, &statsRequest{}, timeout).Result()
	if err != nil {
		return Stats{}, fmt.Errorf("sandbox pool stats: %w", err)
	}
	st, ok := res.(Stats)
	if !ok {
		return Stats{}, fmt.Errorf("sandbox pool stats: unexpected reply %T", res)
	}
	return st, nil
}

// Stop stops the pool, its connections (pending executions fail as retryable) and the
// token manager, and waits for them until ctx ends. It is idempotent, and a no-op on a
// pool never started.
func (p *Pool) Stop(ctx context.Context) error {
	p.stopOnce.Do(func() {
		p.startMu.Lock()
		run := p.run.Load()
		p.startMu.Unlock()
		if run == nil {
			return
		}
		f := run.system.Root.StopFuture(run.pid) // Proto.Actor bounds the wait itself (10s)
		done := make(chan error, 1)
		go func() { done <- f.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				p.stopErr = fmt.Errorf("stop sandbox pool: %w", err)
			}
		case <-ctx.Done():
			p.stopErr = fmt.Errorf("stop sandbox pool: %w", ctx.Err())
		}
	})
	return p.stopErr
}
