package session

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/fathom-agents/fathom/auth"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"

	"github.com/fathom-agents/fathom/actors/agent"
	"github.com/fathom-agents/fathom/actors/dispatch"
	"github.com/fathom-agents/fathom/actors/session/core"
	"github.com/fathom-agents/fathom/actors/session/replay"
	"github.com/fathom-agents/fathom/actors/summarizer"
	"github.com/fathom-agents/fathom/messages"
	"github.com/fathom-agents/fathom/messages/sessiongrain"
	"github.com/fathom-agents/fathom/persistence"
)

// KindName is the cluster kind of session grains.
const KindName = "Session"

// Kind returns the cluster kind serving session grains. Every actor system that hosts
// the kind must have its Deps registered (Register) before the cluster starts.
func Kind() *cluster.Kind {
	// Timeout 0: the grain manages its own idle timeout (it must not passivate while a
	// step is in flight). Its children are its agent actors: a crashed one restarts and
	// asks for Work again (agent.Supervisor).
	// A PoisonPill reaches the grain as moveMsg (move.go): a grain whose identity moved to
	// another member finishes its running calls before it stops.
	return sessiongrain.NewSessionKind(func() sessiongrain.Session { return &Grain{} }, 0,
		actor.WithSupervisor(agent.Supervisor()), dispatch.Props(), actor.WithReceiverMiddleware(stopAtBoundary))
}

// Grain is the session grain: the event-sourced state of one session and the driver of
// its loop. All state changes go through commit: decide events (core.Decide, which folds
// them into a copy), append them to the journal with the expected sequence, make the
// copy the state and tell the commit observers (observer.go). The grain is that commit
// pipeline, its timers and its message dispatch; the rest is in the types it owns.
type Grain struct {
	deps        *Deps
	id          string
	log         *slog.Logger
	state       *messages.SessionState
	activatedAt time.Time
	// loadErr is set when the in-memory state cannot be trusted (a load or a write
	// failed); every command reloads first.
	loadErr error
	// fenced is set when another activation wrote the stream: this one is stopping.
	fenced bool
	// agents are the session's agent actors: they run the calls (agents.go).
	agents agents
	// loads counts loads of the state from the journal (agent actors' Work generation).
	loads uint64
	// timers are the activation's timers (timers.go).
	timers timers
	// snaps is the snapshot policy (snapshot.go).
	snaps snapshots
	// summaries are the requests to the summarizer pool (memory.go).
	summaries summaries
	// pipeline holds the appends in flight or queued, oldest first (pipeline.go); while
	// it is not empty, state is where they lead, not yet the journal's.
	pipeline []*appendJob
	appender *appender
	// answered is set when a pipelined append recorded an LLM answer: the summarizer
	// check runs once the pipeline drains.
	answered bool
	// trace is the activation's trace (trace.go): while its span is open, log carries
	// the span's ids.
	trace *tracer
	// pub tells the commit observers of each durable append (observer.go).
	pub publication
	// lease is the session's lease in the session index (lease.go).
	lease lease
	// endpoint checks the session's recorded model endpoint against the node's (endpoint.go).
	endpoint endpointCheck
	// newer is set once the session turned out to hold an event of a newer version
	// (newer.go): the activation hosts nothing and passivates when idle.
	newer bool
	// hooks is the activation's webhook delivery (webhook.go).
	hooks webhookState
	// move is the activation's move to another member (move.go).
	move move
}

var errNoDeps = errors.New("session deps are not registered on this actor system (session.Register)")

