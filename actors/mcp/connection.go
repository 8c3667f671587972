package mcp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/fathom-agents/fathom/tools"
	mcptool "github.com/fathom-agents/fathom/tools/mcp"
)

// connection keeps one server connected, supervised by the supervisor: it dials at
// start, registers the server's tools, watches the connection, pings the server every
// PingInterval, and fails with *ExitedError when the connection ends or a ping goes
// unanswered, so the supervisor restarts it (a new process, a new HTTP session) after a
// backoff. A call that finds the HTTP session gone asks it to reconnect at once
// (sessionGone). Dials, lists and waits run in goroutines of the server handle and report as
// messages; none touches the actor's context.
type connection struct {
	cfg Config
	srv *server
	log *slog.Logger

	// attempt is the current connection attempt's number (server-wide, across
	// restarts); messages of older attempts are stale.
	attempt int
	conn    *mcptool.Conn
	// listing is true while a tools/list runs; relist asks for another one after it.
	listing, relist bool
}

// Messages a connection sends itself from its goroutines.
type (
	// dialed: connection attempt n ended (conn and its tools, or err).
	dialed struct {
		attempt int
		conn    *mcptool.Conn
		infos   []mcptool.ToolInfo
		err     error
	}
	// toolsChanged: the server of attempt n sent notifications/tools/list_changed.
	toolsChanged struct{ attempt int }
	// listed: a tools/list of attempt n ended.
	listed struct {
		attempt int
		infos   []mcptool.ToolInfo
		err     error
	}
	// closed: the connection of attempt n ended, or did not answer a ping (err says
	// why).
	closed struct {
		attempt int
		err     error
	}
	// sessionGone: a call found that the HTTP server no longer knows conn's session
	// (err); server.CallTool waits for the new connection.
	sessionGone struct {
		conn *mcptool.Conn
		err  error
	}
)

// ExitedError is why a connection actor fails: its server's connection ended (the
// process exited or crashed, the HTTP session broke) or could not be opened again. It is
// the Reason of the supervision event.
type ExitedError struct {
	Server string
	Err    error
}

func (e *ExitedError) Error() string {
	return fmt.Sprintf("mcp server %s: connection lost: %v", e.Server, e.Err)
}

// Unwrap returns the cause.
func (e *ExitedError) Unwrap() error { return e.Err }

func newConnectionProps(cfg Config, srv *server) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor {
		return &connection{cfg: cfg, srv: srv, log: cfg.Logger.With("mcp_server", srv.cfg.Name)}
	})
}

// Receive implements actor.Actor.
func (c *connection) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *actor.Started:
		c.srv.actor.Store(ctx.Self())
		c.dial(ctx)
	case *sessionGone:
		c.onSessionGone(ctx, msg)
	case *dialed:
		c.onDialed(ctx, msg)
	case *toolsChanged:
		c.onToolsChanged(ctx, msg)
	case *listed:
		c.onListed(ctx, msg)
	case *closed:
		c.onClosed(msg)
	case *actor.Restarting, *actor.Stopping:
		c.release()
	case *actor.Stopped, *actor.Restart:
	default:
		c.log.Warn("mcp connection: unexpected message", "type", fmt.Sprintf("%T", msg))
	}
}

// dial starts a connection attempt in a goroutine: connect, then list the tools.
func (c *connection) dial(ctx actor.Context) {
	c.attempt = int(c.srv.attempts.Add(1))
	n, self, root, srv, timeout := c.attempt, ctx.Self(), ctx.ActorSystem().Root, c.srv, c.cfg.ConnectTimeout
	opts := mcptool.Options{Logger: c.log, OnToolsChanged: func() { root.Send(self, &toolsChanged{attempt: n}) }}
	srv.wg.Add(1)
	go func() {
		defer srv.wg.Done()
		dctx, cancel := context.WithTimeout(srv.ctx, timeout)
		defer cancel()
		conn, err := mcptool.Dial(dctx, srv.cfg, opts)
		if err != nil {
			root.Send(self, &dialed{attempt: n, err: err})
			return
		}
		if !srv.track(conn) { // from here, Stop closes it whoever holds it
			return // stopping: closed already
		}
		infos, err := conn.Tools(dctx)
		if err != nil {
			srv.close(conn)
			root.Send(self, &dialed{attempt: n, err: err})
			return
		}
		root.Send(self, &dialed{attempt: n, conn: conn, infos: infos})
	}()
}

func (c *connection) onDialed(ctx actor.Context, msg *dialed) {
	if msg.attempt != c.attempt || c.conn != nil {
		if msg.conn != nil {
			c.srv.close(msg.conn)
		}
		return
	}
	if msg.err != nil {
		if !c.srv.reported.Load() {
			// The first connection of the node: Start fails with the cause and stops
			// everything; no restart loop on a server that was never up.
			c.log.Error("mcp server did not start", "error", msg.err)
			c.srv.reportFirst(msg.err)
			return
		}
		panic(&ExitedError{Server: c.srv.cfg.Name, Err: msg.err})
	}
	c.conn = msg.conn
	c.apply(msg.infos)
	c.srv.setConn(msg.conn)
	if c.srv.connects.Add(1) > 1 {
		c.log.Info("mcp server reconnected", "connects", c.srv.connects.Load())
	}
	c.srv.reportFirst(nil)
	n, self, root, conn := c.attempt, ctx.Self(), ctx.ActorSystem().Root, msg.conn
	done := make(chan struct{})
	c.srv.wg.Add(2)
	go func() {
		defer c.srv.wg.Done()
		err := conn.Wait()
		close(done)
		if conn.Closed() {
			return // closed by us (restart or stop): nothing to report
		}
		if err == nil {
			err = errors.New("the server closed the connection")
		}
		root.Send(self, &closed{attempt: n, err: err})
	}()
	go func() {
		defer c.srv.wg.Done()
		c.ping(conn, done, func(err error) { root.Send(self, &closed{attempt: n, err: err}) })
	}()
}

