package session

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"

	"github.com/fathom-agents/fathom/actors/session/core"
	"github.com/fathom-agents/fathom/messages"
	"github.com/fathom-agents/fathom/messages/sessiongrain"
	"github.com/fathom-agents/fathom/persistence"
)

// The commit pipeline. A step's LLM call is started while the events requesting it are
// still being appended (startEarly); with a fast model its answer arrives before that
// append returns. Waiting for the append before deciding the answer would put the
// grain's own work (decide, Apply, encode) and the next call's request build behind
// every commit. Instead the grain decides the answer at once against its optimistic
// state, the state its appended-or-appending events lead to, and queues the resulting
// append behind the one in flight: appends go out back to back, each with the sequence
// its predecessor ends at, and the grain's work overlaps the journal's.
//
// What may not run ahead of durability does not: events are published, embedded and
// acknowledged only once their append returned, tool calls and sub-agents start and
// snapshots are taken only when the pipeline is empty (kick), and every input other
// than the answer of the orchestrator's pending call first waits for the pipeline to
// drain (settle), so commands, tools, sub-agents, timers and the summarizer see durable
// state exactly as before. The one exception is a tool without effects outside the
// session (tools.NoEffects, e.g. write_todos): its call starts with the LLM call's
// (startEarly) and its result is decided like an LLM answer, so a step that calls one
// pays one append for the call and its result instead of two in a row; running it again
// after a failed append is harmless. If an append fails, the appends queued behind it are never
// made (their expected sequence would not hold), the early runner is stopped and the
// grain reloads from the journal, as after a failed synchronous commit.

// errNotAppended is the outcome of a queued append whose predecessor failed.
var errNotAppended = errors.New("not appended: an earlier append of this session failed")

// appendJob is one queued append of the pipeline.
type appendJob struct {
	evs      []*messages.Event
	recs     []persistence.Record
	expected uint64 // the stream's seq before this append
	next     uint64 // the stream's seq after it
	// state is the state after evs (never mutated): durable once the append returned.
	state *messages.SessionState
	// done is closed when last and err are set.
	done chan struct{}
	last uint64
	err  error
	// handled is set (by the grain) once the outcome was acted on.
	handled bool
}

// appendDone tells the grain that job's append returned.
type appendDone struct{ job *appendJob }

// commitAsync queues evs behind the appends in flight: they become the grain's
// (optimistic) state now, the call they make pending starts now, and everything that
// must follow durability happens when the append returns (finishJob).
//
// next is the state evs lead to (core.Decide).
func (g *Grain) commitAsync(ctx cluster.GrainContext, evs []*messages.Event, next *messages.SessionState) error {
	recs, err := core.EncodeEvents(evs)
	if err != nil {
		return sessiongrain.ErrInternal("session %s: %v", g.id, err)
	}
	job := &appendJob{evs: evs, recs: recs, expected: g.state.GetSeq(), next: next.GetSeq(), state: next, done: make(chan struct{})}
	g.pipeline = append(g.pipeline, job)
	if g.appender == nil {
		g.appender = &appender{id: g.id, deps: g.deps, owner: g.lease.owner, timeout: g.deps.Config.JournalTimeout, self: ctx.Self(), root: ctx.ActorSystem().Root}
	}
	g.appender.enqueue(job)
	if !g.endpoint.blocked(g.deps, g.id, g.state, g.log) {
		g.agents.startEarly(ctx, g.state, next)
	}
	g.state = next
	return nil
}

// settle waits for the oldest appends until at most keep are in flight or queued, and
// acts on each outcome. With keep 0 the grain's state is the journal's afterwards (or,
// after a failure, marked for reload); with PipelineDepth-1 there is room for one more
// (backpressure: the grain runs at most that far ahead of the journal).
func (g *Grain) settle(ctx cluster.GrainContext, keep int) {
	for len(g.pipeline) > keep {
		head := g.pipeline[0]
		<-head.done // appends finish in order
		g.finishJob(ctx, head)
	}
}

// finishJob acts on the outcome of the pipeline's head: a durable append is published
// (its observers told) and may be snapshotted; a failed one drops the rest of the
// pipeline, stops the early runner and leaves the state to be reloaded. When the
// pipeline empties, what waited for durability runs (kick, summarizer).
func (g *Grain) finishJob(ctx cluster.GrainContext, job *appendJob) {
	// The slot is cleared: the slice's array outlives the jobs it slid past, and a job
	// holds its events, their records and a whole state.
	g.pipeline[0] = nil
	g.pipeline = g.pipeline[1:]
	job.handled = true
	err := job.err
	if err == nil && job.last != job.next {
		err = fmt.Errorf("journal stored through seq %d, expected %d", job.last, job.next)
	}
	if err != nil {
		// Nothing after it was appended, the state is not the journal's, the early runner
		// answers a call that may not exist.
		for _, rest := range g.pipeline {
			<-rest.done
			rest.handled = true
		}
		g.pipeline = nil
		g.appender.reset()
		g.agents.cancelEarly(ctx, true)
		if errors.Is(err, persistence.ErrConflict) {
			g.fence(ctx, err)
			return
		}
		g.log.Error("pipelined append failed; reloading from the journal", "events", len(job.evs), "expected_seq", job.expected, "error", err)
		g.loadErr = err
		g.timers.retryLater()
		return
	}
	g.answered = g.pub.publish(job.evs, job.recs, job.state, g.log) || g.answered
	g.snaps.maybe(ctx, g.deps, g.id, job.state)
	if len(g.pipeline) == 0 {
		g.kick(ctx)
		if g.answered {
			g.answered = false
			if g.loadErr == nil && !g.fenced {
				g.summaries.maybe(ctx, g.deps, g.id, g.state, g.log)
			}
		}
	}
}