// Init loads the session's snapshot and events by identity and schedules the pending
// call, if any, to resume.
func (g *Grain) Init(ctx cluster.GrainContext) {
	g.id = ctx.Identity()
	d, ok := depsOf(ctx.ActorSystem())
	if !ok {
		g.log = slog.Default().With("session_id", g.id)
		g.loadErr = errNoDeps
		g.log.Error("session grain cannot start", "error", errNoDeps)
		return
	}
	g.deps = d
	g.log = d.Logger.With("session_id", g.id)
	g.agents = agents{deps: d, id: g.id, log: &g.log}
	self, root := ctx.Self(), ctx.ActorSystem().Root
	g.timers = timers{self: self, root: root, maxDelay: d.Config.RetryBackoffMax}
	g.hooks = webhookState{self: self, root: root}
	g.trace = newTracer(d, g.id, ctx.ActorSystem().Address(), g.log, func(l *slog.Logger) { g.log = l })
	// The node's observers, then the activation's own: its snapshot policy, trace and lease.
	g.pub = publication{id: g.id, observers: append(slices.Clip(d.observers), &g.snaps, g.trace, &g.lease)}
	g.activatedAt = d.Now()
	err := g.load()
	// Every line the activation logs while it works on a run is written inside its span
	// (session.activation): it carries the ids.
	g.trace.activated(g.state)
	if errors.Is(err, persistence.ErrNewerFormat) {
		g.log.Debug("load session", "error", err) // onResume says it plainly (newer.go)
	} else if err != nil {
		g.log.Error("load session", "error", err)
	} else {
		g.log.Debug("session activated", "seq", g.state.GetSeq(), "snapshot_seq", g.snaps.seq)
	}
	if d.Drain != nil {
		g.agents.draining = d.Drain.register(g.id, ctx.Self())
	}
	if err == nil {
		if h := heldElsewhere(d, g.id, ctx.ActorSystem().Address(), g.state); h != "" {
			// An activation on member h may still run the calls in flight (a grain that
			// moves finishes them first, move.go): run none until it let go (ready).
			g.loadErr = &heldError{holder: h}
			g.log.Info("session activated while another member still hosts it: waiting for its lease", "holder", h)
		}
	}
	if _, held := g.loadErr.(*heldError); !held {
		g.lease.start(ctx, d, g.id, g.trace.baseLog)
	}
	ctx.Send(ctx.Self(), &resumeMsg{})
}

// Terminate ends the activation (passivation, fence, node shutdown). The agent actors,
// children, stop with it (and their calls); a pending call resumes on the next activation.
func (g *Grain) Terminate(ctx cluster.GrainContext) {
	g.hooks.stop()
	g.timers.stop()
	defer g.move.end(ctx, g.deps, g.id, g.state) // after the lease's release: the new owner takes it
	// The appends in flight end with the activation: those that became durable are
	// published in order, as finishJob would have (subscribers, metrics, the embedder and
	// the trace see every acknowledged event even when the activation ends right after
	// its last append). Nothing after a failed append was appended.
	ok := true
	for _, job := range g.pipeline {
		<-job.done
		if job.handled {
			continue
		}
		job.handled = true
		if ok = ok && job.err == nil && job.last == job.next; ok {
			g.pub.publish(job.evs, job.recs, job.state, g.log)
		}
	}
	if g.trace != nil {
		g.trace.end(g.state.GetSeq()) // a run still working goes on in the next activation
	}
	g.lease.end()
	if g.deps != nil && g.deps.Drain != nil {
		g.deps.Drain.unregister(g.id, ctx.Self())
	}
	if g.deps != nil && g.loads > 0 {
		for _, o := range g.deps.observers {
			if a, ok := o.(ActivationObserver); ok {
				a.Deactivated(g.id, g.state, g.log)
			}
		}
	}
	if g.log != nil {
		g.log.Debug("session deactivated", "seq", g.state.GetSeq())
	}
	// Drop what the stopped activation holds. Proto.Actor can keep a stopped actor's
	// context reachable for a while: a parent's set of children removes a child by
	// shortening its slice, and the slot past the end keeps the child's PID, whose cached
	// process leads to the context and the actor. Grains are children of the cluster's
	// placement actor, so up to as many stopped grains as were ever active at once stayed
	// reachable, each with its state, its agents and their history: a passivated session
	// left kilobytes behind. Nothing runs on the grain after Terminate (its timers are
	// stopped, its pipeline drained, its goroutines hold their own references).
	g.state, g.pub.prev, g.pipeline, g.appender, g.agents = nil, nil, nil, nil, agents{}
	g.trace = nil
}

