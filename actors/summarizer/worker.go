package summarizer

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/fathom-agents/fathom/llm"
	"github.com/fathom-agents/fathom/memory"
	"github.com/fathom-agents/fathom/prompts"
)

// worker is one Summarizer: it runs one job at a time. The LLM call runs on a goroutine
// owned by the job (cancelled when the job ends or the worker stops), so the mailbox
// stays free; the call's outcome comes back as a callDone, its panic as a callPanicked,
// which the worker re-raises so that supervision sees the crash.
type worker struct {
	cfg Config

	job     *job
	through uint64 // the running job's covered-through seq
	from    uint64 // the running job's oldest verbatim seq
	cancel  context.CancelFunc
	timer   *time.Timer
	crash   error
	// stopping is set once the worker is being restarted or stopped.
	stopping bool
}

// callDone carries the call's outcome from the goroutine to the worker's mailbox.
type callDone struct {
	id   uint64
	resp llm.Response
	err  error
}

// callPanicked carries a provider panic to the worker's mailbox.
type callPanicked struct {
	id    uint64
	value any
}

// jobTimeout fires when a job outlives Config.Timeout (plus a grace period), in case the
// provider ignores its context.
type jobTimeout struct{ id uint64 }

func newWorker(cfg Config) *worker { return &worker{cfg: cfg} }

// Receive implements actor.Actor.
func (w *worker) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *actor.Started:
		// Also after a restart: the pool takes the worker back only now (a worker that
		// the supervisor stops for good never gets here again).
		ctx.Send(ctx.Parent(), &workerReady{worker: ctx.Self()})
	case *runJob:
		w.onRunJob(ctx, msg)
	case *callDone:
		w.onCallDone(ctx, msg)
	case *callPanicked:
		w.onCallPanicked(msg)
	case *jobTimeout:
		w.onJobTimeout(ctx, msg)
	case *actor.Restarting, *actor.Stopping:
		w.stopping = true
		w.onStopping(ctx)
	case *actor.Stopped:
	default:
		w.cfg.Logger.Warn("summarizer worker: unexpected message", "type", fmt.Sprintf("%T", msg))
	}
}

func (w *worker) onRunJob(ctx actor.Context, msg *runJob) {
	j := msg.job
	w.job = j
	sys, err := w.cfg.Prompts.Render(prompts.Summarizer, prompts.SummarizerData{
		TargetTokens: w.cfg.Summary.TargetTokens, TargetWords: w.cfg.Summary.TargetTokens * 3 / 4})
	if err != nil {
		w.finish(ctx, nil, err)
		return
	}
	in := j.req.Input
	// Elided messages are counted with the session's tokenizer (else the pool's).
	tok := w.cfg.Tokenizer
	if j.req.Tokenizer != nil {
		tok = j.req.Tokenizer
	}
	if in.Counter == nil && tok != nil {
		in.Counter = tok
	}
	call, err := memory.Summarize(in, sys, w.cfg.Summary)
	if err != nil {
		w.finish(ctx, nil, fmt.Errorf("%w: %w", ErrInvalid, err))
		return
	}
	w.through = call.Through
	cctx, cancel := context.WithTimeout(context.Background(), w.cfg.Timeout)
	w.cancel = cancel
	self, root, provider, id := ctx.Self(), ctx.ActorSystem().Root, w.cfg.Provider, j.id
	go func() {
		defer func() {
			if v := recover(); v != nil {
				root.Send(self, &callPanicked{id: id, value: v})
			}
		}()
		resp, err := provider.Chat(cctx, call.Request)
		root.Send(self, &callDone{id: id, resp: resp, err: err})
	}()
	w.timer = time.AfterFunc(w.cfg.Timeout+time.Second, func() { root.Send(self, &jobTimeout{id: id}) })
	w.from = call.From
}

func (w *worker) onCallDone(ctx actor.Context, msg *callDone) {
	if w.job == nil || w.job.id != msg.id {
		return // a late answer of a job already timed out
	}
	if msg.err != nil {
		err := fmt.Errorf("summarize: %w", msg.err)
		if errors.Is(msg.err, context.DeadlineExceeded) {
			err = fmt.Errorf("%w after %v: %w", ErrTimeout, w.cfg.Timeout, msg.err)
		}
		w.finish(ctx, nil, err)
		return
	}
	content := strings.TrimSpace(msg.resp.Content)
	if content == "" {
		w.finish(ctx, nil, ErrEmpty)
		return
	}
	tok := w.cfg.Tokenizer
	if t := w.job.req.Tokenizer; t != nil {
		tok = t
	}
	w.finish(ctx, &Result{
		SessionID: w.job.req.SessionID, Content: content, Through: w.through, From: w.from,
		Tokens: tok.Count(content), Model: msg.resp.Model, Usage: msg.resp.Usage, Duration: msg.resp.Duration,
	}, nil)
}

// onCallPanicked re-raises the provider's panic inside the actor: the supervisor
// restarts the worker and onStopping answers the job.
func (w *worker) onCallPanicked(msg *callPanicked) {
	if w.job == nil || w.job.id != msg.id {
		return
	}
	w.crash = fmt.Errorf("%w: provider panicked: %v", ErrCrashed, msg.value)
	panic(w.crash)
}

func (w *worker) onJobTimeout(ctx actor.Context, msg *jobTimeout) {
	if w.job == nil || w.job.id != msg.id {
		return
	}
	w.finish(ctx, nil, fmt.Errorf("%w after %v (the provider ignored its deadline)", ErrTimeout, w.cfg.Timeout))
}

// onStopping answers the job of a worker being restarted or stopped.
func (w *worker) onStopping(ctx actor.Context) {
	if w.job == nil {
		return
	}
	err := w.crash
	if err == nil {
		err = fmt.Errorf("%w: worker stopped", ErrCrashed)
	}
	w.finish(ctx, nil, err)
}

// finish reports the job to the pool and frees the worker.
func (w *worker) finish(ctx actor.Context, res *Result, err error) {
	j := w.job
	if w.cancel != nil {
		w.cancel()
	}
	if w.timer != nil {
		w.timer.Stop()
	}
	w.job, w.cancel, w.timer, w.crash = nil, nil, nil, nil
	ctx.Send(ctx.Parent(), &jobDone{id: j.id, session: j.req.SessionID, worker: ctx.Self(), res: res, err: err, through: w.through, stopping: w.stopping})
}
