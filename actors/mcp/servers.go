package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/fathom-agents/fathom/tools"
	mcptool "github.com/fathom-agents/fathom/tools/mcp"
)

// ActorName is the supervisor's name in the actor system ("/mcp" in the tree).
const ActorName = "mcp"

// Config configures a node's MCP servers.
type Config struct {
	// Servers are the servers to keep connected. Names must be unique.
	Servers []mcptool.ServerConfig
	// Registry receives the servers' tools. Required.
	Registry *tools.Registry
	// Logger receives the connections' logs and the stdio servers' stderr (default
	// slog.Default()).
	Logger *slog.Logger
	// ConnectTimeout bounds one connection attempt: starting the process or reaching the
	// URL, the MCP handshake and the first tools/list. Default 30s.
	ConnectTimeout time.Duration
	// ListTimeout bounds a tools/list after notifications/tools/list_changed. Default 30s.
	ListTimeout time.Duration
	// RestartBackoff is the wait before the first restart of a failed connection; it
	// doubles with each recent failure. Default 500ms.
	RestartBackoff time.Duration
	// MaxBackoff caps the wait between restarts. Default 30s.
	MaxBackoff time.Duration
	// RestartWindow is how long a failure counts towards the backoff. Default 1m.
	RestartWindow time.Duration
	// PingInterval is how often a connected server is pinged (MCP ping), so a server
	// that died or hangs is noticed without waiting for a call: a ping that fails or
	// gets no answer within PingTimeout ends the connection, which the supervisor
	// restarts (reconnects). Default 10s.
	PingInterval time.Duration
	// PingTimeout bounds one ping. Default 5s.
	PingTimeout time.Duration
}

// DefaultConfig returns the defaults (no servers, no registry).
func DefaultConfig() Config {
	return Config{ConnectTimeout: 30 * time.Second, ListTimeout: 30 * time.Second, RestartBackoff: 500 * time.Millisecond,
		MaxBackoff: 30 * time.Second, RestartWindow: time.Minute, PingInterval: 10 * time.Second, PingTimeout: 5 * time.Second}
}

// withDefaults fills zero durations and the logger.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	for _, p := range []struct{ v, def *time.Duration }{{&c.ConnectTimeout, &d.ConnectTimeout}, {&c.ListTimeout, &d.ListTimeout},
		{&c.RestartBackoff, &d.RestartBackoff}, {&c.MaxBackoff, &d.MaxBackoff}, {&c.RestartWindow, &d.RestartWindow},
		{&c.PingInterval, &d.PingInterval}, {&c.PingTimeout, &d.PingTimeout}} {
		if *p.v == 0 {
			*p.v = *p.def
		}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Validate reports configuration errors: each server's, duplicate names, a missing
// registry, negative durations.
func (c Config) Validate() error {
	if c.Registry == nil {
		return errors.New("mcp: a tool registry is required")
	}
	if c.ConnectTimeout < 0 || c.ListTimeout < 0 || c.RestartBackoff < 0 || c.MaxBackoff < 0 || c.RestartWindow < 0 ||
		c.PingInterval < 0 || c.PingTimeout < 0 {
		return errors.New("mcp: timeouts and backoffs must not be negative")
	}
	seen := map[string]bool{}
	for _, s := range c.Servers {
		if err := s.Validate(); err != nil {
			return err
		}
		if seen[s.Name] {
			return fmt.Errorf("mcp: two servers are named %q", s.Name)
		}
		seen[s.Name] = true
	}
	return nil
}

// Status is one server as operators see it.
type Status struct {
	// Name is the server's name.
	Name string `json:"name"`
	// Transport is "stdio" or "http".
	Transport string `json:"transport"`
	// Connected is true while a connection is up.
	Connected bool `json:"connected"`
	// Tools are the registered tool names ("{server}__{tool}"), sorted.
	Tools []string `json:"tools"`
	// Connects counts the successful connections (1 + restarts that reconnected).
	Connects int64 `json:"connects"`
}

// Servers is a node's running MCP servers. Stop releases them.
type Servers struct {
	system  *actor.ActorSystem
	pid     *actor.PID
	servers []*server
	cancel  context.CancelFunc
	once    sync.Once
	stopErr error
}

// Start spawns the supervisor and one connection actor per server, and waits until each
// server is connected with its tools registered, or ctx ends. A server that fails its
// first connection fails Start (everything started is stopped again).
func Start(ctx context.Context, system *actor.ActorSystem, cfg Config) (*Servers, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	bg, cancel := context.WithCancel(context.Background())
	s := &Servers{system: system, cancel: cancel}
	for _, sc := range cfg.Servers {
		srv := newServer(bg, sc)
		srv.system, srv.reconnectWait = system, cfg.ConnectTimeout
		s.servers = append(s.servers, srv)
	}
	props := actor.PropsFromProducer(func() actor.Actor { return &supervisor{cfg: cfg, servers: s.servers} },
		actor.WithSupervisor(newSupervisor(cfg)))
	pid, err := system.Root.SpawnNamed(props, ActorName)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("mcp: spawn: %w", err)
	}
	s.pid = pid
	var errs []error
	for _, srv := range s.servers {
		select {
		case err := <-srv.first:
			if err != nil {
				errs = append(errs, err)
			}
		case <-ctx.Done():
			errs = append(errs, fmt.Errorf("mcp server %s: not connected before the start gave up: %w", srv.cfg.Name, ctx.Err()))
		}
	}
	if err := errors.Join(errs...); err != nil {
		sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer scancel()
		_ = s.Stop(sctx)
		return nil, err
	}
	return s, nil
}