// ReceiveDefault handles the grain's own messages and its runners' results.
func (g *Grain) ReceiveDefault(ctx cluster.GrainContext) {
	defer g.updateIdle(ctx)
	switch msg := ctx.Message().(type) {
	case *appendDone: // act on the outcome of msg.job and of every job before it
		if i := slices.Index(g.pipeline, msg.job); i >= 0 {
			g.settle(ctx, len(g.pipeline)-i-1)
		}
		return
	case *snapshotDone: // bookkeeping only: no need to wait for the pipeline
		g.snaps.done(msg, g.log)
		return
	case *leaseTickMsg: // the lease is not the session's state: no need to wait either
		if !g.fenced {
			g.lease.tick(g.state)
		}
		return
	case *leaseDone:
		g.lease.done(msg, g.fenced)
		return
	case *drainMsg: // drain.go: what runs finishes, nothing new starts
		if !g.agents.draining {
			g.log.Info("member draining: session finishes its running calls and starts none")
		}
		g.agents.drain(ctx, g.state)
		return
	case *moveMsg: // move.go: stop, but after the running calls
		if g.move.begin(ctx, g, workDue(&g.agents, &g.hooks, g.state)) {
			ctx.Stop(ctx.Self())
		}
		return
	case *actor.Touch: // answered by Proto.Actor: a probe that the activation lives
		return
	case *moveOverdue:
		g.log.Warn("moving session's calls outlast the drain timeout: stopping; the new owner runs them again")
		ctx.Stop(ctx.Self())
		return
	case *agent.Drained:
		g.agents.drained(msg)
		return
	case *core.LLMResult:
		// The answer of the orchestrator's pending LLM call, with pipelining on, is decided
		// before the appends in flight are durable (pipeline.go): against the optimistic
		// state, its events queued behind them, once fewer than PipelineDepth are queued.
		if g.decideAhead(ctx, "llm result "+msg.CallID, msg, func() bool {
			return msg.CallID != "" && g.state.GetPending().GetCallId() == msg.CallID
		}) {
			return
		}
	case *core.ToolResult:
		// The result of an orchestrator's call of a tool without effects (started early,
		// agents.startEarly) is decided like an LLM answer: against the optimistic state,
		// its events queued behind the append of its tool_called, often in the same append.
		if g.decideAhead(ctx, "tool result "+msg.Key, msg, func() bool {
			pt := pendingToolOf(g.state, agent.Orchestrator, msg.Key)
			return pt != nil && g.agents.noEffects(pt.GetTool())
		}) {
			return
		}
	case *agent.CallLost, *agent.ToolLost:
		if in, _ := lostCall(g.state, msg, g.deps); in == nil { // answered: no need to wait for the pipeline
			return
		}
	}
	// Everything else is decided against durable state.
	g.settle(ctx, 0)
	switch msg := ctx.Message().(type) {
	case *resumeMsg:
		g.onResume(ctx)
	case *core.LLMResult:
		g.onDecision(ctx, "llm result "+msg.CallID, msg)
	case *core.ToolResult:
		g.onDecision(ctx, "tool result "+msg.Key, msg)
	case *summarizer.Result:
		g.summaries.out = false
		g.onDecision(ctx, "summary", core.SummaryDone{Content: msg.Content, Through: msg.Through, Tokens: msg.Tokens})
		if g.loadErr == nil && !g.fenced { // more may have been recorded while the summarizer worked
			g.summaries.maybe(ctx, g.deps, g.id, g.state, g.log)
		}
	case *summarizer.Failure:
		g.summaries.failed(msg, g.deps, g.log)
	case core.RetryDue, core.InterruptDue, core.HumanDue:
		g.timers.fired(msg)
		g.onDecision(ctx, fmt.Sprintf("%T", msg), msg)
	case *webhookDueMsg:
		g.hooks.fired(msg, g.log)
		g.onDecision(ctx, "webhook due", nil)
	case *webhookDone:
		g.hooks.fired(msg, g.log)
		g.onDecision(ctx, "webhook "+msg.id, core.WebhookDone{ID: msg.id, Attempt: msg.attempt, Outcome: msg.outcome, Config: g.deps.Webhooks.Config()})
	case *agent.NeedWork:
		if g.loadErr == nil && !g.fenced {
			g.agents.needWork(ctx, g.state, msg)
		}
	case *agent.CallLost, *agent.ToolLost:
		// A call whose runner stopped without an answer is failed; after a normal answer
		// it is no longer pending and this is a no-op.
		if in, what := lostCall(g.state, msg, g.deps); in != nil && g.loadErr == nil {
			g.log.Warn(what)
			g.onDecision(ctx, what, in)
		}
	default:
		if g.log != nil {
			g.log.Warn("session grain: unexpected message", "type", fmt.Sprintf("%T", msg))
		}
	}
}

