package mcp

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Options are the per-connection settings of Dial.
type Options struct {
	// Logger receives the connection's logs and a stdio server's stderr, line by line
	// (default slog.Default()).
	Logger *slog.Logger
	// OnToolsChanged, when set, is called (on the SDK's goroutine; it must not block)
	// when the server sends notifications/tools/list_changed.
	OnToolsChanged func()
	// TerminateAfter is how long Close waits for a stdio server to exit after closing its
	// stdin before it signals it (SIGTERM, then SIGKILL). Default 2s.
	TerminateAfter time.Duration
}

// ClientName and ClientVersion identify Fathom in the MCP handshake.
const (
	ClientName    = "fathom"
	ClientVersion = "1"
)

// inherited are the variables of the node's environment a stdio server sees (the set
// the official TypeScript SDK passes by default), so the node's secrets are not
// handed to every child.
var inherited = []string{"HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER", "TMPDIR"}

// Conn is an initialised MCP session with one server. It is safe for concurrent use.
type Conn struct {
	cfg ServerConfig
	cs  *sdk.ClientSession
	// stderr is the goroutine logging a stdio server's stderr; nil for HTTP.
	stderr    *sync.WaitGroup
	closeOnce sync.Once
	closeErr  error
	closing   atomic.Bool
}

// Dial connects to the server and initialises the session. ctx bounds the connection
// and the handshake, not the session's life.
func Dial(ctx context.Context, cfg ServerConfig, opts Options) (*Conn, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.TerminateAfter <= 0 {
		opts.TerminateAfter = 2 * time.Second
	}
	copts := &sdk.ClientOptions{}
	if opts.OnToolsChanged != nil {
		f := opts.OnToolsChanged
		copts.ToolListChangedHandler = func(context.Context, *sdk.ToolListChangedRequest) { f() }
	}
	client := sdk.NewClient(&sdk.Implementation{Name: ClientName, Version: ClientVersion}, copts)
	c := &Conn{cfg: cfg}
	var transport sdk.Transport
	if cfg.URL != "" {
		transport = &sdk.StreamableClientTransport{Endpoint: cfg.URL,
			HTTPClient: &http.Client{Transport: &headerTransport{headers: cfg.Headers, base: http.DefaultTransport}}}
	} else {
		cmd, wg, err := command(cfg, opts.Logger)
		if err != nil {
			return nil, err
		}
		c.stderr = wg
		transport = &sdk.CommandTransport{Command: cmd, TerminateDuration: opts.TerminateAfter}
	}
	cs, err := client.Connect(ctx, transport, nil)
	if err != nil {
		if c.stderr != nil {
			c.stderr.Wait()
		}
		return nil, &ConnectError{Server: cfg.Name, Err: err}
	}
	c.cs = cs
	return c, nil
}

// command builds a stdio server's command: its environment, working directory, and a
// goroutine logging its stderr (done when the process closed it).
func command(cfg ServerConfig, log *slog.Logger) (*exec.Cmd, *sync.WaitGroup, error) {
	cmd := exec.Command(cfg.Command, cfg.Args...)
	cmd.Dir = cfg.Dir
	env := make([]string, 0, len(inherited)+len(cfg.Env))
	for _, k := range inherited {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	keys := make([]string, 0, len(cfg.Env))
	for k := range cfg.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		env = append(env, k+"="+cfg.Env[k])
	}
	cmd.Env = env
	setProcAttr(cmd)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, nil, fmt.Errorf("mcp server %s: stderr: %w", cfg.Name, err)
	}
	wg := &sync.WaitGroup{}
	wg.Add(1)
	go func() {
		defer wg.Done()
		logLines(stderr, log.With("mcp_server", cfg.Name, "stream", "stderr"))
	}()
	return cmd, wg, nil
}

// maxLogLine bounds one logged stderr line.
const maxLogLine = 4096

// logLines logs r line by line until it ends (the process exited or never started).
func logLines(r io.Reader, log *slog.Logger) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 64*1024)
	for sc.Scan() {
		line := sc.Text()
		if len(line) > maxLogLine {
			line = line[:maxLogLine] + "…"
		}
		log.Info("mcp server output", "line", line)
	}
	_, _ = io.Copy(io.Discard, r) // a line past the buffer: drain so the child never blocks
}

// headerTransport adds the configured headers to every request.
type headerTransport struct {
	headers map[string]string
	base    http.RoundTripper
}