// PID is the supervisor actor.
func (s *Servers) PID() *actor.PID { return s.pid }

// Status lists the servers in configuration order.
func (s *Servers) Status() []Status {
	out := make([]Status, 0, len(s.servers))
	for _, srv := range s.servers {
		out = append(out, srv.status())
	}
	return out
}

// Stop stops the connection actors, closes every connection (a stdio server's stdin is
// closed and the process waited for) and waits for the goroutines they own, until ctx
// ends. It is idempotent.
func (s *Servers) Stop(ctx context.Context) error {
	s.once.Do(func() {
		var errs []error
		if err := s.system.Root.StopFuture(s.pid).Wait(); err != nil {
			errs = append(errs, fmt.Errorf("mcp: stop supervisor: %w", err))
		}
		s.cancel() // dials in flight give up
		done := make(chan struct{})
		go func() {
			defer close(done)
			for _, srv := range s.servers {
				srv.closeAll()
				srv.wg.Wait()
			}
		}()
		select {
		case <-done:
		case <-ctx.Done():
			errs = append(errs, fmt.Errorf("mcp: stop: %w", ctx.Err()))
		}
		s.stopErr = errors.Join(errs...)
	})
	return s.stopErr
}

// server is what outlives a connection actor's restarts: the configuration, the live
// connection tools call through, the registered tools, and the goroutines and
// connections to clean up at Stop.
type server struct {
	cfg mcptool.ServerConfig
	// ctx ends at Stop: dials in flight give up.
	ctx context.Context
	// conn is the live connection (nil while down); tools call through it. setConn
	// stores a new one.
	conn atomic.Pointer[mcptool.Conn]
	// connChanged is closed (and replaced, under mu) when setConn stores a connection:
	// a call that asked for a reconnect waits on it.
	connChanged chan struct{}
	// system and actor reach the server's connection actor (set when it starts; a
	// restart keeps its PID); reconnectWait bounds a call's wait for a reconnect.
	system        *actor.ActorSystem
	actor         atomic.Pointer[actor.PID]
	reconnectWait time.Duration
	// first receives the outcome of the first connection (once).
	first    chan error
	reported atomic.Bool
	connects atomic.Int64
	// attempts numbers the connection attempts.
	attempts atomic.Int64
	// wg counts the goroutines of the server's connections (dials, watchers, lists,
	// closes).
	wg sync.WaitGroup

	mu sync.Mutex
	// tools are the registered tools, by registry name (written by the actor).
	tools map[string]*mcptool.Tool
	// open are the connections not closed yet, whoever holds them.
	open map[*mcptool.Conn]bool
}

var _ mcptool.Caller = (*server)(nil)

func newServer(ctx context.Context, cfg mcptool.ServerConfig) *server {
	return &server{cfg: cfg, ctx: ctx, first: make(chan error, 1), tools: map[string]*mcptool.Tool{}, open: map[*mcptool.Conn]bool{},
		connChanged: make(chan struct{})}
}

