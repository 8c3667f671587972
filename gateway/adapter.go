package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync"

	"github.com/asynkron/protoactor-go/cluster"

	"github.com/fathom-agents/fathom/auth"
	"github.com/fathom-agents/fathom/internal/listing"
	"github.com/fathom-agents/fathom/live"
	"github.com/fathom-agents/fathom/messages"
)

// The seam of the protocol adapters (A2A, AG-UI, the MCP server, ...): each one is an
// http.Handler mounted on the gateway behind its authentication (Mount), that runs the
// gateway's operations for the request's principal (Do) and follows a session's
// journal-backed live feed (Follow). They answer exactly what the gateway's own routes
// answer, another tenant's session included (CodeNotFound, as a missing one).

// Mount serves handler at pattern (a net/http ServeMux pattern such as "POST /v1/agui")
// for principals whose scope is at least need; the handler finds the principal with
// auth.FromContext. It must be called before the gateway serves requests.
func (h *Handler) Mount(pattern string, need Scope, handler http.Handler) {
	h.handle(pattern, h.require(need, handler.ServeHTTP))
}

// MountPublic serves handler at pattern with no credential check (the A2A agent card,
// which clients read before they have a token). It must be called before the gateway
// serves requests.
func (h *Handler) MountPublic(pattern string, handler http.Handler) {
	h.handle(pattern, handler)
}

// Do runs one request-answer operation (req.Op: OpStart, OpState, OpSend, OpInput,
// OpCancel, ...; the same requests the WebSocket takes) for the principal in ctx, and
// returns its JSON result (the HTTP route's body). A principal the session grain does
// not let act (a viewer starting a session) gets CodePermissionDenied, as on the HTTP
// route. A start waiting in its tenant's start queue leaves it when ctx ends. Errors
// carry the gateway's codes: ErrorCode reads them.
func (h *Handler) Do(ctx context.Context, req Request) (json.RawMessage, error) {
	if p, ok := auth.FromContext(ctx); ok {
		req.caller = auth.ToMessage(p)
	}
	req.ctx = ctx
	res, err := h.run(&req)
	if err != nil {
		return nil, toAPIError(err)
	}
	return res.body, nil
}

// Follow subscribes the principal in ctx to session id's events with seq > fromSeq, and
// to its token deltas when deltas is true: the events stored so far first, from the
// journal, then each one as it is stored, on any node. A session the principal may not
// read answers CodeNotFound, as a missing one. The caller closes the subscription.
func (h *Handler) Follow(ctx context.Context, id string, fromSeq uint64, deltas bool) (live.Subscription, error) {
	if err := checkSessionID(id); err != nil {
		return nil, toAPIError(err)
	}
	if h.cfg.Feed == nil {
		return nil, errorf(CodeUnsupported, "this gateway has no event feed")
	}
	caller := callerFromContext(ctx)
	if _, err := h.sessionHead(ctx, caller, id); err != nil {
		return nil, err
	}
	buffer := 0
	if deltas {
		buffer = h.cfg.DeltaBuffer
	}
	return h.cfg.Feed.Follow(id, fromSeq, buffer), nil
}

// Events hands fn the stored events of session id after seq from through seq until (0:
// through its last), in order, for the principal in ctx: an adapter's read of a session's
// past (a task's history). A session the principal may not read answers CodeNotFound, as
// a missing one; an until past the session's last event CodeFailedPrecondition.
func (h *Handler) Events(ctx context.Context, id string, from, until uint64, fn func(*messages.Event)) error {
	if err := checkSessionID(id); err != nil {
		return toAPIError(err)
	}
	if err := h.readThrough(ctx, callerFromContext(ctx), id, from, until, fn); err != nil {
		return toAPIError(err)
	}
	return nil
}

// Stream registers a long-running answer of a mounted handler (an event stream, a tool
// call that waits for its session): ctx is parent, also done once the gateway's Shutdown
// begins (the answer ends then; the session goes on), and Shutdown waits until done is
// called. After Shutdown has begun it answers CodeUnavailable and nothing is registered.
func (h *Handler) Stream(parent context.Context) (ctx context.Context, done func(), err error) {
	if !h.track(nil) {
		return nil, nil, errorf(CodeUnavailable, "the gateway is shutting down")
	}
	ctx, cancel := context.WithCancel(parent)
	stop := context.AfterFunc(h.base, cancel)
	var once sync.Once
	return ctx, func() {
		once.Do(func() {
			stop()
			cancel()
			h.untrack(nil)
		})
	}, nil
}