func (t *headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if len(t.headers) > 0 {
		r = r.Clone(r.Context())
		for k, v := range t.headers {
			r.Header.Set(k, v)
		}
	}
	return t.base.RoundTrip(r)
}

// ToolInfo is one tool as the server lists it.
type ToolInfo struct {
	// Name is the server's name for the tool.
	Name string
	// Description tells the model what the tool does.
	Description string
	// InputSchema is the JSON Schema of the arguments, as the server sent it.
	InputSchema json.RawMessage
}

// maxPages bounds the pages of one tools/list.
const maxPages = 100

// Tools lists every tool of the server, following pagination.
func (c *Conn) Tools(ctx context.Context) ([]ToolInfo, error) {
	var out []ToolInfo
	params := &sdk.ListToolsParams{}
	for range maxPages {
		res, err := c.cs.ListTools(ctx, params)
		if err != nil {
			return nil, fmt.Errorf("mcp server %s: tools/list: %w", c.cfg.Name, err)
		}
		for _, t := range res.Tools {
			if t == nil {
				continue
			}
			schema, err := json.Marshal(t.InputSchema)
			if err != nil {
				return nil, fmt.Errorf("mcp server %s: tool %s: input schema: %w", c.cfg.Name, t.Name, err)
			}
			out = append(out, ToolInfo{Name: t.Name, Description: t.Description, InputSchema: schema})
		}
		if res.NextCursor == "" {
			return out, nil
		}
		params = &sdk.ListToolsParams{Cursor: res.NextCursor}
	}
	return nil, fmt.Errorf("mcp server %s: tools/list: more than %d pages", c.cfg.Name, maxPages)
}

// MetaIdempotencyKey is the _meta key a call's idempotency key is sent under.
const MetaIdempotencyKey = "fathom/idempotency_key"

// The _meta keys a call's W3C trace context is sent under (the span in the call's
// context: the execute_tool span), as the MCP OpenTelemetry conventions name them.
const (
	MetaTraceParent = "traceparent"
	MetaTraceState  = "tracestate"
)

// CallTool calls the server's tool with args (a JSON object; empty means {}), sending
// key (when set) in _meta under MetaIdempotencyKey and the trace context of the span in
// ctx (when there is one) under MetaTraceParent and MetaTraceState.
func (c *Conn) CallTool(ctx context.Context, tool string, args json.RawMessage, key string) (*sdk.CallToolResult, error) {
	params := &sdk.CallToolParams{Name: tool, Arguments: json.RawMessage("{}")}
	if len(args) > 0 {
		params.Arguments = args
	}
	meta := sdk.Meta{}
	if key != "" {
		meta[MetaIdempotencyKey] = key
	}
	if trace.SpanContextFromContext(ctx).IsValid() {
		carrier := propagation.MapCarrier{}
		propagation.TraceContext{}.Inject(ctx, carrier)
		for _, k := range []string{MetaTraceParent, MetaTraceState} {
			if v := carrier[k]; v != "" {
				meta[k] = v
			}
		}
	}
	if len(meta) > 0 {
		params.Meta = meta
	}
	return c.cs.CallTool(ctx, params)
}

// Ping sends the MCP ping request and waits for the server's answer (bounded by ctx).
func (c *Conn) Ping(ctx context.Context) error {
	if err := c.cs.Ping(ctx, nil); err != nil {
		return fmt.Errorf("mcp server %s: ping: %w", c.cfg.Name, err)
	}
	return nil
}

// Wait blocks until the connection ends (the server exited or closed it, or Close) and
// returns why.
func (c *Conn) Wait() error { return c.cs.Wait() }

// Closed reports whether Close was called (the connection ended because we ended it).
func (c *Conn) Closed() bool { return c.closing.Load() }

// Close ends the session: a stdio server's stdin is closed and the process waited for
// (signalled after Options.TerminateAfter). It is idempotent.
func (c *Conn) Close() error {
	c.closing.Store(true)
	c.closeOnce.Do(func() {
		err := c.cs.Close()
		if c.stderr != nil {
			c.stderr.Wait()
		}
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			err = nil // the server's exit status after we closed it is not a close failure
		}
		c.closeErr = err
	})
	return c.closeErr
}

// ConnectError is a failed Dial: the process did not start, the endpoint did not
// answer, or the handshake failed.
type ConnectError struct {
	Server string
	Err    error
}

func (e *ConnectError) Error() string {
	return fmt.Sprintf("mcp server %s: connect: %v", e.Server, e.Err)
}

// Unwrap returns the cause.
func (e *ConnectError) Unwrap() error { return e.Err }
