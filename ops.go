package fathom

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/fathom-agents/fathom/auth"
	"github.com/fathom-agents/fathom/gateway"
	"github.com/fathom-agents/fathom/internal/errcode"
	"github.com/fathom-agents/fathom/internal/listing"
	"github.com/fathom-agents/fathom/messages"
	"google.golang.org/protobuf/proto"
)

// The Node methods below are the gateway's operations for a Go program: each goes
// through the session's grain (or the session index, or the artifact store) as the
// gateway's does, acts for the principal ctx carries (auth.WithPrincipal; none: the
// program itself, trusted), and fails with an error wrapping ErrNotFound,
// ErrInvalidArgument, ErrFailedPrecondition, ... (errors.Is). Each write takes
// WithCommandID, which makes its retry safe.

// ListOptions selects the sessions of List, as GET /v1/sessions's parameters do.
type ListOptions struct {
	// Status: only sessions with this status (running, awaiting_human, interrupted,
	// completed, failed or cancelled; "" for any).
	Status string
	// UserID: only sessions of this user ("" for any).
	UserID string
	// GoalContains: only sessions whose goal contains this text, ignoring case (at most
	// 200 bytes).
	GoalContains string
	// ForkedFrom: only the forks of this session ("" for any).
	ForkedFrom string
	// Since, Until: only sessions created at or after Since and before Until (zero: open).
	Since, Until time.Time
	// Tenant: only this tenant's sessions, for the program's own calls and an
	// administrator's ("" for all); any other principal sees its own tenant's only.
	Tenant string
	// Limit bounds the page (1 to 1,000; 0 means 100).
	Limit int
	// Cursor continues a listing: the NextCursor of the page before.
	Cursor string
}

// SessionSummary is one session of List (gateway.SessionSummary): id, status, newest
// seq, times, user, tenant and owner, goal, cost.
type SessionSummary = gateway.SessionSummary

// SessionList is a page of List (gateway.SessionList): the sessions, newest first, and
// NextCursor when there are more.
type SessionList = gateway.SessionList

// List lists the sessions of the node's session index that o selects, newest first, a
// page at a time (as GET /v1/sessions): the principal ctx carries sees its tenant's
// sessions only (its own, where the tenancy policy says so), pages and cursors included.
// A bad option is ErrInvalidArgument; a journal without a session index
// errors.ErrUnsupported; an index that does not answer ErrUnavailable.
func (n *Node) List(ctx context.Context, o ListOptions) (SessionList, error) {
	q := listing.Query{Status: o.Status, UserID: o.UserID, GoalContains: o.GoalContains, ForkedFrom: o.ForkedFrom, Since: o.Since, Until: o.Until, Limit: o.Limit}
	if err := listing.Check(q); err != nil {
		return SessionList{}, invalid("list", "%v", err)
	}
	if o.Cursor != "" {
		if err := listing.SetCursor(&q, o.Cursor); err != nil {
			return SessionList{}, invalid("list", "%v", err)
		}
	}
	p, ok := auth.FromContext(ctx)
	listing.Scope(&q, n.n.Tenancy(), p, !ok, o.Tenant)
	ctx, cancel := context.WithTimeout(ctx, n.timeout)
	defer cancel()
	page, err := listing.List(ctx, n.n, q)
	if err != nil {
		if errcode.Of(err) == errcode.Internal {
			err = &callError{kind: ErrUnavailable, err: err}
		}
		return SessionList{}, failed("list", err)
	}
	return page, nil
}

// Timeline returns session id's timeline: its steps (the current plan's) with where each
// starts and ends in its events, their durations, LLM and tool calls, and the audit of
// who did what (messages.TimelineResponse, as GET /v1/sessions/{id}/timeline).
func (n *Node) Timeline(ctx context.Context, id string) (*messages.TimelineResponse, error) {
	if err := messages.ValidateSessionID(id); err != nil {
		return nil, failed("timeline", err)
	}
	resp, err := n.n.Session(id).Timeline(&messages.TimelineRequest{Caller: callerOf(ctx)}, n.callTimeout(ctx))
	if err != nil {
		return nil, failed("timeline of "+id, err)
	}
	return resp, nil
}

// At is a past point of a session: after the event Seq (any turn), or, when Seq is 0,
// after its first StepIndex steps of the current plan ended (StepIndex 0: after planning).
type At struct {
	// StepIndex: 0 = after planning; n = after the n-th step (from 1) ended.
	StepIndex uint32
	// Seq, when set, is the event after which instead.
	Seq uint64
}

