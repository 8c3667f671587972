package memory

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/fathom-agents/fathom/auth"
	"github.com/fathom-agents/fathom/persistence"
)

// Embedder turns texts into vectors. Implementations are safe for concurrent use and
// honour ctx. memory/hashembed is the deterministic local default; memory/openaiembed
// calls an OpenAI-compatible POST /embeddings.
type Embedder interface {
	// Embed returns one vector of length Dimensions() per text, in order.
	Embed(ctx context.Context, texts []string) ([][]float32, error)
	// Dimensions is the length of every vector.
	Dimensions() int
}

// Errors of the EmbedWorker.
var (
	// ErrQueueFull means Enqueue found the worker's queue full: the job was not taken.
	ErrQueueFull = errors.New("memory: embedding queue full")
	// ErrWorkerClosed means Enqueue was called after Close.
	ErrWorkerClosed = errors.New("memory: embedding worker closed")
)

// EmbedJob asks for one recorded message to be embedded and stored.
type EmbedJob struct {
	// Tenant is the session's tenant, under which the store keeps the stream's vectors
	// ("" means auth.DefaultTenant).
	Tenant string
	// Stream is the vector store stream (the session id).
	Stream string
	// Seq is the message's sequence number.
	Seq uint64
	// Text is what to embed (the message content); it is also indexed for text search
	// (persistence.Vector.Text).
	Text string
	// Meta is stored with the vector.
	Meta map[string]string
	// Drop, instead of embedding, removes the stream's vectors from the store, after
	// every job queued before it (a session passivating from an in-process store drops
	// its vectors; its next activation re-embeds them, queued after the drop).
	Drop bool
	// IfMissing skips the job when the store already holds a vector for its seq: the
	// worker asks a store that can tell (persistence.VectorSeqs), once per stream for
	// the jobs it embeds together, right before embedding them (after every job queued
	// before them), and also skips a job whose seq an earlier job of the same round
	// embeds. A store that cannot tell embeds the job as usual; one whose answer fails
	// fails the stream's IfMissing jobs of the round (OnError) rather than embedding
	// them blind. For handing a history again without paying to embed it again (a
	// session activated over a durable store, whose earlier jobs may have been lost).
	IfMissing bool

	done chan error // DropStream's wait: the drop's result, buffered
}

// EmbedWorkerConfig configures an EmbedWorker.
type EmbedWorkerConfig struct {
	// Embedder makes the vectors (required).
	Embedder Embedder
	// Store keeps them (required); its dimension must be the embedder's.
	Store persistence.VectorStore
	// QueueSize bounds the jobs waiting. Default 4,096.
	QueueSize int
	// BatchSize is the most texts sent to the embedder in one call. Default 32.
	BatchSize int
	// Timeout bounds one embed+store round. Default 30 s.
	Timeout time.Duration
	// MaxCatchUps bounds the histories waiting to be caught up (CatchUp). Default 64.
	MaxCatchUps int
	// OnError, when set, is called (on the worker's goroutine) with the jobs of a failed
	// round. Failed jobs are dropped: a message without a vector is only absent from
	// semantic retrieval.
	OnError func(jobs []EmbedJob, err error)
	// Logger logs failed rounds; nil discards.
	Logger *slog.Logger
}

// EmbedWorker embeds recorded messages in the background and stores their vectors: the
// session records a message, calls Enqueue (which never blocks) and moves on. One owned
// goroutine drains the bounded queue in batches; Close stops it.
type EmbedWorker struct {
	cfg    EmbedWorkerConfig
	jobs   chan EmbedJob
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}

	mu     sync.RWMutex
	closed bool
	once   sync.Once

	// catchUps are the histories handed with CatchUp, not yet taken (cmu held); wake
	// tells an idle worker that one came.
	cmu      sync.Mutex
	catchUps [][]EmbedJob
	wake     chan struct{}
}

