package summarizer

import (
	"fmt"
	"slices"

	"github.com/asynkron/protoactor-go/actor"
)

// pool is the /summarizers actor: it owns the workers (supervising them one-for-one),
// keeps one job per session running, queues the rest and answers every request.
type pool struct {
	cfg      Config
	nextID   uint64
	stopping bool

	workers map[string]*actor.PID // by PID id
	idle    []*actor.PID

	running map[string]*job // session → job on a worker
	pending map[string]*job // session → newest request waiting for the running one
	waiting map[string]*job // session → job waiting for a free worker
	queue   []string        // sessions of waiting, oldest first
}

func newPool(cfg Config) *pool {
	return &pool{cfg: cfg, workers: map[string]*actor.PID{}, running: map[string]*job{},
		pending: map[string]*job{}, waiting: map[string]*job{}}
}

// Receive implements actor.Actor.
func (p *pool) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *actor.Started:
		p.onStarted(ctx)
	case *Request:
		p.onRequest(ctx, msg)
	case *jobDone:
		p.onJobDone(ctx, msg)
	case *workerReady:
		p.onWorkerReady(ctx, msg)
	case *actor.Terminated:
		p.onTerminated(ctx, msg)
	case *actor.Stopping:
		p.stopping = true
	case *actor.Stopped, *actor.Restarting:
	default:
		p.cfg.Logger.Warn("summarizer pool: unexpected message", "type", fmt.Sprintf("%T", msg))
	}
}

func (p *pool) onStarted(ctx actor.Context) {
	for i := 0; i < p.cfg.Workers; i++ {
		p.spawnWorker(ctx)
	}
}

func (p *pool) spawnWorker(ctx actor.Context) {
	pid := ctx.Spawn(actor.PropsFromProducer(func() actor.Actor { return newWorker(p.cfg) }))
	ctx.Watch(pid)
	p.workers[pid.Id] = pid
	p.idle = append(p.idle, pid)
}

func (p *pool) onRequest(ctx actor.Context, req *Request) {
	replyTo := req.ReplyTo
	if replyTo == nil {
		replyTo = ctx.Sender()
	}
	if replyTo == nil {
		p.cfg.Logger.Warn("summarizer: request with no sender and no ReplyTo dropped", "session_id", req.SessionID)
		return
	}
	if req.SessionID == "" || len(req.Input.Messages) == 0 {
		ctx.Send(replyTo, &Failure{SessionID: req.SessionID, Err: fmt.Errorf("%w: need a session id and messages", ErrInvalid)})
		return
	}
	p.nextID++
	j := &job{id: p.nextID, req: req, replyTo: replyTo}
	s := req.SessionID
	switch {
	case p.running[s] != nil:
		p.supersede(ctx, p.pending[s])
		p.pending[s] = j
	case p.waiting[s] != nil:
		p.supersede(ctx, p.waiting[s])
		p.waiting[s] = j
	case len(p.waiting) >= p.cfg.MaxQueued:
		ctx.Send(replyTo, &Failure{SessionID: s, Err: ErrOverloaded})
	default:
		p.waiting[s] = j
		p.queue = append(p.queue, s)
		p.dispatch(ctx)
	}
}

// supersede answers a replaced job.
func (p *pool) supersede(ctx actor.Context, j *job) {
	if j != nil {
		ctx.Send(j.replyTo, &Failure{SessionID: j.req.SessionID, Err: ErrSuperseded})
	}
}

// dispatch starts waiting jobs on idle workers, oldest first.
func (p *pool) dispatch(ctx actor.Context) {
	for len(p.idle) > 0 && len(p.queue) > 0 {
		s := p.queue[0]
		p.queue[0] = "" // the array keeps no dequeued id alive
		p.queue = p.queue[1:]
		j := p.waiting[s]
		delete(p.waiting, s)
		w := p.idle[len(p.idle)-1]
		p.idle = p.idle[:len(p.idle)-1]
		j.worker = w
		p.running[s] = j
		ctx.Send(w, &runJob{job: j})
	}
}

func (p *pool) onJobDone(ctx actor.Context, msg *jobDone) {
	j := p.running[msg.session]
	if j == nil || j.id != msg.id {
		return // already answered (its worker died)
	}
	delete(p.running, msg.session)
	if msg.res != nil {
		ctx.Send(j.replyTo, msg.res)
	} else {
		p.cfg.Logger.Warn("summary regeneration failed", "session_id", msg.session, "err", msg.err)
		ctx.Send(j.replyTo, &Failure{SessionID: msg.session, Through: msg.through, Err: msg.err})
	}
	if _, alive := p.workers[msg.worker.Id]; alive && !msg.stopping {
		p.idle = append(p.idle, msg.worker)
	}
	if next := p.pending[msg.session]; next != nil {
		delete(p.pending, msg.session)
		p.waiting[msg.session] = next
		p.queue = append(p.queue, msg.session)
	}
	p.dispatch(ctx)
}

// onWorkerReady takes a (re)started worker back: once, and only while it is one of the
// pool's and not running a job.
func (p *pool) onWorkerReady(ctx actor.Context, msg *workerReady) {
	id := msg.worker.GetId()
	if _, ok := p.workers[id]; !ok || slices.ContainsFunc(p.idle, func(w *actor.PID) bool { return w.Id == id }) {
		return
	}
	for _, j := range p.running {
		if j.worker != nil && j.worker.Id == id {
			return
		}
	}
	p.idle = append(p.idle, msg.worker)
	p.dispatch(ctx)
}

// onTerminated replaces a worker stopped by the supervisor (too many restarts): its job,
// if any, is failed, and a fresh worker takes its place.
func (p *pool) onTerminated(ctx actor.Context, msg *actor.Terminated) {
	id := msg.Who.GetId()
	if _, ok := p.workers[id]; !ok {
		return
	}
	delete(p.workers, id)
	for i, w := range p.idle {
		if w.Id == id {
			p.idle = append(p.idle[:i], p.idle[i+1:]...)
			break
		}
	}
	for s, j := range p.running {
		if j.worker != nil && j.worker.Id == id {
			ctx.Send(ctx.Self(), &jobDone{id: j.id, session: s, worker: msg.Who, err: fmt.Errorf("%w: worker stopped", ErrCrashed)})
		}
	}
	if p.stopping {
		return // the pool is stopping its workers
	}
	p.cfg.Logger.Error("summarizer worker stopped after repeated crashes; starting a fresh one", "worker", id)
	p.spawnWorker(ctx)
	p.dispatch(ctx)
}