// appender makes a grain's pipelined appends: one at a time, in order, each carrying
// every job queued while the previous one was in flight (a group commit: a session
// whose grain decides faster than the journal commits pays one commit for several
// steps). No goroutine waits on an append: each is made with
// persistence.AppendIndexedAsync, and its completion (on the journal's goroutine) closes
// its jobs and tells the grain (appendDone); the jobs queued meanwhile are then handed to
// the journal by a goroutine that ends once it has (appended). A journal without
// asynchronous appends runs each on a goroutine of its own, as long as that append.
type appender struct {
	id      string
	deps    *Deps
	owner   string // the lease owner (lease.go)
	timeout time.Duration
	self    *actor.PID
	root    *actor.RootContext

	mu      sync.Mutex
	queue   []*appendJob // not yet started
	running bool         // an append is in flight
	failed  bool         // an append failed: nothing queued after it is appended

	// The append in flight (one at a time): its jobs and the release of its context.
	// onAppended is a.appended, made once (a method value passed per append would be an
	// allocation per append).
	inflight   []*appendJob
	cancel     context.CancelFunc
	onAppended func(last uint64, err error)
}

// enqueue queues job, and starts its append unless one is in flight (the append in
// flight starts it when it returns). Each append is bounded by timeout.
func (a *appender) enqueue(job *appendJob) {
	a.mu.Lock()
	a.queue = append(a.queue, job)
	if a.running {
		a.mu.Unlock()
		return
	}
	a.running = true
	a.mu.Unlock()
	a.next()
}

// reset clears the failure once the grain has acted on it (every job is done).
func (a *appender) reset() {
	if a == nil {
		return
	}
	a.mu.Lock()
	a.failed = false
	a.mu.Unlock()
}

// next starts the append of every queued job, or ends the run (running) when none is
// queued. After a failure the queued jobs are not appended: they end at once with
// errNotAppended. Only the one that set running, or the completion of the append in
// flight, calls it.
func (a *appender) next() {
	for {
		a.mu.Lock()
		batch, failed := a.queue, a.failed
		a.queue = nil
		if len(batch) == 0 {
			a.running = false
			a.mu.Unlock()
			return
		}
		a.mu.Unlock()
		if !failed {
			a.append(batch)
			return
		}
		a.complete(batch, errNotAppended)
	}
}

// complete sets the outcome of batch's jobs, err (nil: appended), and tells the grain.
func (a *appender) complete(batch []*appendJob, err error) {
	if err != nil {
		a.mu.Lock()
		a.failed = true
		a.mu.Unlock()
	}
	for _, job := range batch {
		job.last, job.err = job.next, err
		if err != nil {
			job.last = 0
		}
		close(job.done)
	}
	a.root.Send(a.self, &appendDone{job: batch[len(batch)-1]})
}

// append starts batch as one journal append after batch[0].expected; its completion
// (appended) completes batch and starts the next.
func (a *appender) append(batch []*appendJob) {
	recs := batch[0].recs
	if len(batch) > 1 {
		n := 0
		for _, job := range batch {
			n += len(job.recs)
		}
		recs = make([]persistence.Record, 0, n)
		for _, job := range batch {
			recs = append(recs, job.recs...)
		}
	}
	if a.onAppended == nil {
		a.onAppended = a.appended
	}
	var ctx context.Context
	ctx, a.cancel = context.WithTimeout(context.Background(), a.timeout)
	a.inflight = batch
	appendIndexedAsync(ctx, a.deps, a.id, batch[0].expected, recs, batch[len(batch)-1].state, a.owner, a.onAppended)
}

// appended is the outcome of the append in flight.
func (a *appender) appended(last uint64, err error) {
	batch := a.inflight
	a.cancel()
	a.inflight, a.cancel = nil, nil
	if want := batch[len(batch)-1].next; err == nil && last != want {
		err = fmt.Errorf("journal stored through seq %d, expected %d", last, want)
	}
	a.complete(batch, err)
	a.mu.Lock()
	if len(a.queue) == 0 {
		a.running = false
		a.mu.Unlock()
		return
	}
	a.mu.Unlock()
	// The jobs queued meanwhile are appended from a goroutine of their own, which ends
	// once it has handed them to the journal: their preparation stays off the journal's
	// goroutine, and the jobs the grain decides while it starts go in the same append.
	go a.next()
}
