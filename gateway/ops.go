package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/asynkron/protoactor-go/cluster"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/fathom-agents/fathom/auth"
	"github.com/fathom-agents/fathom/messages"
)

// The operations of the protocol: the `op` of a client frame, and the HTTP routes that
// map onto them.
const (
	OpStart            = "start"
	OpSubscribe        = "subscribe"
	OpUnsubscribe      = "unsubscribe"
	OpState            = "state"
	OpTimeline         = "timeline"
	OpStateAt          = "state_at"
	OpInput            = "input"
	OpPause            = "pause"
	OpResume           = "resume"
	OpSetBreakpoint    = "set_breakpoint"
	OpClearBreakpoints = "clear_breakpoints"
	OpFork             = "fork"
	OpCancel           = "cancel"
	// OpSend adds a follow-up message to a completed session (its next turn).
	OpSend = "send"
	// OpGantt answers the session's run as bars with durations, its plan's versions and
	// its cost (core.Gantt), through seq when given.
	OpGantt = "gantt"
	// OpSubscribeRestarts streams the node's supervision events as restart frames.
	OpSubscribeRestarts = "subscribe_restarts"
)

// MaxSessionIDBytes bounds a session id (messages.MaxSessionIDBytes; the other rules
// are messages.ValidateSessionID's).
const MaxSessionIDBytes = messages.MaxSessionIDBytes

// Request is a client frame, and the body of the HTTP operation routes. Only the fields
// of its op are read; unknown fields are an error, so a typo never passes silently.
type Request struct {
	// Op names the operation (OpStart, ...). WebSocket only: HTTP takes it from the route.
	Op string `json:"op"`
	// ID is the client's correlation id (a JSON string or number), echoed on the ack or
	// error frame that answers this request.
	ID json.RawMessage `json:"id,omitempty"`
	// SessionID is the session addressed; for start, the id to give the new session
	// (generated when empty).
	SessionID string `json:"session_id,omitempty"`
	// CommandID makes a start (or any write) safe to retry; generated when empty.
	CommandID string `json:"command_id,omitempty"`
	// Goal is what a started session should achieve.
	Goal string `json:"goal,omitempty"`
	// UserID is recorded on session_started.
	UserID string `json:"user_id,omitempty"`
	// Config overrides the node's session defaults on start.
	Config *SessionConfig `json:"config,omitempty"`
	// WebhookURL, on start, receives the session's signed notifications (an http or
	// https URL; the node needs a webhook secret).
	WebhookURL string `json:"webhook_url,omitempty"`
	// FromSeq: subscribe delivers the events with seq > FromSeq (default 0: all).
	FromSeq *uint64 `json:"from_seq,omitempty"`
	// Deltas: subscribe also streams token deltas (default true).
	Deltas *bool `json:"deltas,omitempty"`
	// StepIndex addresses a step for state_at and fork (0 = after planning).
	StepIndex *uint32 `json:"step_index,omitempty"`
	// StepID addresses a step for input and set_breakpoint.
	StepID string `json:"step_id,omitempty"`
	// RequestID names the human-input request input answers, when its step has several
	// open (an ask_human call's request id is the call's idempotency key).
	RequestID string `json:"request_id,omitempty"`
	// Input is a human's answer (any JSON value) for input.
	Input json.RawMessage `json:"input,omitempty"`
	// ModifiedStep optionally replaces the paused step on resume, and a step that has
	// yet to run at the fork point on fork (same id; the fields it sets are merged in).
	ModifiedStep json.RawMessage `json:"modified_step,omitempty"`
	// Position of a breakpoint: "before" or "after".
	Position string `json:"position,omitempty"`
	// StepType of a breakpoint (e.g. "code_execute").
	StepType string `json:"step_type,omitempty"`
	// Tool of a breakpoint (a tool name).
	Tool string `json:"tool,omitempty"`
	// NewSessionID names the session fork creates (generated when empty).
	NewSessionID string `json:"new_session_id,omitempty"`
	// BreakpointID names a breakpoint (set_breakpoint; generated when empty; setting an
	// existing id replaces it).
	BreakpointID string `json:"breakpoint_id,omitempty"`
	// TimeoutMS, when > 0, ends the breakpoint's interrupt by DefaultAction if nobody
	// resumes it in time.
	TimeoutMS int64 `json:"timeout_ms,omitempty"`
	// DefaultAction is "continue" (default) or "fail".
	DefaultAction string `json:"default_action,omitempty"`
	// Reason says why a session is cancelled (cancel; recorded in session_cancelled).
	Reason string `json:"reason,omitempty"`
	// By names who cancels (cancel; default "gateway").
	By string `json:"by,omitempty"`
	// Content is the follow-up message of send.
	Content string `json:"content,omitempty"`
	// OnBusy says what a send to a session whose turn is running does: "reject" (the
	// default), "queue" (run it as the next turn) or "interrupt" (end the current turn at
	// its next step boundary, then run it).
	OnBusy string `json:"on_busy,omitempty"`
	// Seq addresses any event of the session for state_at and fork instead of
	// step_index (which names the current turn's steps): how an earlier turn is reached.
	// For gantt it is the last event folded (default: the session's last).
	Seq *uint64 `json:"seq,omitempty"`

	// caller is the authenticated principal the request acts for (set by the transport,
	// never read from the client's JSON); every grain request carries it.
	caller *messages.Principal
	// ctx is the client's: the HTTP request's, the WebSocket connection's, Do's. It ends
	// when the client is gone; a start waiting in its tenant's start queue leaves it then.
	ctx context.Context
}