// StateAt returns the state session id had at a past point (as GET
// /v1/sessions/{id}/state?seq= or ?step_index=): folded from the journal through that
// point, everything in it is what the journal held then. The answer's Seq is the last
// event folded in. A point the session has not reached is ErrFailedPrecondition.
func (n *Node) StateAt(ctx context.Context, id string, at At) (*messages.StateAtResponse, error) {
	if err := messages.ValidateSessionID(id); err != nil {
		return nil, failed("state at", err)
	}
	resp, err := n.n.Session(id).StateAt(&messages.StateAtRequest{Caller: callerOf(ctx), StepIndex: at.StepIndex, Seq: at.Seq}, n.callTimeout(ctx))
	if err != nil {
		return nil, failed(fmt.Sprintf("state of %s at %+v", id, at), err)
	}
	return resp, nil
}

// command sends one write of session id through run and types its error.
func (n *Node) command(ctx context.Context, what, id string, run func() error) error {
	if err := messages.ValidateSessionID(id); err != nil {
		return failed(what, err)
	}
	if err := run(); err != nil {
		return failed(what+" "+id, err)
	}
	return nil
}

// Pause stops session id at its next step boundary (interrupt_triggered; status
// interrupted) until Resume.
func (n *Node) Pause(ctx context.Context, id string, opts ...CallOption) error {
	return n.command(ctx, "pause", id, func() error {
		_, err := n.n.Session(id).Pause(&messages.PauseRequest{Caller: callerOf(ctx), CommandId: commandID(id, "pause", opts)}, n.callTimeout(ctx))
		return err
	})
}

// PlanStep is a step of a session's plan (messages.PlanStep): id, type, description,
// dependencies, interrupt settings.
type PlanStep = messages.PlanStep

// Resume ends the interrupt session id is stopped at (a pause, a breakpoint, a step's
// own interrupt). modified, when not nil, replaces the step that runs next: it must keep
// its id, and only the fields it sets change (so {Id, Description} changes the
// description only); an invalid one is ErrInvalidArgument and the session stays
// interrupted. A session that is not interrupted is ErrFailedPrecondition.
func (n *Node) Resume(ctx context.Context, id string, modified *PlanStep, opts ...CallOption) error {
	return n.command(ctx, "resume", id, func() error {
		_, err := n.n.Session(id).Resume(&messages.ResumeRequest{Caller: callerOf(ctx), CommandId: commandID(id, "resume", opts), ModifiedStep: modified},
			n.callTimeout(ctx))
		return err
	})
}

// Breakpoint stops a session at step boundaries (messages.Breakpoint): Id (empty: a new
// one; an existing id is replaced), Position ("before", the default, or "after"),
// StepType and StepId filters, Tool (stop before a call of that tool), TimeoutMs and
// DefaultAction ("continue" or "fail") when nobody resumes in time.
type Breakpoint = messages.Breakpoint

// SetBreakpoint adds bp to session id (or replaces the one with its Id) and returns its id.
func (n *Node) SetBreakpoint(ctx context.Context, id string, bp *Breakpoint, opts ...CallOption) (string, error) {
	if bp == nil {
		return "", invalid("set breakpoint", "the breakpoint is nil")
	}
	b := proto.CloneOf(bp) // the id is filled in without changing the caller's
	if b.Id == "" {
		b.Id = gateway.NewID("bp")
	}
	err := n.command(ctx, "set breakpoint", id, func() error {
		_, err := n.n.Session(id).SetBreakpoint(&messages.SetBreakpointRequest{Caller: callerOf(ctx), CommandId: commandID(id, "breakpoint/"+b.Id, opts), Breakpoint: b},
			n.callTimeout(ctx))
		return err
	})
	return b.Id, err
}

// ClearBreakpoints removes every breakpoint of session id.
func (n *Node) ClearBreakpoints(ctx context.Context, id string, opts ...CallOption) error {
	return n.command(ctx, "clear breakpoints", id, func() error {
		_, err := n.n.Session(id).ClearBreakpoints(&messages.ClearBreakpointsRequest{Caller: callerOf(ctx), CommandId: commandID(id, "clear-breakpoints", opts)},
			n.callTimeout(ctx))
		return err
	})
}

// ForkRequest is a fork of a session at a past point.
type ForkRequest struct {
	// NewID names the fork (empty: a new id). Give one, with WithCommandID, to make a
	// retry safe.
	NewID string
	// At is the fork point: after the event At.Seq (a turn's plan_created, the end of a
	// step, or a turn's session_completed), or after the first At.StepIndex steps.
	At At
	// ModifiedStep, when set, replaces the step with its id that has yet to run at the
	// fork point (pending, or the failed step the fork runs again): only the fields it
	// sets change, as Resume's modified step. The fork runs the edited step.
	ModifiedStep *PlanStep
}