// NewEmbedWorker validates cfg and starts the worker's goroutine.
func NewEmbedWorker(cfg EmbedWorkerConfig) (*EmbedWorker, error) {
	if cfg.Embedder == nil || cfg.Store == nil {
		return nil, fmt.Errorf("%w: embed worker needs an embedder and a store", ErrInvalid)
	}
	if cfg.Embedder.Dimensions() != cfg.Store.Dimensions() {
		return nil, fmt.Errorf("%w: embedder makes %d dimensions, store keeps %d", ErrInvalid, cfg.Embedder.Dimensions(), cfg.Store.Dimensions())
	}
	if cfg.QueueSize <= 0 {
		cfg.QueueSize = 4096
	}
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = 32
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 30 * time.Second
	}
	if cfg.MaxCatchUps <= 0 {
		cfg.MaxCatchUps = 64
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	w := &EmbedWorker{cfg: cfg, jobs: make(chan EmbedJob, cfg.QueueSize), ctx: ctx, cancel: cancel, done: make(chan struct{}),
		wake: make(chan struct{}, 1)}
	go w.run()
	return w, nil
}

// Enqueue hands a job to the worker without blocking. It returns ErrQueueFull when the
// queue is full and ErrWorkerClosed after Close.
func (w *EmbedWorker) Enqueue(job EmbedJob) error { return w.send(context.Background(), job, false) }

// CatchUp hands a session's history again (its messages as IfMissing jobs of one
// stream, which skip what the store holds) without taking any of the queue's room: the
// worker takes it BatchSize jobs at a time, and only when no queued job waits, so that many
// activations at once (a node's restart) never crowd out the messages sessions are
// recording, and a history of any length is caught up. At most MaxCatchUps histories
// wait so: CatchUp returns false when that many already wait, or after Close (the
// caller hands the history again at the session's next activation). A drop of the
// stream (DropStream, a Drop job) forgets what of its history still waits; Close
// finishes the waiting histories after the queued jobs, as long as its ctx allows.
func (w *EmbedWorker) CatchUp(jobs []EmbedJob) bool {
	if len(jobs) == 0 {
		return true
	}
	w.mu.RLock()
	defer w.mu.RUnlock()
	if w.closed {
		return false
	}
	w.cmu.Lock()
	defer w.cmu.Unlock()
	if len(w.catchUps) >= w.cfg.MaxCatchUps {
		return false
	}
	w.catchUps = append(w.catchUps, jobs)
	select {
	case w.wake <- struct{}{}:
	default:
	}
	return true
}

// finishCatchUps runs what of the histories still waits once the queue is closed and
// empty, until the worker is cancelled (Close's ctx ended): then it drops the rest.
func (w *EmbedWorker) finishCatchUps() {
	for {
		h := w.takeCatchUp(w.cfg.BatchSize)
		if len(h) == 0 {
			return
		}
		if w.ctx.Err() != nil {
			w.cmu.Lock()
			n := len(h)
			for _, rest := range w.catchUps {
				n += len(rest)
			}
			w.catchUps = nil
			w.cmu.Unlock()
			w.cfg.Logger.Warn("history catch-up abandoned at close", "jobs", n)
			return
		}
		w.process(h)
	}
}

// takeCatchUp returns up to n jobs of the oldest waiting history, or none.
func (w *EmbedWorker) takeCatchUp(n int) []EmbedJob {
	w.cmu.Lock()
	defer w.cmu.Unlock()
	if len(w.catchUps) == 0 {
		return nil
	}
	h := w.catchUps[0]
	n = min(n, len(h))
	if n == len(h) {
		w.catchUps[0] = nil
		w.catchUps = w.catchUps[1:]
	} else {
		w.catchUps[0] = h[n:]
	}
	return h[:n:n]
}

// forgetCatchUps drops what of the stream's histories still waits (a drop of it was
// queued: what comes after must not store its vectors again).
func (w *EmbedWorker) forgetCatchUps(k streamKey) {
	w.cmu.Lock()
	defer w.cmu.Unlock()
	w.catchUps = slices.DeleteFunc(w.catchUps, func(h []EmbedJob) bool { return streamKey{h[0].tenant(), h[0].Stream} == k })
}

// DropStream removes tenant's stream's vectors from the store after every job queued
// before it, and waits for the removal: a deleted session's vectors do not come back
// from embedding jobs that were still queued when it was deleted. It blocks (unlike
// Enqueue) until the queue has room or ctx ends.
func (w *EmbedWorker) DropStream(ctx context.Context, tenant, stream string) error {
	job := EmbedJob{Tenant: tenant, Stream: stream, Drop: true, done: make(chan error, 1)}
	if err := w.send(ctx, job, true); err != nil {
		return fmt.Errorf("drop vectors of %s: %w", stream, err)
	}
	select {
	case err := <-job.done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("drop vectors of %s: %w", stream, ctx.Err())
	}
}

