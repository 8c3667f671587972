package gateway

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/cluster"
	"github.com/gorilla/websocket"
	"go.opentelemetry.io/otel/metric"

	"github.com/fathom-agents/fathom/auth"
	"github.com/fathom-agents/fathom/internal/errcode"
	"github.com/fathom-agents/fathom/live"
	"github.com/fathom-agents/fathom/messages"
	"github.com/fathom-agents/fathom/messages/sessiongrain"
)

// MaxBodyBytes bounds a request body, and by default a WebSocket frame.
const MaxBodyBytes = 1 << 20

// Sessions gives the gateway a session's grain. A node's implements it
// (internal/node.Node.GatewaySessions, over the generated grain clients); the gateway's
// own tests implement it in memory (fake_test.go).
type Sessions interface {
	// Session returns the grain of session id (activated on its first call).
	Session(id string) SessionGrain
}

// SessionGrain is what the gateway asks of a session grain: the methods of the generated
// client, with its signatures, so *sessiongrain.SessionGrainClient satisfies it as it is.
// A refusal is a *cluster.GrainErrorResponse whose reason is a messages.ErrorReason (the
// helpers of package messages/sessiongrain make them: ErrNotFound, ...); the gateway maps
// it to its error codes (toAPIError, internal/errcode). A session of another tenant than
// the caller's answers NOT_FOUND, as a missing one does.
type SessionGrain interface {
	Start(r *messages.StartRequest, opts ...cluster.GrainCallOption) (*messages.StartResponse, error)
	GetState(r *messages.GetStateRequest, opts ...cluster.GrainCallOption) (*messages.GetStateResponse, error)
	Timeline(r *messages.TimelineRequest, opts ...cluster.GrainCallOption) (*messages.TimelineResponse, error)
	StateAt(r *messages.StateAtRequest, opts ...cluster.GrainCallOption) (*messages.StateAtResponse, error)
	SetBreakpoint(r *messages.SetBreakpointRequest, opts ...cluster.GrainCallOption) (*messages.CommandResponse, error)
	ClearBreakpoints(r *messages.ClearBreakpointsRequest, opts ...cluster.GrainCallOption) (*messages.CommandResponse, error)
	Cancel(r *messages.CancelRequest, opts ...cluster.GrainCallOption) (*messages.CommandResponse, error)
	Pause(r *messages.PauseRequest, opts ...cluster.GrainCallOption) (*messages.CommandResponse, error)
	Resume(r *messages.ResumeRequest, opts ...cluster.GrainCallOption) (*messages.CommandResponse, error)
	ProvideInput(r *messages.ProvideInputRequest, opts ...cluster.GrainCallOption) (*messages.CommandResponse, error)
	Fork(r *messages.ForkRequest, opts ...cluster.GrainCallOption) (*messages.StartResponse, error)
	Send(r *messages.SendRequest, opts ...cluster.GrainCallOption) (*messages.CommandResponse, error)
	Access(r *messages.AccessRequest, opts ...cluster.GrainCallOption) (*messages.AccessResponse, error)
	SetPushConfig(r *messages.SetPushConfigRequest, opts ...cluster.GrainCallOption) (*messages.CommandResponse, error)
}

// The generated client is a SessionGrain.
var _ SessionGrain = (*sessiongrain.SessionGrainClient)(nil)

// Feed is where the gateway subscribes to sessions' events: stored ones first, then live
// ones, with no gap and no repeat, decoded (package live). A node's feed implements it
// (internal/node.Node.Feed, a live/feed.Feed).
type Feed interface {
	// Follow subscribes to session's events with seq > afterSeq and, when deltas > 0, to
	// its live deltas too, up to deltas of them waiting unread.
	Follow(session string, afterSeq uint64, deltas int) live.Subscription
	// LastSeq returns the seq of session's last stored event, 0 when it has none: the
	// gateway answers not_found to a subscription of a session without events.
	LastSeq(ctx context.Context, session string) (uint64, error)
}

// StartQueue orders the starts that a tenant's max_running_sessions refuses while the
// tenant has a start_queue_timeout: Wait runs start (a Start request of a principal of
// tenant) and, while it is refused so, waits in the tenant's first-come first-served
// queue and runs it again, until it is admitted, its queue time is up, or ctx ends (the
// client is gone: it leaves the queue and nothing is started).
type StartQueue interface {
	Wait(ctx context.Context, tenant string, start func() error) error
}