// requestContext returns the request's context, also done once the gateway's Shutdown
// begins, and its cancel function.
func (h *Handler) requestContext(req *Request) (context.Context, context.CancelFunc) {
	parent := req.ctx
	if parent == nil {
		parent = context.Background()
	}
	ctx, cancel := context.WithCancel(parent)
	stop := context.AfterFunc(h.base, cancel)
	return ctx, func() {
		stop()
		cancel()
	}
}

// tenantOf is the tenant caller's sessions belong to (auth.DefaultTenant without one).
func tenantOf(caller *messages.Principal) string {
	if t := caller.GetTenant(); t != "" {
		return t
	}
	return auth.DefaultTenant
}

// SessionConfig are the per-session overrides of start.
type SessionConfig struct {
	// Model is the model the session's LLM calls use.
	Model string `json:"model,omitempty"`
	// MaxIterations bounds the session's LLM calls.
	MaxIterations uint32 `json:"max_iterations,omitempty"`
	// MaxSteps bounds the plan's steps.
	MaxSteps uint32 `json:"max_steps,omitempty"`
	// MaxLLMCalls, MaxCostUSD and MaxTokens are the session budgets: every LLM call of
	// the session and its sub-agents counts; crossing one fails the session. 0 keeps the
	// node's default (--max-llm-calls, --max-cost-usd, --max-tokens).
	MaxLLMCalls uint32  `json:"max_llm_calls,omitempty"`
	MaxCostUSD  float64 `json:"max_cost_usd,omitempty"`
	MaxTokens   uint64  `json:"max_tokens,omitempty"`
	// ReasoningEffort and ThinkingBudget are the session's reasoning (minimal, low,
	// medium or high; extended thinking tokens, at least 1024); empty/0 keeps the node's
	// default (--reasoning-effort, --thinking-budget).
	ReasoningEffort string `json:"reasoning_effort,omitempty"`
	ThinkingBudget  uint32 `json:"thinking_budget,omitempty"`
}

// Message is c as the session grain takes it (messages.SessionConfig); nil for nil.
func (c *SessionConfig) Message() *messages.SessionConfig {
	if c == nil {
		return nil
	}
	return &messages.SessionConfig{Model: c.Model, MaxIterations: c.MaxIterations, MaxSteps: c.MaxSteps,
		MaxLlmCalls: c.MaxLLMCalls, MaxCostUsd: c.MaxCostUSD, MaxTokens: c.MaxTokens,
		ReasoningEffort: c.ReasoningEffort, ThinkingBudget: c.ThinkingBudget}
}

