package session

import (
	"github.com/asynkron/protoactor-go/cluster"

	"github.com/fathom-agents/fathom/auth"
	"github.com/fathom-agents/fathom/messages"
	"github.com/fathom-agents/fathom/messages/sessiongrain"
)

// request is what every session grain request carries: its caller, and (commands) its
// command id.
type request interface {
	GetCaller() *messages.Principal
}

// command is a request that changes the session.
type commandRequest interface {
	request
	GetCommandId() string
}

// authorize refuses what caller may not do to session id, in state st: another tenant's session
// (or, under Deps.Tenancy.MembersReadOwnOnly, another member's) is answered exactly as a
// missing session is, with NOT_FOUND "session %q not found"; a session the caller sees
// but may not act on with PERMISSION_DENIED. A request without a caller comes from inside
// the node (the Go API, the reactivator) and is trusted. A session that does not exist
// yet is left to the request's own answer (start creates it, the rest say not found).
func authorize(d *Deps, st *messages.SessionState, id string, caller *messages.Principal, a auth.Action) error {
	if caller == nil {
		return nil
	}
	p := auth.FromMessage(caller)
	if a == auth.Act && !p.CanWrite() { // decided by the role alone: says nothing of the session
		return sessiongrain.ErrPermissionDenied("%s may only read", p)
	}
	if st.GetSeq() == 0 {
		return nil
	}
	switch d.Config.Tenancy.Allowed(p, a, st.GetTenant(), st.GetOwner()) {
	case auth.Hidden:
		return notFound(id)
	case auth.Denied:
		return sessiongrain.ErrPermissionDenied("%s may not act on session %q (its owner or an operator of its tenant may)", p, id)
	}
	return nil
}

// authorizeNew is authorize for the requests that create this session (start, fork
// into it): a caller that may not write is refused, and an id another tenant's session
// already holds is refused as taken, without a word about that session.
func authorizeNew(d *Deps, st *messages.SessionState, id string, caller *messages.Principal) error {
	err := authorize(d, st, id, caller, auth.Act)
	if ge, ok := err.(*cluster.GrainErrorResponse); ok && ge.Reason == messages.ErrorReason_NOT_FOUND.String() {
		return sessiongrain.ErrFailedPrecondition("session id %q is taken: choose another, or leave it empty for a generated one", id)
	}
	return err
}

// notFound is the one answer for a session that does not exist or is not the caller's.
func notFound(id string) error { return sessiongrain.ErrNotFound("session %q not found", id) }

// Access answers whether the caller may read (or act on) the session, for the gateway's
// reads that do not go through the grain: the event stream, artifacts, delete.
func (g *Grain) Access(req *messages.AccessRequest, ctx cluster.GrainContext) (*messages.AccessResponse, error) {
	defer g.guard(ctx, "Access")
	defer g.updateIdle(ctx)
	if err := readable(ctx, g); err != nil {
		return nil, err
	}
	a := auth.Read
	if req.GetAct() {
		a = auth.Act
	}
	if err := authorize(g.deps, g.state, g.id, req.GetCaller(), a); err != nil {
		return nil, err
	}
	if g.state.GetSeq() == 0 {
		return nil, notFound(g.id)
	}
	return &messages.AccessResponse{Tenant: g.state.GetTenant(), Owner: g.state.GetOwner()}, nil
}