// Config configures the gateway. Zero durations and sizes take DefaultConfig's values.
type Config struct {
	// Token is the read+write bearer token. With neither Token nor ReadToken set, every
	// request is allowed everything (development only).
	Token string
	// ReadToken, when set, is a bearer token that may only read: state, timeline,
	// state_at, subscribe and the event stream. Write operations get 403.
	ReadToken string
	// Authenticator, when set, authenticates the credentials that are not the static
	// tokens (JWTs, API keys) into principals of their tenants; Token is an admin and
	// ReadToken a viewer of auth.DefaultTenant.
	Authenticator auth.Authenticator
	// Tenancy is the node's tenancy policy; it must be the session grains' (the grains
	// enforce it; the gateway applies it to the session list).
	Tenancy auth.Policy
	// Sessions reaches session grains. Required.
	Sessions Sessions
	// StartQueue, when set, orders the starts that wait for a tenant's running session to
	// end (start_queue_timeout): the node's queue (internal/node.Node.StartQueue), which
	// the Go API's starts share. Nil: the gateway keeps a queue of its own.
	StartQueue StartQueue
	// Feed serves subscriptions (a node's: internal/node.Node.Feed). Nil means subscribe
	// and the event stream answer CodeUnsupported.
	Feed Feed
	// Artifacts, when set, serves GET /v1/sessions/{id}/artifacts/{type}/{filename}.
	Artifacts ArtifactReader
	// Index, when set, answers GET /v1/sessions from the node's session index.
	Index SessionIndex
	// Deleter, when set, serves DELETE /v1/sessions/{id} (write scope).
	Deleter SessionDeleter
	// Memories, when set, serves /v1/memories (memories.go); unset, its routes answer
	// unsupported.
	Memories Memories
	// Meter, when set, records the gateway's own metrics (fathom_gateway_connections);
	// the node's meter provider, so GET /metrics serves them.
	Meter metric.Meter
	// Metrics, when set, serves GET /metrics (the Prometheus text format). Like /healthz it
	// needs no token: label values are bounded kinds, models and tools, never session data.
	Metrics http.Handler
	// Restarts, when set, lists the node's kept supervision events (oldest first) for
	// GET /v1/restarts (read scope).
	Restarts func(ctx context.Context) ([]live.Restart, error)
	// Gantt folds a session's events (seq 1 to the point asked) into its Gantt's JSON,
	// with restarts of its grain as marks: the gantt op (the node's GanttJSON, over the
	// session core's fold). Nil: the op answers unsupported.
	Gantt func(id string, events []*messages.Event, restarts []GanttRestart) ([]byte, error)
	// Cluster, when set, answers GET /v1/cluster (read scope): this member and the members
	// it sees (the console's cluster page).
	Cluster func(ctx context.Context) (ClusterInfo, error)
	// Drain, when set, serves POST /v1/node/drain (admin, drain.go): it drains the node
	// and returns once it drained (or ctx ended; the drain goes on).
	Drain func(ctx context.Context) (DrainReport, error)
	// Version and JournalFormat are the node's build version and journal format, told by
	// GET /readyz (headers Fathom-Version and Fathom-Journal-Format, and the JSON body).
	// The node's Gateway fills them in.
	Version       string
	JournalFormat int
	// Ready reports whether the node can serve (nil error) for /readyz. A part that is not
	// ready is a *NotReadyError: /readyz names the part to anyone and shows the error
	// only to a caller with a token.
	Ready func() error
	// ConsoleOIDC, when set, lets the web console sign in with the OIDC
	// authorization-code flow with PKCE (GET /v1/console/config tells it how); nil: the
	// console signs in with a pasted token only.
	ConsoleOIDC *ConsoleOIDC
	// AllowedOrigins are the browser origins ("https://console.example.com", or "*" for
	// any) allowed to open WebSockets and to call the HTTP routes (CORS: preflights
	// answered, Access-Control-Allow-Origin echoing the origin, credentials allowed only
	// to an origin listed by name) besides the gateway's own host. Requests without an
	// Origin header (non-browser clients) are always allowed.
	AllowedOrigins []string
	// RequestTimeout bounds one grain call. Default 10s.
	RequestTimeout time.Duration
	// MaxFrameBytes bounds one client frame; a larger one closes the connection with
	// 1009 (message too big). Default MaxBodyBytes.
	MaxFrameBytes int
	// SendQueue is how many replies (acks, errors) may wait to be written to one
	// connection. Default 64. Subscriptions' events are not queued: the connection's
	// writer pulls them from the feed as it writes (a slow client's events stay in the
	// journal, and the feed catches it up from there).
	SendQueue int
	// SlowConsumerTimeout is how long one write may stay blocked (the client is not
	// reading), or a reply wait for room in a full send queue, before the connection is
	// closed with CloseSlowConsumer. Default 5s.
	SlowConsumerTimeout time.Duration
	// WriteTimeout bounds writing one frame to the socket. Default 10s.
	WriteTimeout time.Duration
	// PingInterval is how often the server pings an idle client. Default 30s.
	PingInterval time.Duration
	// PongWait is how long the server waits for any frame (pongs included) before it
	// drops the connection. Must exceed PingInterval. Default 75s.
	PongWait time.Duration
	// CloseGrace is how long the server waits for the client's close frame after
	// sending its own. Default 2s.
	CloseGrace time.Duration
	// MaxSubscriptions bounds the subscriptions of one connection. Default 64.
	MaxSubscriptions int
	// MaxInflight bounds the concurrent grain calls of one connection; more requests
	// wait. Default 16.
	MaxInflight int
	// DeltaBuffer is how many token deltas may wait per subscription (older ones are
	// dropped first). Default 16.
	DeltaBuffer int
	// Logger receives connection and request errors. Nil means slog.Default().
	Logger *slog.Logger
}

