package gateway_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/cluster"

	"github.com/fathom-agents/fathom/actors/session/core"
	"github.com/fathom-agents/fathom/auth"
	"github.com/fathom-agents/fathom/gateway"
	"github.com/fathom-agents/fathom/internal/node"
	"github.com/fathom-agents/fathom/live/feed"
	"github.com/fathom-agents/fathom/messages"
	"github.com/fathom-agents/fathom/messages/sessiongrain"
	"github.com/fathom-agents/fathom/persistence"
	"github.com/fathom-agents/fathom/persistence/memjournal"
)

// fakeNode is the gateway's interfaces in memory, for the tests of the gateway's own
// behaviour (startFake): session grains (gateway.Sessions) that decide with the session
// core (actors/session/core, the real grain's decisions: its refusals, its events, its
// state) and keep their events in an in-memory journal, the live feed over that journal
// (gateway.Feed), and that journal's session index (gateway.SessionIndex) and deletion
// (gateway.SessionDeleter), and a lone member's cluster view (gateway.Config.Cluster). There is no actor system and no model: a started session
// waits at its planning call, as a real one does until its model answers; a test answers
// for the model (answer) or runs the session to its end (complete).
//
// Like the real grain, a fake grain answers a caller of another tenant (or, under
// auth.Policy.MembersReadOwnOnly, another member) exactly as a missing session, a
// read-only caller's command with PERMISSION_DENIED, and a retried command id as a
// duplicate; its refusals are the grain's *cluster.GrainErrorResponse with the same
// reasons (messages/sessiongrain's helpers, the core's CommandError reasons).
type fakeNode struct {
	j      *memjournal.Journal
	feed   *feed.Feed
	core   core.Config
	policy auth.Policy

	mu     sync.Mutex // the grains' calls, one at a time, as a grain's are
	states map[string]*messages.SessionState
}

// newFakeNode returns an empty fake node; close it with close.
func newFakeNode() *fakeNode {
	j := memjournal.New(memjournal.Options{})
	return &fakeNode{j: j, feed: feed.New(j, feed.Options{}), core: core.DefaultConfig(), states: map[string]*messages.SessionState{}}
}

func (f *fakeNode) close() {
	f.feed.Close()
	_ = f.j.Close()
}

// Session implements gateway.Sessions.
func (f *fakeNode) Session(id string) gateway.SessionGrain { return &fakeGrain{f: f, id: id} }

// state returns session id's state (a new one when it has none); f.mu is held.
func (f *fakeNode) state(id string) *messages.SessionState {
	if s, ok := f.states[id]; ok {
		return s
	}
	return core.NewState(id)
}

