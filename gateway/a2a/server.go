package a2a

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/fathom-agents/fathom/gateway"
)

// Defaults of Config.
const (
	// DefaultPath is where the JSON-RPC binding is served.
	DefaultPath = "/a2a"
	// CardPath is the agent card's well-known path (A2A §8.2).
	CardPath = "/.well-known/agent-card.json"
	// DefaultName and DefaultDescription name the agent on its card.
	DefaultName        = "fathom"
	DefaultDescription = "A durable deep agent: it plans the goal it is given, delegates the steps to its agents, " +
		"asks a human when it needs one, and answers with the result."
	// VersionHeader is the A2A service parameter that names the client's protocol version.
	VersionHeader = "A2A-Version"
)

// AgentInfo is an agent of the node (name and description): a skill on the card.
type AgentInfo struct {
	Name        string
	Description string
}

// Config configures the A2A server. Zero values take the defaults.
type Config struct {
	// Name, Description and Version are the agent card's (defaults DefaultName,
	// DefaultDescription, "1.0.0").
	Name        string
	Description string
	Version     string
	// Agents are the node's agents; each is a skill on the card, beside "run" (any goal).
	Agents []AgentInfo
	// URL is the JSON-RPC interface's public URL the card names; empty: the scheme and
	// host the card was requested with (X-Forwarded-Proto honoured) and Path.
	URL string
	// Path is where the JSON-RPC binding is served (default DefaultPath).
	Path string
	// WriteTimeout bounds writing one stream frame: a client that does not read for that
	// long loses its stream (and may resubscribe). Default 10s.
	WriteTimeout time.Duration
	// KeepAlive is how often an idle stream gets an SSE comment. Default 15s.
	KeepAlive time.Duration
	// PushNotifications turns on the push-notification methods (the card's
	// capabilities.pushNotifications): set it when the node sends webhooks (it has a
	// webhook secret), whose delivery the pushes share.
	PushNotifications bool
	// Logger receives stream errors (default slog.Default()).
	Logger *slog.Logger
}

// Server serves the A2A binding over a gateway's seam.
type Server struct {
	gw  *gateway.Handler
	cfg Config
	// results renders each event's stream responses once for all of a task's streams.
	results *resultCache
}

// Mount serves the agent card (public) and the JSON-RPC binding (behind the gateway's
// authentication, read scope: each method's op checks its own) on gw. Call it before gw
// serves requests.
func Mount(gw *gateway.Handler, cfg Config) *Server {
	if cfg.Name == "" {
		cfg.Name = DefaultName
	}
	if cfg.Description == "" {
		cfg.Description = DefaultDescription
	}
	if cfg.Version == "" {
		cfg.Version = "1.0.0"
	}
	if cfg.Path == "" {
		cfg.Path = DefaultPath
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = 10 * time.Second
	}
	if cfg.KeepAlive <= 0 {
		cfg.KeepAlive = 15 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	s := &Server{gw: gw, cfg: cfg, results: newResultCache(4096)}
	gw.MountPublic("GET "+CardPath, http.HandlerFunc(s.serveCard))
	gw.Mount("POST "+cfg.Path, gateway.ScopeRead, http.HandlerFunc(s.serveRPC))
	return s
}

// Card returns the agent card; base is the scheme and host the JSON-RPC URL is under
// when Config.URL is empty ("https://agents.example.com").
func (s *Server) Card(base string) AgentCard {
	url := s.cfg.URL
	if url == "" {
		url = strings.TrimSuffix(base, "/") + s.cfg.Path
	}
	skills := []Skill{{ID: "run", Name: "run", Description: "Plans and runs any goal given as the message's text, " +
		"delegating its steps to the agents below; answers with the result as the artifact \"result\".",
		Tags: []string{"deep-agent", "planning"}}}
	for _, a := range s.cfg.Agents {
		skills = append(skills, Skill{ID: a.Name, Name: a.Name, Description: a.Description, Tags: []string{"agent"}})
	}
	return AgentCard{
		Name:        s.cfg.Name,
		Description: s.cfg.Description,
		SupportedInterfaces: []AgentInterface{{URL: url, ProtocolBinding: "JSONRPC", ProtocolVersion: ProtocolVersion},
			{URL: url, ProtocolBinding: "JSONRPC", ProtocolVersion: LegacyProtocolVersion}},
		URL:                url,
		PreferredTransport: "JSONRPC",
		ProtocolVersion:    LegacyProtocolVersion + ".0",
		Version:            s.cfg.Version,
		Capabilities:       AgentCapabilities{Streaming: true, PushNotifications: s.cfg.PushNotifications},
		SecuritySchemes: map[string]SecurityScheme{"bearer": {HTTPAuth: &HTTPAuthSecurityScheme{Scheme: "Bearer",
			Description: "the gateway's bearer token, JWT or API key (Authorization: Bearer <token>)"}}},
		SecurityRequirements: []SecurityRequirement{{Schemes: map[string]StringList{"bearer": {List: []string{}}}}},
		DefaultInputModes:    []string{"text/plain", "application/json"},
		DefaultOutputModes:   []string{"text/plain"},
		Skills:               skills,
	}
}

func (s *Server) serveCard(w http.ResponseWriter, r *http.Request) {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	if p := r.Header.Get("X-Forwarded-Proto"); p == "http" || p == "https" {
		scheme = p
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "public, max-age=300")
	_ = json.NewEncoder(w).Encode(s.Card(scheme + "://" + r.Host))
}

// rpcRequest is a JSON-RPC 2.0 request.
type rpcRequest struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params"`
}