// ping pings conn every PingInterval until it ends (done) or the node stops; the first
// ping that fails or is not answered within PingTimeout is reported (down) and ends
// the loop.
func (c *connection) ping(conn *mcptool.Conn, done <-chan struct{}, down func(error)) {
	interval, timeout, stop := c.cfg.PingInterval, c.cfg.PingTimeout, c.srv.ctx.Done()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-stop:
			return
		case <-t.C:
		}
		pctx, cancel := context.WithTimeout(c.srv.ctx, timeout)
		err := conn.Ping(pctx)
		cancel()
		if err != nil && !conn.Closed() {
			down(fmt.Errorf("no answer to a ping within %s: %w", timeout, err))
			return
		}
	}
}

// onSessionGone reconnects at once when the server lost the live connection's session
// (it restarted): the old connection is released and a new attempt dials. A message
// about an older connection is stale.
func (c *connection) onSessionGone(ctx actor.Context, msg *sessionGone) {
	if c.conn == nil || msg.conn != c.conn {
		return
	}
	c.log.Info("mcp server lost the session: reconnecting", "error", msg.err)
	c.release()
	c.listing, c.relist = false, false // a list of the old attempt is stale
	c.dial(ctx)
}

func (c *connection) onToolsChanged(ctx actor.Context, msg *toolsChanged) {
	if msg.attempt != c.attempt || c.conn == nil {
		return
	}
	if c.listing {
		c.relist = true
		return
	}
	c.list(ctx)
}

// list runs a tools/list in a goroutine.
func (c *connection) list(ctx actor.Context) {
	c.listing, c.relist = true, false
	n, self, root, conn, srv, timeout := c.attempt, ctx.Self(), ctx.ActorSystem().Root, c.conn, c.srv, c.cfg.ListTimeout
	srv.wg.Add(1)
	go func() {
		defer srv.wg.Done()
		lctx, cancel := context.WithTimeout(srv.ctx, timeout)
		defer cancel()
		infos, err := conn.Tools(lctx)
		root.Send(self, &listed{attempt: n, infos: infos, err: err})
	}()
}

func (c *connection) onListed(ctx actor.Context, msg *listed) {
	if msg.attempt != c.attempt || c.conn == nil {
		return
	}
	c.listing = false
	if msg.err != nil {
		// A dead connection is reported by its watcher; anything else keeps the old list.
		c.log.Warn("mcp server: tools/list after list_changed failed; keeping the tools listed before", "error", msg.err)
	} else {
		c.apply(msg.infos)
	}
	if c.relist {
		c.list(ctx)
	}
}

func (c *connection) onClosed(msg *closed) {
	if msg.attempt != c.attempt || c.conn == nil {
		return
	}
	c.log.Warn("mcp server connection lost", "error", msg.err)
	c.release()
	panic(&ExitedError{Server: c.srv.cfg.Name, Err: msg.err})
}

// release withdraws the live connection (calls fail with "not connected" until the next
// one) and closes it in the background.
func (c *connection) release() {
	if c.conn == nil {
		return
	}
	c.srv.conn.CompareAndSwap(c.conn, nil)
	c.srv.close(c.conn)
	c.conn = nil
}

// apply makes the registry hold exactly the listed tools of this server: new and
// changed ones registered, vanished ones removed. A tool whose name or schema is not
// usable, or whose name another tool of the node holds, is left out with a warning.
func (c *connection) apply(infos []mcptool.ToolInfo) {
	reg, name := c.cfg.Registry, c.srv.cfg.Name
	want := make(map[string]*mcptool.Tool, len(infos))
	for _, info := range infos {
		t, err := mcptool.NewTool(name, info, c.srv)
		if err != nil {
			c.log.Warn("mcp tool left out", "tool", info.Name, "error", err)
			continue
		}
		want[t.Name()] = t
	}
	c.srv.mu.Lock()
	defer c.srv.mu.Unlock()
	for n := range c.srv.tools {
		if _, keep := want[n]; !keep {
			reg.Unregister(n)
			delete(c.srv.tools, n)
		}
	}
	for n, t := range want {
		if _, ours := c.srv.tools[n]; !ours {
			if _, taken := reg.Get(n); taken {
				c.log.Warn("mcp tool left out: the node already has a tool of that name", "tool", n)
				continue
			}
		}
		if err := reg.Replace(t); err != nil {
			c.log.Warn("mcp tool left out", "tool", n, "error", err)
			reg.Unregister(n)
			delete(c.srv.tools, n)
			continue
		}
		c.srv.tools[n] = t
	}
	names := make([]string, 0, len(c.srv.tools))
	for n := range c.srv.tools {
		names = append(names, n)
	}
	slices.Sort(names)
	c.log.Info("mcp server tools registered", "tools", names)
}

var _ tools.Tool = (*mcptool.Tool)(nil)