// opResult is a successful operation's answer.
type opResult struct {
	sessionID string
	body      json.RawMessage // a JSON object: the ack's result, the HTTP response body
	status    int             // HTTP status; 0 means 200
}

type opFunc func(h *Handler, req *Request) (opResult, error)

// opSpec routes one op.
type opSpec struct {
	// scope is the token scope the op needs.
	scope Scope
	// session is true when the op addresses an existing session (session_id required).
	session bool
	// call answers the op; nil for the connection ops subscribe and unsubscribe, which
	// the WebSocket handles itself.
	call opFunc
}

// ops is the one routing table of the protocol, for WebSocket frames and HTTP routes:
// wiring an op is one line here plus its opFunc.
var ops = map[string]opSpec{
	OpStart:             {scope: ScopeWrite, call: (*Handler).opStart},
	OpSubscribe:         {scope: ScopeRead, session: true},
	OpUnsubscribe:       {scope: ScopeRead, session: true},
	OpState:             {scope: ScopeRead, session: true, call: (*Handler).opState},
	OpTimeline:          {scope: ScopeRead, session: true, call: (*Handler).opTimeline},
	OpStateAt:           {scope: ScopeRead, session: true, call: (*Handler).opStateAt},
	OpGantt:             {scope: ScopeRead, session: true, call: (*Handler).opGantt},
	OpInput:             {scope: ScopeWrite, session: true, call: (*Handler).opInput},
	OpPause:             {scope: ScopeWrite, session: true, call: (*Handler).opPause},
	OpResume:            {scope: ScopeWrite, session: true, call: (*Handler).opResume},
	OpSetBreakpoint:     {scope: ScopeWrite, session: true, call: (*Handler).opSetBreakpoint},
	OpClearBreakpoints:  {scope: ScopeWrite, session: true, call: (*Handler).opClearBreakpoints},
	OpFork:              {scope: ScopeWrite, session: true, call: (*Handler).opFork},
	OpCancel:            {scope: ScopeWrite, session: true, call: (*Handler).opCancel},
	OpSend:              {scope: ScopeWrite, session: true, call: (*Handler).opSend},
	OpSubscribeRestarts: {scope: ScopeAdmin},
}

// decodeRequest parses a client frame strictly. On error the returned request still
// carries the op and id when they could be read, for the error frame.
func decodeRequest(data []byte) (*Request, error) {
	req := &Request{}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	err := dec.Decode(req)
	if err == nil && dec.More() {
		err = errors.New("trailing data after the JSON object")
	}
	if err != nil {
		var head struct {
			Op string          `json:"op"`
			ID json.RawMessage `json:"id"`
		}
		_ = json.Unmarshal(data, &head)
		return &Request{Op: head.Op, ID: head.ID}, errorf(CodeInvalidArgument, "malformed request: %v", err)
	}
	if len(req.ID) > 0 && req.ID[0] != '"' && !isJSONNumber(req.ID) {
		id := req.ID
		req.ID = nil
		return req, errorf(CodeInvalidArgument, "id must be a string or a number, not %s", truncate(string(id), 40))
	}
	return req, nil
}

func isJSONNumber(b json.RawMessage) bool {
	var n json.Number
	return json.Unmarshal(b, &n) == nil
}

// checkSessionID reports an id the gateway will not address: any id that breaks
// messages.ValidateSessionID, with a message naming the rule.
func checkSessionID(id string) error { return checkSessionIDField("session_id", id) }

// checkSessionIDField is checkSessionID for the request field named field.
func checkSessionIDField(field, id string) error {
	if id == "" {
		return errorf(CodeInvalidArgument, "%s is required", field)
	}
	var se *messages.SessionIDError
	if err := messages.ValidateSessionID(id); errors.As(err, &se) {
		return errorf(CodeInvalidArgument, "%s %q %s", field, truncate(id, 40), se.Rule)
	}
	return nil
}