// rpcError is a JSON-RPC error object.
type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    []any  `json:"data,omitempty"`
}

func (e *rpcError) Error() string { return fmt.Sprintf("a2a error %d: %s", e.Code, e.Message) }

// JSON-RPC and A2A error codes (A2A §5.4, §9.5).
const (
	CodeParseError              = -32700
	CodeInvalidRequest          = -32600
	CodeMethodNotFound          = -32601
	CodeInvalidParams           = -32602
	CodeInternalError           = -32603
	CodeServerError             = -32000
	CodeTaskNotFound            = -32001
	CodeTaskNotCancelable       = -32002
	CodePushNotSupported        = -32003
	CodeUnsupportedOperation    = -32004
	CodeContentTypeNotSupported = -32005
	CodeVersionNotSupported     = -32009
)

func rpcErr(code int, format string, args ...any) *rpcError {
	return &rpcError{Code: code, Message: fmt.Sprintf(format, args...)}
}

// fromGateway maps a gateway error to the A2A error the client gets; the gateway's code
// goes along as a google.rpc.ErrorInfo reason. A session the caller may not read is
// answered exactly as a missing one.
func fromGateway(err error, taskID string) *rpcError {
	var re *rpcError
	if errors.As(err, &re) {
		return re
	}
	code, msg := gateway.ErrorCode(err)
	var e *rpcError
	switch code {
	case gateway.CodeNotFound:
		e = rpcErr(CodeTaskNotFound, "task %q not found", taskID)
	case gateway.CodeInvalidArgument:
		e = rpcErr(CodeInvalidParams, "%s", msg)
	case gateway.CodeFailedPrecondition:
		e = rpcErr(CodeUnsupportedOperation, "%s", msg)
	case gateway.CodePermissionDenied, gateway.CodeResourceExhausted:
		e = rpcErr(CodeServerError, "%s", msg)
	default:
		e = rpcErr(CodeInternalError, "%s", msg)
	}
	e.Data = []any{map[string]any{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": code, "domain": "fathom"}}
	return e
}

func (s *Server) serveRPC(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, gateway.MaxBodyBytes+1))
	if err != nil {
		writeRPC(w, nil, nil, rpcErr(CodeParseError, "reading the request: %v", err))
		return
	}
	if len(body) > gateway.MaxBodyBytes {
		writeRPC(w, nil, nil, rpcErr(CodeInvalidRequest, "the request exceeds %d bytes", gateway.MaxBodyBytes))
		return
	}
	var req rpcRequest
	if err := json.Unmarshal(body, &req); err != nil {
		writeRPC(w, nil, nil, rpcErr(CodeParseError, "invalid JSON payload: %v", err))
		return
	}
	if req.JSONRPC != "2.0" || req.Method == "" || !validID(req.ID) {
		writeRPC(w, req.ID, nil, rpcErr(CodeInvalidRequest, "not a JSON-RPC 2.0 request (jsonrpc \"2.0\", a method, a string or number id)"))
		return
	}
	method, legacy := req.Method, false
	if m, ok := legacyMethods[method]; ok {
		method, legacy = m, true
	}
	if v := requestedVersion(r); legacy && !isLegacyVersion(v) || !legacy && v != "" && v != ProtocolVersion && v != "1" {
		writeRPC(w, req.ID, nil, rpcErr(CodeVersionNotSupported, "A2A version %q does not serve %s: this agent speaks %s (and %s's methods)",
			truncate(v, 16), truncate(req.Method, 64), ProtocolVersion, LegacyProtocolVersion))
		return
	}
	// taskResult is a task as the method's version answers it.
	taskResult := func(t *Task) any {
		if legacy {
			return legacyTask(t)
		}
		return t
	}
	sendParams := func() (*SendMessageRequest, *rpcError) {
		if legacy {
			return fromLegacySend(req.Params)
		}
		var p SendMessageRequest
		if e := decodeParams(req.Params, &p); e != nil {
			return nil, e
		}
		return &p, nil
	}
	ctx := r.Context()
	switch method {
	case "SendMessage":
		p, e := sendParams()
		if e != nil {
			writeRPC(w, req.ID, nil, e)
			return
		}
		task, err := s.sendMessage(ctx, p)
		if err != nil || legacy {
			writeRPC(w, req.ID, taskResult(task), err)
			return
		}
		writeRPC(w, req.ID, map[string]any{"task": task}, nil)
	case "SendStreamingMessage":
		p, e := sendParams()
		if e != nil {
			writeRPC(w, req.ID, nil, e)
			return
		}
		id, from, err := s.deliver(ctx, p)
		if err != nil {
			writeRPC(w, req.ID, nil, err)
			return
		}
		s.stream(w, r, req.ID, id, from, legacy)
	case "GetTask":
		var p TaskRequest
		if e := decodeTaskParams(req.Params, &p); e != nil {
			writeRPC(w, req.ID, nil, e)
			return
		}
		task, _, err := s.task(ctx, p.ID, p.HistoryLength)
		writeRPC(w, req.ID, taskResult(task), err)
	case "CancelTask":
		var p TaskRequest
		if e := decodeTaskParams(req.Params, &p); e != nil {
			writeRPC(w, req.ID, nil, e)
			return
		}
		task, err := s.cancel(ctx, p.ID)
		writeRPC(w, req.ID, taskResult(task), err)
	case "SubscribeToTask":
		var p TaskRequest
		if e := decodeTaskParams(req.Params, &p); e != nil {
			writeRPC(w, req.ID, nil, e)
			return
		}
		from, resume, e := lastEventID(r)
		if e != nil {
			writeRPC(w, req.ID, nil, e)
			return
		}
		if !resume {
			from = 0
		}
		s.subscribe(w, r, req.ID, p.ID, from, resume, legacy)
	case "ListTasks":
		var p ListTasksRequest
		if len(bytes.TrimSpace(req.Params)) == 0 {
			req.Params = json.RawMessage("{}")
		}
		if e := decodeParams(req.Params, &p); e != nil {
			writeRPC(w, req.ID, nil, e)
			return
		}
		list, err := s.listTasks(ctx, &p)
		writeRPC(w, req.ID, list, err)
	case "GetExtendedAgentCard", "agent/getAuthenticatedExtendedCard":
		writeRPC(w, req.ID, nil, rpcErr(CodeUnsupportedOperation, "%s is not served by this agent", req.Method))
	case "CreateTaskPushNotificationConfig", "GetTaskPushNotificationConfig", "ListTaskPushNotificationConfigs", "DeleteTaskPushNotificationConfig":
		if !s.cfg.PushNotifications {
			writeRPC(w, req.ID, nil, rpcErr(CodePushNotSupported, "push notifications are not supported by this agent (it has no webhook secret)"))
			return
		}
		result, err := s.pushMethod(ctx, method, req.Params)
		writeRPC(w, req.ID, result, err)
	default:
		if strings.HasPrefix(req.Method, "tasks/pushNotificationConfig/") {
			writeRPC(w, req.ID, nil, rpcErr(CodePushNotSupported, "A2A 0.3's push notifications are not supported by this agent (A2A 1.0's are, on a node with a webhook secret)"))
			return
		}
		writeRPC(w, req.ID, nil, rpcErr(CodeMethodNotFound, "method %q not found", truncate(req.Method, 64)))
	}
}