// commit appends evs to id's stream, then makes next its state and publishes evs on the
// feed, as the grain's commit does; f.mu is held.
func (f *fakeNode) commit(id string, prev uint64, evs []*messages.Event, next *messages.SessionState) error {
	recs, err := core.EncodeEvents(evs)
	if err != nil {
		return sessiongrain.ErrInternal("session %s: %v", id, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := f.j.AppendIndexed(ctx, id, prev, recs, core.IndexEntryOf(next, time.Now())); err != nil {
		return sessiongrain.ErrUnavailable("session %s: events not stored: %v", id, err)
	}
	f.states[id] = next
	f.feed.Publish(id, evs)
	return nil
}

// events returns id's stored events with seq <= through.
func (f *fakeNode) events(id string, through uint64) ([]*messages.Event, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var evs []*messages.Event
	err := f.j.Load(ctx, id, 0, func(r persistence.Record) error {
		if r.Seq > through {
			return nil
		}
		ev, err := core.DecodeRecord(r)
		if err != nil {
			return err
		}
		evs = append(evs, ev)
		return nil
	})
	return evs, err
}

// ListSessions implements gateway.SessionIndex over the in-memory journal's index, as
// the node's does over its journal.
func (f *fakeNode) ListSessions(ctx context.Context, q gateway.ListQuery) ([]gateway.SessionSummary, error) {
	return node.ListSessions(ctx, f.j, q)
}

// DeleteSession implements gateway.SessionDeleter as the node's does: a session that
// ended is removed, a running one refused, a missing one not found.
func (f *fakeNode) DeleteSession(ctx context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	by := "node"
	if p, ok := auth.FromContext(ctx); ok {
		by = p.String()
	}
	if err := node.DeleteError(id, f.j.DeleteSession(ctx, id, by)); err != nil {
		return err
	}
	delete(f.states, id)
	return nil
}

// answer answers session id's pending model call with content, as its model would (the
// fake's stand-in for the scripted model): the session core decides what follows (a
// plan's first step, a human-input request, ...).
func (f *fakeNode) answer(id, content string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := f.state(id)
	p := st.GetPending()
	if p == nil {
		return fmt.Errorf("session %s waits for no model call (status %s)", id, st.GetStatus())
	}
	evs, next, err := core.Decide(st, &core.LLMResult{CallID: p.GetCallId(), Content: content, FinishReason: "stop", Model: "fake",
		Usage: &messages.Usage{InputTokens: 10, OutputTokens: 10, TotalTokens: 20}}, f.core, time.Now())
	if err != nil {
		return fmt.Errorf("answer %s's call %s: %w", id, p.GetCallId(), err)
	}
	if len(evs) == 0 {
		return fmt.Errorf("session %s: the answer to %s decided nothing", id, p.GetCallId())
	}
	return f.commit(id, st.GetSeq(), evs, next)
}

// complete runs session id to its end as a model that plans one custom step and answers
// every other call "done" would: it answers the pending model calls until the session
// ended. It fails when the session waits for something else (a human, a resume).
func (f *fakeNode) complete(id string) error {
	for range 50 {
		f.mu.Lock()
		st := f.state(id)
		f.mu.Unlock()
		if core.Terminal(st) {
			return nil
		}
		content := "done"
		if st.GetPending().GetPurpose() == core.PurposePlan {
			content = `{"steps":[{"id":"s1","type":"custom","description":"do it"}]}`
		}
		if err := f.answer(id, content); err != nil {
			return fmt.Errorf("complete %s: %w", id, err)
		}
	}
	return fmt.Errorf("session %s did not end after 50 answers", id)
}

// clusterInfo is the cluster view of a lone member (gateway.Config.Cluster).
func (f *fakeNode) clusterInfo(context.Context) (gateway.ClusterInfo, error) {
	const addr = "fake:0"
	return gateway.ClusterInfo{Node: addr, Members: []string{addr}, MemberDetails: []gateway.ClusterMember{{Address: addr}}}, nil
}

// fakeGrain is session id's grain of a fakeNode (gateway.SessionGrain).
type fakeGrain struct {
	f  *fakeNode
	id string
}

var _ gateway.SessionGrain = (*fakeGrain)(nil)

// grainError is the grain's answer to a decision's refusal.
func grainError(err error) error {
	var ce *core.CommandError
	if errors.As(err, &ce) {
		return cluster.NewGrainErrorResponse(ce.Reason.String(), ce.Msg)
	}
	return sessiongrain.ErrInternal("%v", err)
}

// authorize is the grain's check of caller on session st (actors/session: authorize).
func (g *fakeGrain) authorize(st *messages.SessionState, caller *messages.Principal, a auth.Action) error {
	if caller == nil {
		return nil
	}
	p := auth.FromMessage(caller)
	if a == auth.Act && !p.CanWrite() {
		return sessiongrain.ErrPermissionDenied("%s may only read", p)
	}
	if st.GetSeq() == 0 {
		return nil
	}
	switch g.f.policy.Allowed(p, a, st.GetTenant(), st.GetOwner()) {
	case auth.Hidden:
		return sessiongrain.ErrNotFound("session %q not found", g.id)
	case auth.Denied:
		return sessiongrain.ErrPermissionDenied("%s may not act on session %q (its owner or an operator of its tenant may)", p, g.id)
	}
	return nil
}

// authorizeNew is authorize for start and fork: an id another tenant holds is taken.
func (g *fakeGrain) authorizeNew(st *messages.SessionState, caller *messages.Principal) error {
	err := g.authorize(st, caller, auth.Act)
	if ge, ok := err.(*cluster.GrainErrorResponse); ok && ge.Reason == messages.ErrorReason_NOT_FOUND.String() {
		return sessiongrain.ErrFailedPrecondition("session id %q is taken: choose another, or leave it empty for a generated one", g.id)
	}
	return err
}

// read is the check of the grain's reads: allowed, and the session exists.
func (g *fakeGrain) read(caller *messages.Principal) (*messages.SessionState, error) {
	st := g.f.state(g.id)
	if err := g.authorize(st, caller, auth.Read); err != nil {
		return nil, err
	}
	if st.GetSeq() == 0 {
		return nil, sessiongrain.ErrNotFound("session %q not found", g.id)
	}
	return st, nil
}

// command is the grain's command path: authorize, the duplicate check, decide, commit.
func (g *fakeGrain) command(req interface {
	GetCaller() *messages.Principal
	GetCommandId() string
}) (*messages.CommandResponse, error) {
	g.f.mu.Lock()
	defer g.f.mu.Unlock()
	st := g.f.state(g.id)
	if err := g.authorize(st, req.GetCaller(), auth.Act); err != nil {
		return nil, err
	}
	if seq, ok := st.GetCommands()[req.GetCommandId()]; ok && req.GetCommandId() != "" {
		return &messages.CommandResponse{Seq: seq, Duplicate: true}, nil
	}
	evs, next, err := core.Decide(st, req, g.f.core, time.Now())
	if err != nil {
		return nil, grainError(err)
	}
	if len(evs) > 0 {
		if err := g.f.commit(g.id, st.GetSeq(), evs, next); err != nil {
			return nil, err
		}
		st = next
	}
	return &messages.CommandResponse{Seq: st.GetSeq()}, nil
}

func (g *fakeGrain) Start(r *messages.StartRequest, _ ...cluster.GrainCallOption) (*messages.StartResponse, error) {
	g.f.mu.Lock()
	defer g.f.mu.Unlock()
	st := g.f.state(g.id)
	if err := g.authorizeNew(st, r.GetCaller()); err != nil {
		return nil, err
	}
	if seq, ok := st.GetCommands()[r.GetCommandId()]; ok && r.GetCommandId() != "" {
		return &messages.StartResponse{SessionId: g.id, Seq: seq, Duplicate: true}, nil
	}
	if err := messages.ValidateSessionID(g.id); err != nil {
		return nil, sessiongrain.ErrInvalidArgument("%v", err)
	}
	evs, next, err := core.Decide(st, r, g.f.core, time.Now())
	if err != nil {
		return nil, grainError(err)
	}
	if err := g.f.commit(g.id, st.GetSeq(), evs, next); err != nil {
		return nil, err
	}
	return &messages.StartResponse{SessionId: g.id, Seq: next.GetSeq()}, nil
}

func (g *fakeGrain) GetState(r *messages.GetStateRequest, _ ...cluster.GrainCallOption) (*messages.GetStateResponse, error) {
	g.f.mu.Lock()
	defer g.f.mu.Unlock()
	st, err := g.read(r.GetCaller())
	if err != nil {
		return nil, err
	}
	return &messages.GetStateResponse{State: core.CloneState(st), Host: "fake", Exists: true}, nil
}

func (g *fakeGrain) Timeline(r *messages.TimelineRequest, _ ...cluster.GrainCallOption) (*messages.TimelineResponse, error) {
	g.f.mu.Lock()
	defer g.f.mu.Unlock()
	st, err := g.read(r.GetCaller())
	if err != nil {
		return nil, err
	}
	return core.TimelineOf(st), nil
}

func (g *fakeGrain) StateAt(r *messages.StateAtRequest, _ ...cluster.GrainCallOption) (*messages.StateAtResponse, error) {
	g.f.mu.Lock()
	defer g.f.mu.Unlock()
	st, err := g.read(r.GetCaller())
	if err != nil {
		return nil, err
	}
	seq, err := core.StateAtSeq(st, r)
	if err != nil {
		return nil, sessiongrain.ErrFailedPrecondition("session %s: %v", g.id, err)
	}
	evs, err := g.f.events(g.id, seq)
	if err != nil {
		return nil, sessiongrain.ErrUnavailable("session %s: %v", g.id, err)
	}
	s := core.NewState(g.id)
	for _, ev := range evs {
		if err := core.Apply(s, ev); err != nil {
			return nil, sessiongrain.ErrInternal("session %s: %v", g.id, err)
		}
	}
	return &messages.StateAtResponse{State: s, Seq: s.GetSeq(), StepIndex: r.GetStepIndex()}, nil
}

func (g *fakeGrain) SetBreakpoint(r *messages.SetBreakpointRequest, _ ...cluster.GrainCallOption) (*messages.CommandResponse, error) {
	return g.command(r)
}

func (g *fakeGrain) ClearBreakpoints(r *messages.ClearBreakpointsRequest, _ ...cluster.GrainCallOption) (*messages.CommandResponse, error) {
	return g.command(r)
}

func (g *fakeGrain) Cancel(r *messages.CancelRequest, _ ...cluster.GrainCallOption) (*messages.CommandResponse, error) {
	return g.command(r)
}

func (g *fakeGrain) Pause(r *messages.PauseRequest, _ ...cluster.GrainCallOption) (*messages.CommandResponse, error) {
	return g.command(r)
}

func (g *fakeGrain) Resume(r *messages.ResumeRequest, _ ...cluster.GrainCallOption) (*messages.CommandResponse, error) {
	return g.command(r)
}

func (g *fakeGrain) ProvideInput(r *messages.ProvideInputRequest, _ ...cluster.GrainCallOption) (*messages.CommandResponse, error) {
	return g.command(r)
}

func (g *fakeGrain) Send(r *messages.SendRequest, _ ...cluster.GrainCallOption) (*messages.CommandResponse, error) {
	return g.command(r)
}

// SetPushConfig records the config as the grain does, with the token and credentials
// left out (the grain seals them with the node's webhook secret; the fake has none).
func (g *fakeGrain) SetPushConfig(r *messages.SetPushConfigRequest, _ ...cluster.GrainCallOption) (*messages.CommandResponse, error) {
	return g.command(&messages.SetPushConfigRequest{Caller: r.GetCaller(), CommandId: r.GetCommandId(), Delete: r.GetDelete(),
		NotifyCurrent: r.GetNotifyCurrent(), Config: &messages.PushConfig{
			Id: r.GetConfig().GetId(), Url: r.GetConfig().GetUrl(), AuthScheme: r.GetConfig().GetAuthScheme()}})
}

// Fork makes this new session a fork of the request's source, as the grain does (its
// artifacts aside: the fake keeps none).
func (g *fakeGrain) Fork(r *messages.ForkRequest, _ ...cluster.GrainCallOption) (*messages.StartResponse, error) {
	g.f.mu.Lock()
	defer g.f.mu.Unlock()
	st := g.f.state(g.id)
	if err := g.authorizeNew(st, r.GetCaller()); err != nil {
		return nil, err
	}
	if dup, ok := core.ForkDuplicate(st, r); ok {
		return dup, nil
	}
	if err := messages.ValidateSessionID(g.id); err != nil {
		return nil, sessiongrain.ErrInvalidArgument("%v", err)
	}
	if err := core.CheckFork(st, r); err != nil {
		return nil, grainError(err)
	}
	srcID := r.GetSourceSessionId()
	cur, ok := g.f.states[srcID]
	if !ok || (r.GetCaller() != nil && g.f.policy.Allowed(auth.FromMessage(r.GetCaller()), auth.Read, cur.GetTenant(), cur.GetOwner()) != auth.Allow) {
		return nil, sessiongrain.ErrNotFound("fork %s: source session %q not found", g.id, srcID)
	}
	seq, err := core.ForkSeq(cur, r)
	if err != nil {
		return nil, sessiongrain.ErrFailedPrecondition("fork %s: source session %s: %v", g.id, srcID, err)
	}
	src, err := g.f.events(srcID, seq)
	if err != nil {
		return nil, sessiongrain.ErrUnavailable("fork %s: read source session %s: %v", g.id, srcID, err)
	}
	evs, next, err := core.Decide(st, core.ForkInput{Req: r, Source: src}, g.f.core, time.Now())
	if err != nil {
		return nil, grainError(err)
	}
	if err := g.f.commit(g.id, st.GetSeq(), evs, next); err != nil {
		return nil, err
	}
	return &messages.StartResponse{SessionId: g.id, Seq: next.GetSeq()}, nil
}

func (g *fakeGrain) Access(r *messages.AccessRequest, _ ...cluster.GrainCallOption) (*messages.AccessResponse, error) {
	g.f.mu.Lock()
	defer g.f.mu.Unlock()
	st := g.f.state(g.id)
	a := auth.Read
	if r.GetAct() {
		a = auth.Act
	}
	if err := g.authorize(st, r.GetCaller(), a); err != nil {
		return nil, err
	}
	if st.GetSeq() == 0 {
		return nil, sessiongrain.ErrNotFound("session %q not found", g.id)
	}
	return &messages.AccessResponse{Tenant: st.GetTenant(), Owner: st.GetOwner()}, nil
}
