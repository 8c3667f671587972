// Package dispatch owns the goroutines that run Fathom's actor mailboxes.
//
// Proto.Actor's default dispatcher starts a new goroutine every time a mailbox is
// scheduled. A new goroutine starts with a small stack, and the session grain's message
// path (the generated grain dispatcher, protobuf decoding, the grain's handlers) is deep
// enough that the stack is grown and copied on nearly every message: profiled, a quarter
// of a grain request's CPU time was runtime.copystack. Pool keeps a bounded set of idle
// workers whose stacks have already grown and hands each scheduled mailbox to one of
// them; when none is idle it starts a new goroutine exactly as the default dispatcher
// does, so a mailbox never waits for a worker (an actor that blocks cannot starve
// another) and the pool cannot deadlock. At most MaxIdle workers wait for work: a worker
// that finishes while that many wait exits at once. Workers also run calls that block
// for a model's answer (Run), so after a burst of many sessions the pool would
// otherwise keep one grown stack (16-64 kB) per session for DefaultIdle: profiled at 200
// active sessions, idle workers' stacks were a quarter of the RSS per session.
//
// Work that is not a mailbox but whose stack is as deep runs on a pool of its own, Calls:
// an agent actor (actors/agent) runs its LLM calls, its tool calls and a Go-function
// agent's run with Run. Such a call spends most of its life waiting on the network with
// its stack, and a worker keeps the stack its deepest work grew: one that ran mailboxes
// (a grain's message path grows it to 32 KB and more) would hold that stack for the
// whole wait, where a model call's own chain fits in 16 KB. The collector halves a
// waiting stack only when less than a quarter of it is in use, one halving per cycle,
// and a cycle may not come during a wait. Measured with 1,000 sessions each waiting on a
// model call: goroutine stacks per session 28 kB with one shared pool, 24 kB with Calls.
package dispatch

import (
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// DefaultThroughput is how many messages a mailbox processes before yielding its worker,
// Proto.Actor's default.
const DefaultThroughput = 300

// DefaultIdle is how long an idle worker waits for work before it exits.
const DefaultIdle = 30 * time.Second

// DefaultMaxIdle is how many idle workers a pool keeps at most: many more than mailboxes
// run at once on the cores of a node (the work that keeps a worker long is a blocked
// call, which needs no idle worker until it returns), few enough that the stacks of a
// burst's workers do not stay resident.
const DefaultMaxIdle = 64

// Pool is an actor.Dispatcher running mailboxes on reusable worker goroutines. The zero
// value is not usable; use New.
type Pool struct {
	work       chan func()
	idle       time.Duration
	throughput int
	maxIdle    int32
	// waiting counts the workers waiting for work (an upper bound: a worker counts
	// itself before it waits and uncounts itself once it took work).
	waiting atomic.Int32
}

var _ actor.Dispatcher = (*Pool)(nil)

// New returns a pool whose idle workers exit after idle (DefaultIdle when ≤ 0), of which
// at most maxIdle wait for work (DefaultMaxIdle when ≤ 0), and whose mailboxes process up
// to throughput messages per turn (DefaultThroughput when ≤ 0). Workers exist only while
// there is work or for idle after it: a pool needs no Close.
func New(idle time.Duration, throughput, maxIdle int) *Pool {
	if idle <= 0 {
		idle = DefaultIdle
	}
	if throughput <= 0 {
		throughput = DefaultThroughput
	}
	if maxIdle <= 0 {
		maxIdle = DefaultMaxIdle
	}
	return &Pool{work: make(chan func()), idle: idle, throughput: throughput, maxIdle: int32(maxIdle)}
}

// Schedule runs fn on an idle worker, or on a new goroutine (which becomes a worker)
// when no worker is idle. It never blocks.
func (p *Pool) Schedule(fn func()) {
	select {
	case p.work <- fn: // an idle worker was waiting on the unbuffered channel
	default:
		go p.worker(fn)
	}
}

// Throughput is the number of messages a mailbox processes per turn.
func (p *Pool) Throughput() int { return p.throughput }

// worker runs fn, then takes further work until it has been idle for p.idle, or exits
// at once when p.maxIdle workers already wait.
func (p *Pool) worker(fn func()) {
	fn()
	var t *time.Timer
	for {
		if p.waiting.Add(1) > p.maxIdle {
			p.waiting.Add(-1)
			break
		}
		if t == nil {
			t = time.NewTimer(p.idle)
		} else {
			t.Reset(p.idle)
		}
		select {
		case fn := <-p.work:
			p.waiting.Add(-1)
			fn()
		case <-t.C:
			p.waiting.Add(-1)
			return
		}
	}
	if t != nil {
		t.Stop()
	}
}

// Shared is the pool Fathom's actors use: one per process, so workers warmed by one
// actor serve the next.
var Shared = New(DefaultIdle, DefaultThroughput, DefaultMaxIdle)

// Props returns the option that runs an actor's mailbox on Shared.
func Props() actor.PropsOption { return actor.WithDispatcher(Shared) }

// Calls is the pool Run uses: its workers run calls only, so their stacks are sized by
// the calls, not by the mailboxes (see the package comment).
var Calls = New(DefaultIdle, DefaultThroughput, DefaultMaxIdle)

// Run runs fn on a worker of Calls, a warm one when one is idle: for work that is not
// a mailbox but whose stack is as deep, the agents' LLM and tool calls (actors/agent),
// which would otherwise grow and copy a new goroutine's stack on every call. Like
// Schedule it never blocks, and fn never waits for a worker.
func Run(fn func()) { Calls.Schedule(fn) }
