// Package gateway is Fathom's HTTP API for clients and operators. It reaches sessions
// only through session grain clients, exactly as any other service would.
//
// Routes (this release):
//
//	GET  /healthz                 liveness, no auth
//	GET  /readyz                  readiness (the node is a cluster member), no auth
//	POST /v1/sessions             start a session: {"goal", "session_id"?, "command_id"?, "config"?}
//	GET  /v1/sessions/{id}        the session's folded state and hosting member
//
// Every /v1 route requires "Authorization: Bearer <token>" when a token is configured.
// Errors are JSON {"error": {"code", "message"}} with the matching HTTP status.
package gateway

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/cluster"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/fathom-agents/fathom/messages"
)

// MaxBodyBytes bounds a request body.
const MaxBodyBytes = 1 << 20

// Sessions gives the gateway grain clients. internal/node.Node implements it.
type Sessions interface {
	Session(id string) *messages.SessionGrainClient
}

// Config configures the gateway.
type Config struct {
	// Token, when non-empty, is required as a bearer token on /v1 routes.
	Token string
	// Sessions reaches session grains.
	Sessions Sessions
	// Ready reports whether the node can serve (nil error) for /readyz.
	Ready func() error
	// RequestTimeout bounds one grain call. Default 10s.
	RequestTimeout time.Duration
	// Logger receives request errors. Nil means slog.Default().
	Logger *slog.Logger
}

// Handler is the gateway's http.Handler.
type Handler struct {
	cfg Config
	mux *http.ServeMux
}

// New returns the gateway handler.
func New(cfg Config) (*Handler, error) {
	if cfg.Sessions == nil {
		return nil, errors.New("gateway: Sessions is required")
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = 10 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	h := &Handler{cfg: cfg, mux: http.NewServeMux()}
	h.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	h.mux.HandleFunc("GET /readyz", h.readyz)
	h.mux.Handle("POST /v1/sessions", h.auth(h.startSession))
	h.mux.Handle("GET /v1/sessions/{id}", h.auth(h.getSession))
	h.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "not_found", fmt.Sprintf("no route %s %s", r.Method, r.URL.Path))
	})
	return h, nil
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

func (h *Handler) readyz(w http.ResponseWriter, _ *http.Request) {
	if h.cfg.Ready != nil {
		if err := h.cfg.Ready(); err != nil {
			writeError(w, http.StatusServiceUnavailable, "unavailable", err.Error())
			return
		}
	}
	_, _ = io.WriteString(w, "ready\n")
}

func (h *Handler) auth(next http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h.cfg.Token != "" {
			got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			if !ok || subtle.ConstantTimeCompare([]byte(got), []byte(h.cfg.Token)) != 1 {
				w.Header().Set("WWW-Authenticate", `Bearer realm="fathom"`)
				writeError(w, http.StatusUnauthorized, "unauthenticated", "missing or invalid bearer token")
				return
			}
		}
		next(w, r)
	})
}

// StartSessionRequest is the body of POST /v1/sessions.
type StartSessionRequest struct {
	// Goal is what the session should achieve. Required.
	Goal string `json:"goal"`
	// SessionID names the session; generated when empty.
	SessionID string `json:"session_id,omitempty"`
	// CommandID makes retries safe; generated when empty (then a retry starts nothing new
	// only if the same session_id is given and the session has started).
	CommandID string `json:"command_id,omitempty"`
	// Config overrides the node defaults.
	Config *SessionConfig `json:"config,omitempty"`
}

// SessionConfig are the per-session overrides of POST /v1/sessions.
type SessionConfig struct {
	Model         string `json:"model,omitempty"`
	MaxIterations uint32 `json:"max_iterations,omitempty"`
	MaxSteps      uint32 `json:"max_steps,omitempty"`
}

func (h *Handler) startSession(w http.ResponseWriter, r *http.Request) {
	var req StartSessionRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeError(w, http.StatusRequestEntityTooLarge, "invalid_argument", fmt.Sprintf("body exceeds %d bytes", MaxBodyBytes))
			return
		}
		writeError(w, http.StatusBadRequest, "invalid_argument", "malformed JSON body: "+err.Error())
		return
	}
	if req.SessionID == "" {
		req.SessionID = NewID("s")
	}
	if req.CommandID == "" {
		req.CommandID = NewID("cmd")
	}
	sreq := &messages.StartRequest{CommandId: req.CommandID, Goal: req.Goal}
	if c := req.Config; c != nil {
		sreq.Config = &messages.SessionConfig{Model: c.Model, MaxIterations: c.MaxIterations, MaxSteps: c.MaxSteps}
	}
	resp, err := h.cfg.Sessions.Session(req.SessionID).Start(sreq, cluster.WithTimeout(h.cfg.RequestTimeout))
	if err != nil {
		h.writeGrainError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, map[string]any{"session_id": resp.GetSessionId(), "seq": resp.GetSeq(), "duplicate": resp.GetDuplicate()})
}

func (h *Handler) getSession(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	resp, err := h.cfg.Sessions.Session(id).GetState(&messages.GetStateRequest{}, cluster.WithTimeout(h.cfg.RequestTimeout))
	if err != nil {
		h.writeGrainError(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(marshalProto(resp))
}

var protoJSON = protojson.MarshalOptions{UseProtoNames: true, EmitUnpopulated: true}

func marshalProto(m proto.Message) []byte {
	b, err := protoJSON.Marshal(m)
	if err != nil {
		return []byte(`{"error":{"code":"internal","message":"encode response"}}`)
	}
	return b
}

// writeGrainError maps a grain error to an HTTP status.
func (h *Handler) writeGrainError(w http.ResponseWriter, err error) {
	status, code := http.StatusInternalServerError, "internal"
	var ge *cluster.GrainErrorResponse
	switch {
	case errors.As(err, &ge):
		switch ge.Reason {
		case messages.ErrorReason_INVALID_ARGUMENT.String():
			status, code = http.StatusBadRequest, "invalid_argument"
		case messages.ErrorReason_NOT_FOUND.String():
			status, code = http.StatusNotFound, "not_found"
		case messages.ErrorReason_FAILED_PRECONDITION.String():
			status, code = http.StatusConflict, "failed_precondition"
		case messages.ErrorReason_UNAVAILABLE.String():
			status, code = http.StatusServiceUnavailable, "unavailable"
		}
		writeError(w, status, code, ge.Message)
		return
	case strings.Contains(err.Error(), "timeout") || strings.Contains(err.Error(), "deadline"):
		status, code = http.StatusGatewayTimeout, "timeout"
	}
	h.cfg.Logger.Warn("grain call failed", "error", err)
	writeError(w, status, code, err.Error())
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, map[string]any{"error": map[string]string{"code": code, "message": msg}})
}

// NewID returns a random id with a prefix ("s-3f9c...").
func NewID(prefix string) string {
	var b [10]byte
	_, _ = rand.Read(b[:])
	return prefix + "-" + hex.EncodeToString(b[:])
}