// OnShutdown registers f to run once the gateway's Shutdown begins (a mounted handler
// closes its standing connections there); Shutdown waits for f to return. Registered
// after Shutdown has begun, f runs at once.
func (h *Handler) OnShutdown(f func()) {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		f()
		return
	}
	h.wg.Add(1)
	h.mu.Unlock()
	context.AfterFunc(h.base, func() {
		defer h.wg.Done()
		f()
	})
}

// EventJSON is event ev of session id as the gateway's streams render it (the event
// frame's JSON object).
func (h *Handler) EventJSON(id string, u live.Update) (json.RawMessage, error) {
	if u.IsDelta {
		return h.frames.delta(id, u.Delta), nil
	}
	b, err := h.frames.event(id, u.Event)
	if err != nil {
		return nil, toAPIError(err)
	}
	return b, nil
}

// ErrorCode returns the gateway code (CodeNotFound, CodeInvalidArgument, ...) and the
// client-facing message of an error Do or Follow returned; CodeInternal and a plain
// message for any other error.
func ErrorCode(err error) (code, msg string) {
	e := toAPIError(err)
	return e.code, e.msg
}

// WriteError answers an adapter's request with the gateway's JSON error body
// ({"error": {code, message, request_id}}) and code's HTTP status (CodeInvalidArgument:
// 400, CodeNotFound: 404, ...).
func WriteError(w http.ResponseWriter, code, msg string) {
	writeError(w, &apiError{code: code, msg: msg})
}

func callerFromContext(ctx context.Context) *messages.Principal {
	if p, ok := auth.FromContext(ctx); ok {
		return auth.ToMessage(p)
	}
	return nil
}

// List returns the page q selects from the session index (ListQuery's Status, Since,
// Until, cursor, Limit, ...) for the principal in ctx: only its own tenant's sessions (an
// administrator's too: an adapter lists the caller's tenant), and only its own sessions
// where the tenancy policy says members read their own. CodeUnsupported when the node
// keeps no session index, CodeInvalidArgument for a query listing.Check refuses.
func (h *Handler) List(ctx context.Context, q ListQuery) (SessionList, error) {
	if h.cfg.Index == nil {
		return SessionList{}, errorf(CodeUnsupported, "this gateway has no session index")
	}
	if err := listing.Check(q); err != nil {
		return SessionList{}, errorf(CodeInvalidArgument, "%v", err)
	}
	p, _ := auth.FromContext(ctx)
	listing.Scope(&q, h.cfg.Tenancy, p, false, p.Tenant)
	ctx, cancel := context.WithTimeout(ctx, h.cfg.RequestTimeout)
	defer cancel()
	out, err := listing.List(ctx, h.cfg.Index, q)
	if errors.Is(err, ErrNoIndex) {
		return SessionList{}, errorf(CodeUnsupported, "%v", err)
	}
	if err != nil {
		h.cfg.Logger.Warn("list sessions failed", "error", err)
		return SessionList{}, hidden(CodeUnavailable, "the session index is unavailable; retry", err)
	}
	return out, nil
}

// SetPushConfig sets (or, with req.Delete, removes) one of session id's push configs for
// the principal in ctx (the A2A push-notification methods): req's caller and, when
// empty, its command id are filled in. Its errors carry the gateway's codes (a session
// the principal may not act on: CodeNotFound or CodePermissionDenied, as the gateway's
// other writes answer).
func (h *Handler) SetPushConfig(ctx context.Context, id string, req *messages.SetPushConfigRequest) error {
	if err := checkSessionID(id); err != nil {
		return toAPIError(err)
	}
	req.Caller = callerFromContext(ctx)
	if req.CommandId == "" {
		req.CommandId = NewID("cmd")
	}
	if _, err := h.grain(id).SetPushConfig(req, cluster.WithTimeout(h.cfg.RequestTimeout)); err != nil {
		return toAPIError(err)
	}
	return nil
}
