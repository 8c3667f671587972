package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/gorilla/websocket"

	"github.com/fathom-agents/fathom/auth"
	"github.com/fathom-agents/fathom/messages"
)

// OpAuth is the first frame of a WebSocket opened without a credential: {"op":"auth",
// "token":"<credential>"}. A client that cannot set the Authorization header and would
// rather not put its credential in Sec-WebSocket-Protocol offers the subprotocol
// Subprotocol alone, and authenticates with this frame.
const OpAuth = "auth"

// FirstFrameTimeout bounds the wait for the auth frame of a WebSocket opened without a
// credential.
const FirstFrameTimeout = 10 * time.Second

// serveWSRoute serves GET /v1/ws: with a credential (the Authorization header or a
// bearer.<credential> subprotocol) as any route; without one, when the client offers
// the subprotocol Subprotocol, the upgrade goes ahead and the first frame must be
// OpAuth; otherwise 401 before the upgrade.
func (h *Handler) serveWSRoute() http.Handler {
	authed := h.require(ScopeRead, h.serveWS)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h.authEnabled() && !hasCredential(r) && offersSubprotocol(r) {
			h.serveWS(w, r) // no principal yet: serveWS reads the auth frame
			return
		}
		authed.ServeHTTP(w, r)
	})
}

// hasCredential reports whether r carries a bearer credential, valid or not.
func hasCredential(r *http.Request) bool {
	if _, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		return true
	}
	_, ok := subprotocolToken(r)
	return ok
}

// offersSubprotocol reports whether r offers Subprotocol.
func offersSubprotocol(r *http.Request) bool {
	for _, line := range r.Header.Values("Sec-WebSocket-Protocol") {
		for _, p := range strings.Split(line, ",") {
			if strings.TrimSpace(p) == Subprotocol {
				return true
			}
		}
	}
	return false
}

// authFrame is the first frame of a WebSocket opened without a credential.
type authFrame struct {
	Op    string          `json:"op"`
	ID    json.RawMessage `json:"id,omitempty"`
	Token string          `json:"token"`
}

// firstFrameAuth reads and checks the auth frame of a connection upgraded without a
// credential. It answers the frame with an ack naming the principal, or with an
// unauthenticated error frame and a close with code 1008 (policy violation), and
// returns the principal (nil on failure: the caller closes the socket).
func (h *Handler) firstFrameAuth(r *http.Request, ws *websocket.Conn) *messages.Principal {
	refuse := func(req *Request, msg string) *messages.Principal {
		deadline := time.Now().Add(h.cfg.WriteTimeout)
		_ = ws.SetWriteDeadline(deadline)
		_ = ws.WriteMessage(websocket.TextMessage, errorBytes(req, "", "", errorf(CodeUnauthenticated, "%s", msg)))
		_ = ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.ClosePolicyViolation, "unauthenticated"), deadline)
		return nil
	}
	_ = ws.SetReadDeadline(time.Now().Add(FirstFrameTimeout))
	ws.SetReadLimit(int64(h.cfg.MaxFrameBytes))
	kind, data, err := ws.ReadMessage()
	if err != nil {
		return refuse(nil, "no auth frame: a WebSocket opened without a credential must send {\"op\":\"auth\",\"token\":...} first")
	}
	var f authFrame
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if kind != websocket.TextMessage || dec.Decode(&f) != nil || f.Op != OpAuth {
		return refuse(&Request{Op: truncate(f.Op, 40), ID: f.ID}, "the first frame of a WebSocket opened without a credential must be {\"op\":\"auth\",\"token\":...}")
	}
	req := &Request{Op: OpAuth, ID: f.ID}
	p, err := h.authn.Authenticate(r.Context(), f.Token)
	if f.Token == "" || err != nil {
		if err != nil && !errors.Is(err, auth.ErrUnauthenticated) {
			h.cfg.Logger.Debug("credential refused", "error", err, "remote", r.RemoteAddr)
		}
		return refuse(req, "missing or invalid bearer token")
	}
	result, _ := json.Marshal(map[string]any{"subject": p.Subject, "tenant": p.Tenant, "scope": scopeOf(p).String()})
	_ = ws.SetWriteDeadline(time.Now().Add(h.cfg.WriteTimeout))
	if err := ws.WriteMessage(websocket.TextMessage, ackBytes(req, "", result)); err != nil {
		return nil
	}
	_ = ws.SetReadDeadline(time.Time{})
	_ = ws.SetWriteDeadline(time.Time{})
	return auth.ToMessage(p)
}