// DefaultConfig returns the defaults (no tokens, no Sessions).
func DefaultConfig() Config {
	return Config{
		RequestTimeout:      10 * time.Second,
		MaxFrameBytes:       MaxBodyBytes,
		SendQueue:           64,
		SlowConsumerTimeout: 5 * time.Second,
		WriteTimeout:        10 * time.Second,
		PingInterval:        30 * time.Second,
		PongWait:            75 * time.Second,
		CloseGrace:          2 * time.Second,
		MaxSubscriptions:    64,
		MaxInflight:         16,
		DeltaBuffer:         16,
	}
}

// withDefaults fills zero fields from DefaultConfig.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.StartQueue == nil {
		c.StartQueue = errcode.NewStartQueue(nil)
	}
	setDur := func(v *time.Duration, def time.Duration) {
		if *v <= 0 {
			*v = def
		}
	}
	setInt := func(v *int, def int) {
		if *v <= 0 {
			*v = def
		}
	}
	setDur(&c.RequestTimeout, d.RequestTimeout)
	setDur(&c.SlowConsumerTimeout, d.SlowConsumerTimeout)
	setDur(&c.WriteTimeout, d.WriteTimeout)
	setDur(&c.PingInterval, d.PingInterval)
	setDur(&c.PongWait, d.PongWait)
	setDur(&c.CloseGrace, d.CloseGrace)
	setInt(&c.MaxFrameBytes, d.MaxFrameBytes)
	setInt(&c.SendQueue, d.SendQueue)
	setInt(&c.MaxSubscriptions, d.MaxSubscriptions)
	setInt(&c.MaxInflight, d.MaxInflight)
	setInt(&c.DeltaBuffer, d.DeltaBuffer)
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Validate reports a configuration the gateway cannot run with (zero values count as
// their defaults).
func (c Config) Validate() error {
	c = c.withDefaults()
	switch {
	case c.Sessions == nil:
		return errors.New("gateway: Sessions is required")
	case c.PongWait <= c.PingInterval:
		return fmt.Errorf("gateway: PongWait (%s) must exceed PingInterval (%s)", c.PongWait, c.PingInterval)
	case c.Token != "" && c.Token == c.ReadToken:
		return errors.New("gateway: the read token must differ from the read+write token")
	}
	if err := c.ConsoleOIDC.validate(); err != nil {
		return err
	}
	for _, o := range c.AllowedOrigins {
		if o == "*" {
			continue
		}
		if u, err := url.Parse(o); err != nil || u.Scheme == "" || u.Host == "" {
			return fmt.Errorf("gateway: allowed origin %q is not scheme://host[:port] or *", o)
		}
	}
	return nil
}

// Handler is the gateway's http.Handler. Shutdown drains it.
type Handler struct {
	cfg      Config
	authn    auth.Chain // the static tokens, then Config.Authenticator
	mux      *http.ServeMux
	patterns []string // every pattern registered on mux (handle), in order: openapi.json documents each
	upgrader websocket.Upgrader
	frames   *frameCache // event and delta frames, rendered once for every subscriber

	// base is cancelled by Shutdown: it ends event streams.
	base       context.Context
	cancelBase context.CancelFunc

	mu      sync.Mutex
	conns   map[*conn]struct{}
	streams int // open HTTP event streams
	closed  bool
	wg      sync.WaitGroup // connections, HTTP event streams and drains

	metricsReg metric.Registration // metrics.go; nil without Config.Meter
}

// New returns the gateway handler.
func New(cfg Config) (*Handler, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	h := &Handler{cfg: cfg, mux: http.NewServeMux(), frames: newFrameCache(4096, 1024), conns: map[*conn]struct{}{}}
	h.authn = auth.Chain{auth.Static{Token: cfg.Token, ReadToken: cfg.ReadToken}}
	if cfg.Authenticator != nil {
		h.authn = append(h.authn, cfg.Authenticator)
	}
	h.base, h.cancelBase = context.WithCancel(context.Background())
	h.upgrader = websocket.Upgrader{
		HandshakeTimeout: 10 * time.Second,
		Subprotocols:     []string{Subprotocol},
		CheckOrigin:      h.checkOrigin,
		// Connections share write buffers between frames: an idle subscriber holds none.
		WriteBufferPool: &sync.Pool{},
		Error: func(w http.ResponseWriter, _ *http.Request, status int, reason error) {
			code := CodeInvalidArgument
			if status == http.StatusForbidden {
				code = CodePermissionDenied
			}
			writeError(w, &apiError{code: code, msg: reason.Error()})
		},
	}
	h.routes()
	if err := h.registerMetrics(); err != nil {
		return nil, err
	}
	return h, nil
}

func (h *Handler) routes() {
	h.handle("GET /healthz", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") }))
	h.handle("GET /readyz", http.HandlerFunc(h.readyz))
	h.handle("GET /v1/ws", h.serveWSRoute()) // wsauth.go
	h.handle("POST /v1/sessions", h.httpOp(OpStart))
	h.handle("GET /v1/sessions", h.require(ScopeRead, h.listSessions)) // list.go
	h.handle("GET /v1/sessions/{id}", h.httpOp(OpState))
	h.handle("DELETE /v1/sessions/{id}", h.require(ScopeWrite, h.deleteSession)) // delete.go
	h.handle("GET /v1/sessions/{id}/timeline", h.httpOp(OpTimeline))
	h.handle("GET /v1/sessions/{id}/state", h.httpOp(OpStateAt))
	h.handle("GET /v1/sessions/{id}/gantt", h.httpOp(OpGantt)) // gantt.go
	h.handle("GET /v1/sessions/{id}/events", h.require(ScopeRead, h.streamEvents))
	h.handle("GET /v1/sessions/{id}/events/{seq}", h.require(ScopeRead, h.serveEvent))    // transcript.go
	h.handle("GET /v1/sessions/{id}/transcript", h.require(ScopeRead, h.serveTranscript)) // transcript.go
	h.handle("POST /v1/sessions/{id}/input", h.httpOp(OpInput))
	h.handle("POST /v1/sessions/{id}/pause", h.httpOp(OpPause))
	h.handle("POST /v1/sessions/{id}/resume", h.httpOp(OpResume))
	h.handle("POST /v1/sessions/{id}/breakpoints", h.httpOp(OpSetBreakpoint))
	h.handle("DELETE /v1/sessions/{id}/breakpoints", h.httpOp(OpClearBreakpoints))
	h.handle("POST /v1/sessions/{id}/fork", h.httpOp(OpFork))
	h.handle("POST /v1/sessions/{id}/cancel", h.httpOp(OpCancel))
	h.handle("POST /v1/sessions/{id}/messages", h.httpOp(OpSend))
	h.handle("GET /v1/sessions/{id}/artifacts/{type}/{filename}", h.require(ScopeRead, h.serveArtifact))
	if h.cfg.Metrics != nil {
		h.handle("GET /metrics", h.cfg.Metrics)
	}
	h.handle("GET /v1/restarts", h.require(ScopeAdmin, h.streamRestarts))
	h.handle("GET /v1/whoami", h.require(ScopeRead, h.whoami))          // cluster.go
	h.handle("GET /v1/cluster", h.require(ScopeAdmin, h.cluster))       // cluster.go
	h.handle("POST /v1/node/drain", h.require(ScopeAdmin, h.drainNode)) // drain.go
	h.memoryRoutes()                                                    // memories.go
	h.consoleRoutes()
	h.handle("GET /v1/openapi.json", http.HandlerFunc(serveOpenAPI)) // openapi.go
	h.handle("/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, errorf(CodeNotFound, "no route %s %s", r.Method, r.URL.Path))
	}))
}