// run routes a request-answer op (everything but subscribe and unsubscribe).
func (h *Handler) run(req *Request) (opResult, error) {
	spec, ok := ops[req.Op]
	if !ok || spec.call == nil {
		return opResult{}, errorf(CodeUnknownOp, "unknown op %q", truncate(req.Op, 40))
	}
	if spec.session {
		if err := checkSessionID(req.SessionID); err != nil {
			return opResult{}, err
		}
	}
	return spec.call(h, req)
}

func (h *Handler) grain(id string) SessionGrain {
	return h.cfg.Sessions.Session(id)
}

func (h *Handler) opStart(req *Request) (opResult, error) {
	if strings.TrimSpace(req.Goal) == "" {
		return opResult{}, errorf(CodeInvalidArgument, "goal is required")
	}
	if req.SessionID == "" {
		req.SessionID = NewID("s")
	} else if err := checkSessionID(req.SessionID); err != nil {
		return opResult{}, err
	}
	if req.CommandID == "" {
		req.CommandID = NewID("cmd")
	}
	sreq := &messages.StartRequest{Caller: req.caller, CommandId: req.CommandID, Goal: req.Goal, UserId: req.UserID}
	sreq.Config = req.Config.Message()
	if req.WebhookURL != "" {
		if sreq.Config == nil {
			sreq.Config = &messages.SessionConfig{}
		}
		sreq.Config.WebhookUrl = req.WebhookURL
	}
	var resp *messages.StartResponse
	// A start over the tenant's max_running_sessions waits in its start queue, when the
	// tenant has one (start_queue_timeout), for a session of the tenant to end; it leaves
	// the queue when its client is gone.
	ctx, cancel := h.requestContext(req)
	defer cancel()
	err := h.cfg.StartQueue.Wait(ctx, tenantOf(req.caller), func() (err error) {
		resp, err = h.grain(req.SessionID).Start(sreq, cluster.WithTimeout(h.cfg.RequestTimeout))
		return err
	})
	if err != nil {
		return opResult{}, err
	}
	body, err := json.Marshal(map[string]any{"session_id": resp.GetSessionId(), "seq": resp.GetSeq(), "duplicate": resp.GetDuplicate(), "command_id": req.CommandID})
	if err != nil {
		return opResult{}, err
	}
	return opResult{sessionID: resp.GetSessionId(), body: body, status: http.StatusCreated}, nil
}

func (h *Handler) opState(req *Request) (opResult, error) {
	resp, err := h.grain(req.SessionID).GetState(&messages.GetStateRequest{Caller: req.caller}, cluster.WithTimeout(h.cfg.RequestTimeout))
	return protoResult(req.SessionID, resp, err)
}

func (h *Handler) opTimeline(req *Request) (opResult, error) {
	resp, err := h.grain(req.SessionID).Timeline(&messages.TimelineRequest{Caller: req.caller}, cluster.WithTimeout(h.cfg.RequestTimeout))
	return protoResult(req.SessionID, resp, err)
}

func (h *Handler) opStateAt(req *Request) (opResult, error) {
	if req.StepIndex == nil && req.Seq == nil {
		return opResult{}, errorf(CodeInvalidArgument, "step_index or seq is required (step_index 0 = after planning, n = after the n-th step; seq = after that event)")
	}
	r := &messages.StateAtRequest{Caller: req.caller}
	if req.Seq != nil {
		if *req.Seq == 0 {
			return opResult{}, errorf(CodeInvalidArgument, "seq must be 1 or more")
		}
		r.Seq = *req.Seq
	} else {
		r.StepIndex = *req.StepIndex
	}
	resp, err := h.grain(req.SessionID).StateAt(r, cluster.WithTimeout(h.cfg.RequestTimeout))
	return protoResult(req.SessionID, resp, err)
}