// requestedVersion is the client's A2A-Version (header, else query parameter), major.minor.
func requestedVersion(r *http.Request) string {
	v := strings.TrimSpace(r.Header.Get(VersionHeader))
	if v == "" {
		v = strings.TrimSpace(r.URL.Query().Get(VersionHeader))
	}
	if parts := strings.SplitN(v, ".", 3); len(parts) == 3 {
		v = parts[0] + "." + parts[1]
	}
	return v
}

func validID(id json.RawMessage) bool {
	id = bytes.TrimSpace(id)
	if len(id) == 0 || string(id) == "null" {
		return true // a notification or an id-less call: answered with a null id
	}
	var v any
	if json.Unmarshal(id, &v) != nil {
		return false
	}
	switch v.(type) {
	case string, float64:
		return true
	}
	return false
}

func decodeParams(raw json.RawMessage, into any) *rpcError {
	if len(bytes.TrimSpace(raw)) == 0 {
		return rpcErr(CodeInvalidParams, "params are required")
	}
	if err := json.Unmarshal(raw, into); err != nil {
		return rpcErr(CodeInvalidParams, "invalid params: %v", err)
	}
	return nil
}

func decodeTaskParams(raw json.RawMessage, p *TaskRequest) *rpcError {
	if e := decodeParams(raw, p); e != nil {
		return e
	}
	if p.ID == "" {
		return rpcErr(CodeInvalidParams, "id is required: the task's id")
	}
	if p.HistoryLength != nil && *p.HistoryLength < 0 {
		return rpcErr(CodeInvalidParams, "historyLength must be 0 or more")
	}
	return nil
}

// writeRPC answers a JSON-RPC call: result, or the error err maps to.
func writeRPC(w http.ResponseWriter, id json.RawMessage, result any, err error) {
	if len(bytes.TrimSpace(id)) == 0 {
		id = json.RawMessage("null")
	}
	resp := map[string]any{"jsonrpc": "2.0", "id": id}
	if err != nil {
		resp["error"] = fromGateway(err, "")
	} else {
		resp["result"] = result
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(resp)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