// handle registers handler at pattern on the mux and records the pattern (the OpenAPI
// document's test checks that each one is documented).
func (h *Handler) handle(pattern string, handler http.Handler) {
	h.patterns = append(h.patterns, pattern)
	h.mux.Handle(pattern, handler)
}

// ServeHTTP implements http.Handler; every request gets an access log line, and the
// CORS headers of its origin (cors.go).
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.accessLog(http.HandlerFunc(h.serve), w, r)
}

func (h *Handler) serve(w http.ResponseWriter, r *http.Request) {
	if h.cors(w, r) {
		return
	}
	h.mux.ServeHTTP(w, r)
}

func (h *Handler) checkOrigin(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true // not a browser
	}
	u, err := url.Parse(origin)
	if err != nil {
		return false
	}
	if strings.EqualFold(u.Host, r.Host) {
		return true
	}
	for _, o := range h.cfg.AllowedOrigins {
		if o == "*" || strings.EqualFold(strings.TrimSuffix(o, "/"), origin) {
			return true
		}
	}
	return false
}

// track registers a connection or stream; false once Shutdown has begun.
func (h *Handler) track(c *conn) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return false
	}
	if c != nil {
		h.conns[c] = struct{}{}
	} else {
		h.streams++
	}
	h.wg.Add(1)
	return true
}