// opSend adds a follow-up message (content) to a completed session: message_received
// opens its next turn, which ends in session_completed again.
func (h *Handler) opSend(req *Request) (opResult, error) {
	if strings.TrimSpace(req.Content) == "" {
		return opResult{}, errorf(CodeInvalidArgument, "content is required: the follow-up message")
	}
	resp, err := h.grain(req.SessionID).Send(&messages.SendRequest{Caller: req.caller, CommandId: h.commandID(req), Content: req.Content, OnBusy: req.OnBusy}, cluster.WithTimeout(h.cfg.RequestTimeout))
	if err != nil {
		return opResult{}, err
	}
	body, err := json.Marshal(map[string]any{"seq": resp.GetSeq(), "duplicate": resp.GetDuplicate(), "command_id": req.CommandID})
	if err != nil {
		return opResult{}, err
	}
	return opResult{sessionID: req.SessionID, body: body, status: http.StatusAccepted}, nil
}

func (h *Handler) commandID(req *Request) string {
	if req.CommandID == "" {
		req.CommandID = NewID("cmd")
	}
	return req.CommandID
}

func (h *Handler) opPause(req *Request) (opResult, error) {
	resp, err := h.grain(req.SessionID).Pause(&messages.PauseRequest{Caller: req.caller, CommandId: h.commandID(req)}, cluster.WithTimeout(h.cfg.RequestTimeout))
	return protoResult(req.SessionID, resp, err)
}

func (h *Handler) opCancel(req *Request) (opResult, error) {
	by := req.By
	if by == "" {
		by = "gateway"
	}
	resp, err := h.grain(req.SessionID).Cancel(&messages.CancelRequest{Caller: req.caller, CommandId: h.commandID(req), Reason: req.Reason, By: by},
		cluster.WithTimeout(h.cfg.RequestTimeout))
	return protoResult(req.SessionID, resp, err)
}

func (h *Handler) opResume(req *Request) (opResult, error) {
	m, err := modifiedStep(req)
	if err != nil {
		return opResult{}, err
	}
	r := &messages.ResumeRequest{Caller: req.caller, CommandId: h.commandID(req), ModifiedStep: m}
	resp, err := h.grain(req.SessionID).Resume(r, cluster.WithTimeout(h.cfg.RequestTimeout))
	return protoResult(req.SessionID, resp, err)
}

// modifiedStep decodes the request's modified_step (resume, fork): nil when absent.
func modifiedStep(req *Request) (*messages.PlanStep, error) {
	if len(req.ModifiedStep) == 0 || string(req.ModifiedStep) == "null" {
		return nil, nil
	}
	m := &messages.PlanStep{}
	if err := protojson.Unmarshal(req.ModifiedStep, m); err != nil {
		return nil, errorf(CodeInvalidArgument, "modified_step is not a plan step {id, type, description}: %v", err)
	}
	return m, nil
}

func (h *Handler) opSetBreakpoint(req *Request) (opResult, error) {
	if req.BreakpointID == "" {
		req.BreakpointID = NewID("bp")
	}
	bp := &messages.Breakpoint{Id: req.BreakpointID, Position: req.Position, StepType: req.StepType, StepId: req.StepID,
		TimeoutMs: req.TimeoutMS, DefaultAction: req.DefaultAction, Tool: req.Tool}
	resp, err := h.grain(req.SessionID).SetBreakpoint(&messages.SetBreakpointRequest{Caller: req.caller, CommandId: h.commandID(req), Breakpoint: bp}, cluster.WithTimeout(h.cfg.RequestTimeout))
	if err != nil {
		return opResult{}, err
	}
	body, err := json.Marshal(map[string]any{"breakpoint_id": bp.GetId(), "seq": resp.GetSeq(), "duplicate": resp.GetDuplicate(), "command_id": req.CommandID})
	if err != nil {
		return opResult{}, err
	}
	return opResult{sessionID: req.SessionID, body: body}, nil
}