// Start starts the session. It is idempotent by command id.
func (g *Grain) Start(req *messages.StartRequest, ctx cluster.GrainContext) (resp *messages.StartResponse, err error) {
	defer g.guard(ctx, "Start")
	defer g.updateIdle(ctx)
	if err := g.ready(ctx); err != nil {
		return nil, err
	}
	if err := authorizeNew(g.deps, g.state, g.id, req.GetCaller()); err != nil {
		return nil, err
	}
	if seq, ok := g.state.GetCommands()[req.GetCommandId()]; ok && req.GetCommandId() != "" {
		return &messages.StartResponse{SessionId: g.id, Seq: seq, Duplicate: true}, nil
	}
	if err := messages.ValidateSessionID(g.id); err != nil {
		return nil, sessiongrain.ErrInvalidArgument("%v", err)
	}
	evs, next, err := core.Decide(g.state, req, g.deps.Config.Core, g.deps.Now())
	if err != nil {
		return nil, grainError(err)
	}
	if err := admitStart(g.deps.Quotas, g.state, evs); err != nil {
		return nil, err
	}
	if err := g.commit(ctx, evs, next); err != nil {
		return nil, err
	}
	g.kick(ctx)
	return &messages.StartResponse{SessionId: g.id, Seq: g.state.GetSeq()}, nil
}

// GetState returns the session's folded state.
func (g *Grain) GetState(req *messages.GetStateRequest, ctx cluster.GrainContext) (*messages.GetStateResponse, error) {
	defer g.guard(ctx, "GetState")
	defer g.updateIdle(ctx)
	if err := readable(ctx, g); err != nil {
		return nil, err
	}
	if err := authorize(g.deps, g.state, g.id, req.GetCaller(), auth.Read); err != nil {
		return nil, err
	}
	if g.state.GetSeq() == 0 {
		return nil, sessiongrain.ErrNotFound("session %q not found", g.id)
	}
	// g.state is never mutated once installed (commit folds events into a clone and
	// swaps it in), so it is handed out without a copy. In-process callers must treat
	// the response as read-only; remote callers get their own decoded copy.
	return &messages.GetStateResponse{
		State:               g.state,
		Host:                ctx.ActorSystem().Address(),
		Exists:              true,
		ActivatedAtUnixNano: g.activatedAt.UnixNano(),
	}, nil
}

// guard answers the caller of a crashing command with INTERNAL, then lets the panic
// continue so the supervisor restarts the grain, whose Init reloads from the journal.
// The caller gets an error, never a hang, and retries with the same command id.
func (g *Grain) guard(ctx cluster.GrainContext, method string) {
	if p := recover(); p != nil {
		if g.log != nil {
			g.log.Error("session grain crashed; restarting and reloading from the journal", "method", method, "panic", p)
		}
		ctx.Respond(sessiongrain.ErrInternal("session %s: %s crashed and was reloaded from the journal; retry with the same command_id", g.id, method))
		panic(p)
	}
}

// grainError maps a decision error to the error code the caller sees.
func grainError(err error) error {
	var ce *core.CommandError
	if errors.As(err, &ce) {
		return cluster.NewGrainErrorResponse(ce.Reason.String(), ce.Msg)
	}
	return sessiongrain.ErrInternal("%v", err)
}

// ready makes sure the in-memory state is the journal's: the pipeline is drained
// (settle) and the state reloaded after a failure.
func (g *Grain) ready(ctx cluster.GrainContext) error {
	g.settle(ctx, 0)
	switch {
	case g.fenced:
		return sessiongrain.ErrUnavailable("session %s moved to another activation; retry", g.id)
	case g.deps == nil:
		return sessiongrain.ErrInternal("session %s: %v", g.id, errNoDeps)
	case g.loadErr == nil:
		return nil
	}
	_, held := g.loadErr.(*heldError)
	backoff := g.timers.retryDelay // load resets it; a wait for the lease keeps backing off
	if err := g.load(); err != nil {
		if errors.Is(err, persistence.ErrNewerFormat) {
			return sessiongrain.ErrFailedPrecondition("session %s cannot be loaded: %v", g.id, err)
		}
		if errors.Is(err, persistence.ErrCorrupt) || errors.Is(err, core.ErrBadEvent) {
			return sessiongrain.ErrInternal("session %s cannot be loaded: %v", g.id, err)
		}
		return sessiongrain.ErrUnavailable("session %s is unavailable: %v", g.id, err)
	}
	if held {
		if h := heldElsewhere(g.deps, g.id, ctx.ActorSystem().Address(), g.state); h != "" {
			g.loadErr, g.timers.retryDelay = &heldError{holder: h}, backoff
			return sessiongrain.ErrUnavailable("session %s is still hosted by member %s, which finishes its running calls; retry", g.id, h)
		}
		// The other member let go: this activation hosts the session from now on.
		g.log.Info("session taken over from the member that hosted it", "seq", g.state.GetSeq())
		g.lease.start(ctx, g.deps, g.id, g.trace.baseLog)
		ctx.Send(ctx.Self(), &resumeMsg{})
		return nil
	}
	g.log.Info("session reloaded from the journal", "seq", g.state.GetSeq())
	return nil
}