// Fork makes a new session whose past is session id's through req.At, re-stamped with
// the new id (its artifacts copied), and which then goes on on its own: recorded LLM and
// tool results are never made again. It returns the fork's id. A point that is not one a
// fork can go on from, or a new id that exists, is ErrFailedPrecondition; an unknown
// source ErrNotFound.
func (n *Node) Fork(ctx context.Context, id string, req ForkRequest, opts ...CallOption) (string, error) {
	newID := req.NewID
	if newID == "" {
		newID = gateway.NewID("s")
	} else if err := messages.ValidateSessionID(newID); err != nil {
		return "", failed("fork "+id, err)
	}
	var resp *messages.StartResponse
	err := n.command(ctx, "fork", id, func() error {
		var err error
		resp, err = n.n.Session(newID).Fork(&messages.ForkRequest{Caller: callerOf(ctx), CommandId: commandID(newID, "fork", opts), SourceSessionId: id,
			StepIndex: req.At.StepIndex, Seq: req.At.Seq, ModifiedStep: req.ModifiedStep}, n.callTimeout(ctx))
		return err
	})
	if err != nil {
		return "", err
	}
	return resp.GetSessionId(), nil
}

// Approve lets the call of step stepID of session id that waits for approval
// (Config.ApprovalTools) run as it is.
func (n *Node) Approve(ctx context.Context, id, stepID string, opts ...CallOption) error {
	return n.Answer(ctx, id, stepID, `{"decision":"approve"}`, opts...)
}

// Edit lets the call of step stepID that waits for approval run with args instead (any
// value that marshals to a JSON object; json.RawMessage is taken as it is). Args that do
// not satisfy the tool's schema are ErrInvalidArgument, and the call keeps waiting.
func (n *Node) Edit(ctx context.Context, id, stepID string, args any, opts ...CallOption) error {
	a, err := json.Marshal(args)
	if err != nil {
		return invalid("edit "+stepID, "the args do not marshal to JSON: %v", err)
	}
	in, _ := json.Marshal(struct {
		Decision string          `json:"decision"`
		Args     json.RawMessage `json:"args"`
	}{"edit", a})
	return n.Answer(ctx, id, stepID, string(in), opts...)
}

// Reject refuses the call of step stepID that waits for approval: it never runs, and
// the model reads message as the call's error (a ToolError of type "rejected").
func (n *Node) Reject(ctx context.Context, id, stepID, message string, opts ...CallOption) error {
	in, _ := json.Marshal(struct {
		Decision string `json:"decision"`
		Message  string `json:"message,omitempty"`
	}{"reject", message})
	return n.Answer(ctx, id, stepID, string(in), opts...)
}

// Artifacts lists session id's artifacts: the newest record of each path its tools
// wrote (messages.ArtifactWritten: path, type, filename, content type, size, sha256).
// Read one with ReadArtifact.
func (n *Node) Artifacts(ctx context.Context, id string) ([]*messages.ArtifactWritten, error) {
	st, err := n.State(ctx, id)
	if err != nil {
		return nil, err
	}
	return st.GetArtifacts(), nil
}

// Artifact is an artifact's content as stored.
type Artifact struct {
	// Content is the artifact's bytes.
	Content []byte
	// ContentType is its MIME type; SHA256 the hex sha256 of Content.
	ContentType, SHA256 string
}

// ReadArtifact reads the artifact at path ("{session_id}/{type}/{filename}", as
// Artifacts lists it) of session id, as GET /v1/sessions/{id}/artifacts/{type}/{filename}
// does: ErrNotFound for no artifact there (and for another tenant's session), a path
// outside session id's workspace ErrInvalidArgument, a store that does not answer
// ErrUnavailable.
func (n *Node) ReadArtifact(ctx context.Context, id, path string) (Artifact, error) {
	if err := messages.ValidateSessionID(id); err != nil {
		return Artifact{}, failed("read artifact", err)
	}
	if !strings.HasPrefix(path, id+"/") {
		return Artifact{}, invalid("read artifact "+path, "the path is not in session %s's workspace (%s/{type}/{filename})", id, id)
	}
	// The session answers the access check and names its tenant, whose part of the
	// store its artifacts are in (also for an admin, who may read every tenant's).
	acc, err := n.n.Session(id).Access(&messages.AccessRequest{Caller: callerOf(ctx)}, n.callTimeout(ctx))
	if err != nil {
		return Artifact{}, failed("read artifact "+path, err)
	}
	tenant := acc.GetTenant()
	if tenant == "" {
		tenant = auth.DefaultTenant // a session from before tenancy
	}
	ctx, cancel := context.WithTimeout(ctx, n.timeout)
	defer cancel()
	content, ct, sum, err := n.n.ReadArtifact(ctx, tenant, path)
	if err != nil {
		if errcode.Of(err) == errcode.Internal {
			err = &callError{kind: ErrUnavailable, err: err}
		}
		return Artifact{}, failed("read artifact "+path, err)
	}
	return Artifact{Content: content, ContentType: ct, SHA256: sum}, nil
}