// opInput answers a human-input request. A JSON string is passed as its JSON text: the
// session takes it as the string value.
func (h *Handler) opInput(req *Request) (opResult, error) {
	if req.StepID == "" && req.RequestID == "" {
		return opResult{}, errorf(CodeInvalidArgument, "step_id (or request_id) is required: it names the request the input answers")
	}
	if len(bytes.TrimSpace(req.Input)) == 0 {
		return opResult{}, errorf(CodeInvalidArgument, "input is required: the answer, as any JSON value")
	}
	r := &messages.ProvideInputRequest{Caller: req.caller, CommandId: h.commandID(req), StepId: req.StepID, RequestId: req.RequestID, Input: string(req.Input)}
	resp, err := h.grain(req.SessionID).ProvideInput(r, cluster.WithTimeout(h.cfg.RequestTimeout))
	if err != nil {
		return opResult{}, err
	}
	body, err := json.Marshal(map[string]any{"seq": resp.GetSeq(), "duplicate": resp.GetDuplicate(), "command_id": req.CommandID})
	if err != nil {
		return opResult{}, err
	}
	return opResult{sessionID: req.SessionID, body: body}, nil
}

// opFork forks session_id at step_index into a new session (new_session_id, generated
// when empty); the ack's session_id is the fork's.
func (h *Handler) opFork(req *Request) (opResult, error) {
	if req.StepIndex == nil && req.Seq == nil {
		return opResult{}, errorf(CodeInvalidArgument, "step_index or seq is required (step_index 0 = after planning, n = after the n-th step; seq = after that event)")
	}
	if req.Seq != nil && *req.Seq == 0 {
		return opResult{}, errorf(CodeInvalidArgument, "seq must be 1 or more")
	}
	if req.NewSessionID == "" {
		req.NewSessionID = NewID("s")
	} else if err := checkSessionIDField("new_session_id", req.NewSessionID); err != nil {
		return opResult{}, err
	}
	m, err := modifiedStep(req)
	if err != nil {
		return opResult{}, err
	}
	r := &messages.ForkRequest{Caller: req.caller, CommandId: h.commandID(req), SourceSessionId: req.SessionID, ModifiedStep: m}
	at := map[string]any{}
	if req.Seq != nil {
		r.Seq, at["source_seq"] = *req.Seq, *req.Seq
	} else {
		r.StepIndex, at["step_index"] = *req.StepIndex, *req.StepIndex
	}
	resp, err := h.grain(req.NewSessionID).Fork(r, cluster.WithTimeout(h.cfg.RequestTimeout))
	if err != nil {
		return opResult{}, err
	}
	at["session_id"], at["source_session_id"], at["seq"], at["duplicate"], at["command_id"] = resp.GetSessionId(), req.SessionID, resp.GetSeq(), resp.GetDuplicate(), req.CommandID
	body, err := json.Marshal(at)
	if err != nil {
		return opResult{}, err
	}
	return opResult{sessionID: resp.GetSessionId(), body: body, status: http.StatusCreated}, nil
}

func (h *Handler) opClearBreakpoints(req *Request) (opResult, error) {
	resp, err := h.grain(req.SessionID).ClearBreakpoints(&messages.ClearBreakpointsRequest{Caller: req.caller, CommandId: h.commandID(req)}, cluster.WithTimeout(h.cfg.RequestTimeout))
	return protoResult(req.SessionID, resp, err)
}

// protoResult renders a grain answer in the protocol's one JSON dialect
// (messages.MarshalJSON: proto field names, 64-bit integers as numbers, as in event
// frames).
func protoResult(id string, m proto.Message, err error) (opResult, error) {
	if err != nil {
		return opResult{}, err
	}
	b, err := messages.MarshalJSON(m)
	if err != nil {
		return opResult{}, fmt.Errorf("encode %T: %w", m, err)
	}
	return opResult{sessionID: id, body: b}, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