func (h *Handler) untrack(c *conn) {
	h.mu.Lock()
	if c != nil {
		delete(h.conns, c)
	} else {
		h.streams--
	}
	h.mu.Unlock()
	h.wg.Done()
}

func (h *Handler) isClosed() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.closed
}

// Connections returns the number of open WebSocket connections.
func (h *Handler) Connections() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.conns)
}

// Shutdown drains the gateway: new WebSockets and event streams are refused (503),
// /readyz fails, HTTP event streams end, and every WebSocket stops its subscriptions,
// finishes its in-flight requests, flushes its queued frames and closes with 1001
// (going away). It waits for all of that or for ctx; when ctx ends first the remaining
// sockets are closed at once and ctx's error is returned. Call it before
// http.Server.Shutdown, which does not wait for hijacked (WebSocket) connections.
// It is idempotent.
func (h *Handler) Shutdown(ctx context.Context) error {
	h.mu.Lock()
	first := !h.closed
	h.closed = true
	conns := make([]*conn, 0, len(h.conns))
	for c := range h.conns {
		conns = append(conns, c)
	}
	if first {
		h.wg.Add(len(conns))
	}
	h.mu.Unlock()
	h.cancelBase()
	if first && h.metricsReg != nil {
		_ = h.metricsReg.Unregister()
	}
	if first {
		for _, c := range conns {
			go func() {
				defer h.wg.Done()
				c.drain()
			}()
		}
	}
	done := make(chan struct{})
	go func() {
		h.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		for _, c := range conns {
			c.abort()
		}
		return fmt.Errorf("gateway shutdown: %w", ctx.Err())
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// writeError answers e as {"error": {code, message, request_id}}; the request id is the
// one the access log set on the response (RequestIDHeader), and e goes to the access
// log with it.
func writeError(w http.ResponseWriter, e *apiError) {
	status := e.status
	if status == 0 {
		status = statusOf(e.code)
	}
	if rec, ok := w.(interface{ recordError(*apiError) }); ok {
		rec.recordError(e)
	}
	if e.retryAfter != "" {
		w.Header().Set("Retry-After", e.retryAfter)
	}
	writeJSON(w, status, map[string]any{"error": map[string]string{"code": e.code, "message": e.msg,
		"request_id": w.Header().Get(RequestIDHeader)}})
}

// NewID returns a random id with a prefix ("s-3f9c...").
func NewID(prefix string) string {
	var b [10]byte
	_, _ = rand.Read(b[:])
	return prefix + "-" + hex.EncodeToString(b[:])
}