// send hands job to the worker: at once or ErrQueueFull unless block, else waiting for
// room until wait ends (with its error).
func (w *EmbedWorker) send(wait context.Context, job EmbedJob, block bool) error {
	w.mu.RLock()
	defer w.mu.RUnlock()
	if w.closed {
		return ErrWorkerClosed
	}
	if job.Drop {
		// Before the drop is queued: the worker takes a waiting history only when the
		// queue is empty, so nothing of it is taken after the drop.
		w.forgetCatchUps(streamKey{job.tenant(), job.Stream})
	}
	if !block {
		select {
		case w.jobs <- job:
			return nil
		default:
			return ErrQueueFull
		}
	}
	select {
	case w.jobs <- job:
		return nil
	case <-wait.Done():
		return wait.Err()
	}
}

// Close stops taking jobs, lets the worker finish the queued ones until ctx ends, then
// cancels what is in flight and waits for the goroutine to exit. It returns ctx's error
// when jobs were abandoned. Calling Close again waits for the same shutdown.
func (w *EmbedWorker) Close(ctx context.Context) error {
	w.once.Do(func() {
		w.mu.Lock()
		w.closed = true
		close(w.jobs)
		w.mu.Unlock()
	})
	select {
	case <-w.done:
		return nil
	case <-ctx.Done():
		w.cancel()
		<-w.done
		return fmt.Errorf("close embed worker: %w", ctx.Err())
	}
}

// run drains the queue in batches until it is closed and empty, or cancelled; when no
// job is queued, it takes a batch of a waiting history (CatchUp).
func (w *EmbedWorker) run() {
	defer close(w.done)
	defer w.cancel()
	batch := make([]EmbedJob, 0, w.cfg.BatchSize)
	for {
		var job EmbedJob
		var ok bool
		select {
		case job, ok = <-w.jobs:
		default:
			if h := w.takeCatchUp(w.cfg.BatchSize); len(h) > 0 {
				w.process(h)
				continue
			}
			select {
			case job, ok = <-w.jobs:
			case <-w.wake:
				continue
			}
		}
		if !ok {
			w.finishCatchUps()
			return
		}
		batch = append(batch[:0], job)
	fill:
		for len(batch) < w.cfg.BatchSize {
			select {
			case j, ok := <-w.jobs:
				if !ok {
					break fill
				}
				batch = append(batch, j)
			default:
				break fill
			}
		}
		if w.ctx.Err() != nil {
			w.fail(batch, w.ctx.Err())
			for _, j := range batch {
				if j.done != nil { // a drop cancelled before it ran
					j.done <- w.ctx.Err()
				}
			}
			continue
		}
		w.process(batch)
	}
}

// process runs one batch in order: runs of embedding jobs are embedded and stored
// together, a drop job deletes its stream's vectors after the jobs before it.
func (w *EmbedWorker) process(batch []EmbedJob) {
	for len(batch) > 0 {
		i := 0
		for i < len(batch) && !batch[i].Drop {
			i++
		}
		if i > 0 {
			w.embed(batch[:i])
		}
		if i < len(batch) {
			w.drop(batch[i])
			i++
		}
		batch = batch[i:]
	}
}

// drop deletes job's stream's vectors.
func (w *EmbedWorker) drop(job EmbedJob) {
	ctx, cancel := context.WithTimeout(w.ctx, w.cfg.Timeout)
	defer cancel()
	err := w.cfg.Store.DeleteStream(ctx, job.tenant(), job.Stream)
	if err != nil {
		err = fmt.Errorf("drop vectors: %w", err)
		w.fail([]EmbedJob{job}, err)
	}
	if job.done != nil {
		job.done <- err
	}
}

// streamKey names a tenant's stream.
type streamKey struct{ tenant, stream string }