// readable is ready for a read (state, timeline, time travel, access): while another
// member still hosts the session (heldError), the read is answered from the state this
// activation loaded last; every other failure is ready's.
func readable(ctx cluster.GrainContext, g *Grain) error {
	err := g.ready(ctx)
	if _, held := g.loadErr.(*heldError); held && g.state != nil {
		return nil
	}
	return err
}

func (g *Grain) load() error {
	ctx, cancel := context.WithTimeout(context.Background(), g.deps.Config.JournalTimeout)
	defer cancel()
	s, snapSeq, err := replay.Load(ctx, g.deps.Journal, g.id, 0)
	if err != nil {
		g.loadErr = err
		return err
	}
	g.state, g.snaps.seq, g.loadErr, g.timers.retryDelay = s, snapSeq, nil, 0
	g.pub.prev = s
	g.loads++
	g.agents.gen = g.loads
	if g.loads == 1 {
		for _, o := range g.deps.observers {
			if a, ok := o.(ActivationObserver); ok {
				a.Activated(g.id, s, g.log)
			}
		}
	}
	return nil
}

// commit makes evs durable and then current: they are applied to a copy of the state
// first (a decision bug never reaches the journal), appended with the expected sequence,
// and only then become the grain's state and are published.
func (g *Grain) commit(ctx cluster.GrainContext, evs []*messages.Event, next *messages.SessionState) error {
	recs, err := core.EncodeEvents(evs)
	if err != nil {
		return sessiongrain.ErrInternal("session %s: %v", g.id, err)
	}
	early := !g.fenced && g.loadErr == nil && !g.endpoint.blocked(g.deps, g.id, g.state, g.log) && g.agents.startEarly(ctx, g.state, next)
	jctx, cancel := context.WithTimeout(context.Background(), g.deps.Config.JournalTimeout)
	last, err := appendIndexed(jctx, g.deps, g.id, g.state.GetSeq(), recs, next, g.lease.owner)
	cancel()
	if err != nil || last != next.GetSeq() {
		g.agents.cancelEarly(ctx, early)
	}
	switch {
	case errors.Is(err, persistence.ErrConflict):
		g.fence(ctx, err)
		return sessiongrain.ErrUnavailable("session %s was written by another activation; retry", g.id)
	case err != nil:
		g.log.Error("append events failed; reloading from the journal", "events", len(evs), "expected_seq", g.state.GetSeq(), "error", err)
		g.loadErr = err
		g.timers.retryLater()
		return sessiongrain.ErrUnavailable("session %s: events not stored: %v", g.id, err)
	case last != next.GetSeq():
		g.loadErr = fmt.Errorf("journal stored through seq %d, expected %d", last, next.GetSeq())
		g.timers.retryLater()
		return sessiongrain.ErrInternal("session %s: %v", g.id, g.loadErr)
	}
	g.state = next
	if g.pub.publish(evs, recs, next, g.log) {
		g.summaries.maybe(ctx, g.deps, g.id, g.state, g.log)
	}
	g.snaps.maybe(ctx, g.deps, g.id, g.state)
	return nil
}

// fence stops this activation: another one owns the stream. The next request activates
// a fresh grain that loads everything.
func (g *Grain) fence(ctx cluster.GrainContext, err error) {
	g.log.Warn("another activation wrote this session; stopping this one", "error", err)
	g.fenced = true
	g.hooks.stop()
	g.timers.stop()
	ctx.Stop(ctx.Self())
}

// kick starts what the state says is due and not yet running: the oldest follow-up
// message queued while a turn ran, once the session completed (double texting,
// core/onbusy.go: its turn opens as a send's would); otherwise it tells the agent actors
// the committed state (they run the pending LLM calls and tool calls), submits the
// webhook notifications due and sets the timers of a retry, an interrupt's deadline and
// human-input deadlines.
func (g *Grain) kick(ctx cluster.GrainContext) {
	g.agents.due = false
	if g.fenced || g.loadErr != nil || g.endpoint.blocked(g.deps, g.id, g.state, g.log) {
		return
	}
	if g.state.GetStatus() == messages.SessionStatus_SESSION_STATUS_COMPLETED && len(g.state.GetQueuedMessages()) > 0 && len(g.pipeline) == 0 {
		evs, next, err := core.Decide(g.state, core.QueuedDue{}, g.deps.Config.Core, g.deps.Now())
		switch {
		case err != nil:
			g.log.Warn("queued message cannot run", "error", err)
		case len(evs) > 0:
			if err := g.commit(ctx, evs, next); err != nil {
				g.log.Warn("commit failed", "input", "queued message", "error", err)
				break
			}
			g.kick(ctx) // the new turn
			return
		}
	}
	g.agents.kick(ctx, g.state)
	g.hooks.kick(g.deps, g.id, g.state)
	if core.Terminal(g.state) {
		return
	}
	g.timers.arm(g.state)
}