// CallTool implements mcptool.Caller on the live connection. A call an HTTP server
// refuses because it does not know the connection's session (it restarted and lost
// it: sessionLost) was not run; the connection actor reconnects at once and the call
// is sent again, once, on the new session.
func (s *server) CallTool(ctx context.Context, tool string, args json.RawMessage, key string) (*sdk.CallToolResult, error) {
	c := s.conn.Load()
	if c == nil {
		return nil, fmt.Errorf("mcp server %s: %w (restarting)", s.cfg.Name, mcptool.ErrNotConnected)
	}
	res, err := c.CallTool(ctx, tool, args, key)
	if err == nil || s.cfg.Transport() != mcptool.TransportHTTP || !sessionLost(err) || ctx.Err() != nil {
		return res, err
	}
	next, werr := s.reconnect(ctx, c, err)
	if werr != nil {
		return nil, errors.Join(err, werr)
	}
	return next.CallTool(ctx, tool, args, key)
}

// sessionLost reports whether err is an HTTP server's refusal of the connection's
// session, so the request did not run: the session is gone (404 with the session's id,
// the SDK's ErrSessionMissing), the server answered with another session's id
// ("mismatching session IDs"), it refused the unknown session with a JSON-RPC error
// -32000 naming it, or with a bare 400 or 404 (what the SDK reports as the status
// text alone), as servers on the TypeScript SDK do for a session id they never issued.
func sessionLost(err error) bool {
	msg := err.Error()
	if errors.Is(err, sdk.ErrSessionMissing) || strings.Contains(msg, "mismatching session IDs") {
		return true
	}
	var we *jsonrpc.Error
	if errors.As(err, &we) {
		return we.Code == codeServerError && strings.Contains(strings.ToLower(we.Message), "session")
	}
	return strings.HasSuffix(msg, ": "+http.StatusText(http.StatusBadRequest)) || strings.HasSuffix(msg, ": "+http.StatusText(http.StatusNotFound))
}

// codeServerError is JSON-RPC's generic server error, which servers on the TypeScript
// SDK answer a request for an unknown session with.
const codeServerError = -32000

// reconnect asks the connection actor to replace old, whose session the server lost
// (cause), and waits for the new connection, at most reconnectWait and until ctx ends.
func (s *server) reconnect(ctx context.Context, old *mcptool.Conn, cause error) (*mcptool.Conn, error) {
	pid := s.actor.Load()
	if pid == nil {
		return nil, errors.New("no connection actor to reconnect")
	}
	s.system.Root.Send(pid, &sessionGone{conn: old, err: cause})
	wctx, cancel := context.WithTimeout(ctx, s.reconnectWait)
	defer cancel()
	for {
		s.mu.Lock()
		c, changed := s.conn.Load(), s.connChanged
		s.mu.Unlock()
		if c != nil && c != old {
			return c, nil
		}
		select {
		case <-changed:
		case <-wctx.Done():
			return nil, fmt.Errorf("mcp server %s: reconnect after the server lost the session: %w", s.cfg.Name, wctx.Err())
		}
	}
}

// setConn makes c the live connection and wakes the calls waiting for a reconnect.
func (s *server) setConn(c *mcptool.Conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.conn.Store(c)
	close(s.connChanged)
	s.connChanged = make(chan struct{})
}

// reportFirst delivers the first connection's outcome to Start (once).
func (s *server) reportFirst(err error) {
	if s.reported.CompareAndSwap(false, true) {
		s.first <- err
	}
}

// track records c as open, so Stop closes it whoever holds it; after Stop began it
// closes c at once and reports false.
func (s *server) track(c *mcptool.Conn) bool {
	s.mu.Lock()
	stopped := s.ctx.Err() != nil
	if !stopped {
		s.open[c] = true
	}
	s.mu.Unlock()
	if stopped {
		s.close(c)
	}
	return !stopped
}

// close closes c in a goroutine of the server (a stdio server gets time to exit).
func (s *server) close(c *mcptool.Conn) {
	s.mu.Lock()
	delete(s.open, c)
	s.mu.Unlock()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		_ = c.Close()
	}()
}

// closeAll closes every connection still open.
func (s *server) closeAll() {
	s.mu.Lock()
	open := make([]*mcptool.Conn, 0, len(s.open))
	for c := range s.open {
		open = append(open, c)
	}
	s.mu.Unlock()
	for _, c := range open {
		s.close(c)
	}
}

func (s *server) status() Status {
	s.mu.Lock()
	names := make([]string, 0, len(s.tools))
	for n := range s.tools {
		names = append(names, n)
	}
	s.mu.Unlock()
	slices.Sort(names)
	return Status{Name: s.cfg.Name, Transport: s.cfg.Transport(), Connected: s.conn.Load() != nil, Tools: names, Connects: s.connects.Load()}
}