// embed embeds and stores jobs (none a drop), but for the IfMissing ones already stored
// (missing).
func (w *EmbedWorker) embed(batch []EmbedJob) {
	ctx, cancel := context.WithTimeout(w.ctx, w.cfg.Timeout)
	defer cancel()
	if batch = w.missing(ctx, batch); len(batch) == 0 {
		return
	}
	texts := make([]string, len(batch))
	for i, j := range batch {
		texts[i] = j.Text
	}
	vecs, err := w.cfg.Embedder.Embed(ctx, texts)
	if err == nil && len(vecs) != len(batch) {
		err = fmt.Errorf("embedder returned %d vectors for %d texts", len(vecs), len(batch))
	}
	if err != nil {
		w.fail(batch, fmt.Errorf("embed: %w", err))
		return
	}
	// Group by tenant and stream, keeping order: one Upsert per stream.
	byStream := map[streamKey][]persistence.Vector{}
	var order []streamKey
	for i, j := range batch {
		k := streamKey{j.tenant(), j.Stream}
		if _, ok := byStream[k]; !ok {
			order = append(order, k)
		}
		byStream[k] = append(byStream[k], persistence.Vector{Seq: j.Seq, Values: vecs[i], Meta: j.Meta, Text: j.Text})
	}
	for _, k := range order {
		if err := w.cfg.Store.Upsert(ctx, k.tenant, k.stream, byStream[k]); err != nil {
			var failed []EmbedJob
			for _, j := range batch {
				if (streamKey{j.tenant(), j.Stream}) == k {
					failed = append(failed, j)
				}
			}
			w.fail(failed, fmt.Errorf("store vectors: %w", err))
		}
	}
}

// missing returns batch (embedding jobs, in order) without its IfMissing jobs whose seq
// the store holds, or an earlier job of batch embeds: it asks the store
// (persistence.VectorSeqs) once per stream that has IfMissing jobs, for their seqs. The
// IfMissing jobs of a stream whose stored seqs cannot be read fail. batch is returned
// as is when it has no IfMissing job or the store cannot tell.
func (w *EmbedWorker) missing(ctx context.Context, batch []EmbedJob) []EmbedJob {
	vs, ok := w.cfg.Store.(persistence.VectorSeqs)
	if !ok {
		return batch
	}
	among := map[streamKey][]uint64{}
	var order []streamKey
	for _, j := range batch {
		if !j.IfMissing {
			continue
		}
		k := streamKey{j.tenant(), j.Stream}
		if _, ok := among[k]; !ok {
			order = append(order, k)
		}
		among[k] = append(among[k], j.Seq)
	}
	if len(order) == 0 {
		return batch
	}
	type seqKey struct {
		streamKey
		seq uint64
	}
	// skip holds the seqs not to embed again: stored ones, then those of kept jobs.
	skip := map[seqKey]bool{}
	failed := map[streamKey]bool{}
	for _, k := range order {
		seqs, err := vs.StoredSeqs(ctx, k.tenant, k.stream, among[k])
		if err != nil {
			failed[k] = true
			var jobs []EmbedJob
			for _, j := range batch {
				if j.IfMissing && (streamKey{j.tenant(), j.Stream}) == k {
					jobs = append(jobs, j)
				}
			}
			w.fail(jobs, fmt.Errorf("read stored seqs: %w", err))
			continue
		}
		for _, seq := range seqs {
			skip[seqKey{k, seq}] = true
		}
	}
	out := make([]EmbedJob, 0, len(batch))
	for _, j := range batch {
		sk := seqKey{streamKey{j.tenant(), j.Stream}, j.Seq}
		if j.IfMissing && (failed[sk.streamKey] || skip[sk]) {
			continue
		}
		skip[sk] = true
		out = append(out, j)
	}
	return out
}

// tenant is the job's tenant, auth.DefaultTenant when it names none.
func (j EmbedJob) tenant() string {
	if j.Tenant == "" {
		return auth.DefaultTenant
	}
	return j.Tenant
}

func (w *EmbedWorker) fail(jobs []EmbedJob, err error) {
	w.cfg.Logger.Warn("embedding failed", "jobs", len(jobs), "stream", jobs[0].Stream, "err", err)
	if w.cfg.OnError != nil {
		w.cfg.OnError(append([]EmbedJob(nil), jobs...), err)
	}
}