func (g *Grain) onResume(ctx cluster.GrainContext) {
	if err := g.ready(ctx); err != nil {
		if errors.Is(g.loadErr, persistence.ErrNewerFormat) { // newer.go: retrying would not help
			if !g.newer {
				logNewer(g.log, g.loadErr)
			}
			g.newer = true
			g.hooks.stop()
			g.timers.stop()
			g.lease.end()
			return
		}
		if _, held := g.loadErr.(*heldError); held { // waiting for another member's lease: expected, not a fault
			g.log.Info("session waits for the member that hosts it; retrying", "error", err)
		} else {
			g.log.Warn("session not ready, retrying", "error", err)
		}
		if !g.fenced && g.deps != nil {
			g.timers.retryLater()
		}
		return
	}
	g.kick(ctx)
	if g.loadErr == nil && !g.fenced {
		g.summaries.maybe(ctx, g.deps, g.id, g.state, g.log)
	}
}

// decideAhead decides input in against the grain's optimistic state and queues its
// events behind the appends in flight (commitAsync), when pipelining is on, the state
// is sound and pending(in) holds (before and after waiting for room in the pipeline). It
// reports whether it took in; otherwise in is decided against durable state.
func (g *Grain) decideAhead(ctx cluster.GrainContext, what string, in any, pending func() bool) bool {
	ok := func() bool {
		return g.deps != nil && g.deps.Config.PipelineDepth > 0 && g.loadErr == nil && !g.fenced && pending()
	}
	if !ok() {
		return false
	}
	g.settle(ctx, g.deps.Config.PipelineDepth-1)
	if !ok() { // an append failed meanwhile
		return false
	}
	evs, next, err := core.Decide(g.state, in, g.deps.Config.Core, g.deps.Now())
	if err == nil && len(evs) > 0 {
		err = g.commitAsync(ctx, evs, next)
	}
	if err != nil {
		g.log.Warn("commit failed", "input", what, "error", err)
	}
	return true
}

// onDecision commits what the core decides on input in (core.Decide; nil: nothing to
// decide) against the current state, then starts whatever became due. When the state
// cannot be trusted the input is dropped: after the reload the call it answers is still
// pending and is made again.
func (g *Grain) onDecision(ctx cluster.GrainContext, what string, in any) {
	if err := g.ready(ctx); err != nil {
		g.log.Warn("dropped: session not ready", "input", what, "error", err)
		if !g.fenced {
			g.timers.retryLater()
		}
		return
	}
	if in != nil {
		evs, next, err := core.Decide(g.state, in, g.deps.Config.Core, g.deps.Now())
		if err == nil && len(evs) > 0 {
			err = g.commit(ctx, evs, next)
		}
		if err != nil {
			g.log.Warn("commit failed", "input", what, "error", err)
			return
		}
	}
	g.kick(ctx)
}

// updateIdle passivates an idle grain after IdleTimeout, but never while an LLM or tool
// call is due (its agent actor runs it) or a retry is due (nothing would wake it up).
func (g *Grain) updateIdle(ctx cluster.GrainContext) {
	if g.agents.draining && g.deps != nil && g.deps.Drain != nil { // whether this draining grain still runs a call or appends
		g.deps.Drain.report(g.id, !g.fenced && (g.agents.running() || len(g.pipeline) > 0))
	}
	if g.move.done(g) {
		ctx.Stop(ctx.Self())
		return
	}
	if g.deps == nil || g.fenced {
		return
	}
	busy := len(g.pipeline) > 0 || workDue(&g.agents, &g.hooks, g.state)
	if busy || (g.loadErr != nil && !g.newer) {
		ctx.CancelReceiveTimeout()
		return
	}
	timeout := g.deps.Config.IdleTimeout
	if f := g.deps.Config.FinishedIdleTimeout; f > 0 && f < timeout && core.Terminal(g.state) {
		timeout = f
	}
	ctx.SetReceiveTimeout(timeout)
}

var _ sessiongrain.Session = (*Grain)(nil)
