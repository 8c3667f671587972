package memory_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/fathom-agents/fathom/memory"
	"github.com/fathom-agents/fathom/memory/hashembed"
	"github.com/fathom-agents/fathom/persistence"
	"github.com/fathom-agents/fathom/persistence/vectormem"
)

// TestEmbedWorker: messages enqueued are embedded and searchable; the fact of message 10
// comes back for a question about it.
func TestEmbedWorker(t *testing.T) {
	store, err := vectormem.New(128)
	if err != nil {
		t.Fatal(err)
	}
	emb := hashembed.New(128)
	w, err := memory.NewEmbedWorker(memory.EmbedWorkerConfig{Embedder: emb, Store: store, BatchSize: 7})
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 100; i++ {
		text := fmt.Sprintf("step %d: routine progress report number %d", i, i)
		if i == 10 {
			text = "The staging database password is kept in vault under kv/staging-db"
		}
		if err := w.Enqueue(memory.EmbedJob{Stream: "sess", Seq: uint64(i), Text: text, Meta: map[string]string{"role": "user"}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := w.Enqueue(memory.EmbedJob{Stream: "sess", Seq: 101, Text: "late"}); !errors.Is(err, memory.ErrWorkerClosed) {
		t.Fatalf("enqueue after close: %v", err)
	}
	if err := w.Close(context.Background()); err != nil {
		t.Fatalf("second close: %v", err)
	}
	q, _ := emb.Embed(context.Background(), []string{"where is the staging database password?"})
	hits, err := store.Search(context.Background(), "default", "sess", q[0], 20)
	if err != nil || len(hits) != 20 {
		t.Fatalf("%v %d", err, len(hits))
	}
	if hits[0].Seq != 10 || hits[0].Meta["role"] != "user" {
		t.Fatalf("best hit %+v, want message 10", hits[0])
	}
}

type blockingEmbedder struct {
	dims    int
	started chan struct{}
	once    sync.Once
}

func (b *blockingEmbedder) Dimensions() int { return b.dims }
func (b *blockingEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	b.once.Do(func() { close(b.started) })
	<-ctx.Done()
	return nil, ctx.Err()
}

// TestEmbedWorkerBoundedAndCancellable: a stuck embedder fills the bounded queue
// (Enqueue never blocks) and Close with a deadline cancels it.
func TestEmbedWorkerBoundedAndCancellable(t *testing.T) {
	store, _ := vectormem.New(4)
	emb := &blockingEmbedder{dims: 4, started: make(chan struct{})}
	var mu sync.Mutex
	failed := 0
	w, err := memory.NewEmbedWorker(memory.EmbedWorkerConfig{Embedder: emb, Store: store, QueueSize: 3, BatchSize: 1, Timeout: time.Hour,
		OnError: func(jobs []memory.EmbedJob, err error) { mu.Lock(); failed += len(jobs); mu.Unlock() }})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Enqueue(memory.EmbedJob{Stream: "s", Seq: 1, Text: "a"}); err != nil {
		t.Fatal(err)
	}
	<-emb.started
	for i := 2; i <= 4; i++ {
		if err := w.Enqueue(memory.EmbedJob{Stream: "s", Seq: uint64(i), Text: "a"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Enqueue(memory.EmbedJob{Stream: "s", Seq: 5, Text: "a"}); !errors.Is(err, memory.ErrQueueFull) {
		t.Fatalf("full queue: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := w.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("close: %v", err)
	}
	if time.Since(start) > 5*time.Second {
		t.Fatal("close did not cancel the stuck embedder")
	}
	mu.Lock()
	defer mu.Unlock()
	if failed != 4 {
		t.Fatalf("%d jobs reported failed, want 4", failed)
	}
}

func TestEmbedWorkerConfig(t *testing.T) {
	store, _ := vectormem.New(4)
	if _, err := memory.NewEmbedWorker(memory.EmbedWorkerConfig{Embedder: hashembed.New(8), Store: store}); !errors.Is(err, memory.ErrInvalid) {
		t.Fatalf("dimension mismatch: %v", err)
	}
	if _, err := memory.NewEmbedWorker(memory.EmbedWorkerConfig{Store: store}); !errors.Is(err, memory.ErrInvalid) {
		t.Fatalf("no embedder: %v", err)
	}
}

// TestEmbedWorkerDropIsOrdered: a drop job removes its stream's vectors after the jobs
// queued before it and before the ones queued after it, and leaves other streams alone.
func TestEmbedWorkerDropIsOrdered(t *testing.T) {
	store, err := vectormem.New(32)
	if err != nil {
		t.Fatal(err)
	}
	emb := hashembed.New(32)
	w, err := memory.NewEmbedWorker(memory.EmbedWorkerConfig{Embedder: emb, Store: store, BatchSize: 8})
	if err != nil {
		t.Fatal(err)
	}
	jobs := []memory.EmbedJob{
		{Stream: "a", Seq: 1, Text: "first"}, {Stream: "b", Seq: 1, Text: "other stream"}, {Stream: "a", Seq: 2, Text: "second"},
		{Stream: "a", Drop: true},
		{Stream: "a", Seq: 3, Text: "after the drop"},
	}
	for _, j := range jobs {
		if err := w.Enqueue(j); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	seqs := func(stream string) []uint64 {
		q, _ := emb.Embed(context.Background(), []string{"anything"})
		hits, err := store.Search(context.Background(), "default", stream, q[0], 10)
		if err != nil {
			t.Fatal(err)
		}
		var out []uint64
		for _, h := range hits {
			out = append(out, h.Seq)
		}
		return out
	}
	if got := seqs("a"); len(got) != 1 || got[0] != 3 {
		t.Fatalf("stream a holds seqs %v, want only 3 (queued after the drop)", got)
	}
	if got := seqs("b"); len(got) != 1 {
		t.Fatalf("stream b holds seqs %v, want its one vector", got)
	}
}

// gatedEmbedder embeds with hashembed once its gate opens.
type gatedEmbedder struct {
	memory.Embedder
	gate chan struct{}
}

func (g gatedEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	select {
	case <-g.gate:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return g.Embedder.Embed(ctx, texts)
}

// TestEmbedWorkerDropStreamWaits: DropStream returns only once the stream's vectors are
// gone, including those of jobs queued (and not yet embedded) before it; a drop whose ctx
// ends first says so.
func TestEmbedWorkerDropStreamWaits(t *testing.T) {
	store, err := vectormem.New(32)
	if err != nil {
		t.Fatal(err)
	}
	emb := gatedEmbedder{Embedder: hashembed.New(32), gate: make(chan struct{})}
	w, err := memory.NewEmbedWorker(memory.EmbedWorkerConfig{Embedder: emb, Store: store, BatchSize: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close(context.Background())
	for i := 1; i <= 20; i++ {
		if err := w.Enqueue(memory.EmbedJob{Stream: "gone", Seq: uint64(i), Text: fmt.Sprintf("message %d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	short, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := w.DropStream(short, "default", "gone"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("drop behind a held embedder with a short ctx = %v, want its deadline", err)
	}
	close(emb.gate)
	if err := w.DropStream(context.Background(), "default", "gone"); err != nil {
		t.Fatal(err)
	}
	q, _ := emb.Embed(context.Background(), []string{"message"})
	if hits, err := store.Search(context.Background(), "default", "gone", q[0], 30); err != nil || len(hits) != 0 {
		t.Fatalf("after DropStream the stream holds %d vectors (%v), want none", len(hits), err)
	}
}

// recordingEmbedder embeds with hashembed once its gate opens (nil: at once) and
// records the texts it was asked to embed.
type recordingEmbedder struct {
	memory.Embedder
	gate chan struct{}

	mu    sync.Mutex
	texts []string
}

func (r *recordingEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	if r.gate != nil {
		select {
		case <-r.gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	r.mu.Lock()
	r.texts = append(r.texts, texts...)
	r.mu.Unlock()
	return r.Embedder.Embed(ctx, texts)
}

// embedded returns the texts embedded so far, sorted.
func (r *recordingEmbedder) embedded() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Sorted(slices.Values(r.texts))
}

// hiddenSeqs is a store that cannot tell its stored seqs (no persistence.VectorSeqs).
type hiddenSeqs struct{ persistence.VectorStore }

// brokenSeqs is a store whose StoredSeqs fails.
type brokenSeqs struct{ persistence.VectorStore }

func (brokenSeqs) StoredSeqs(context.Context, string, string, []uint64) ([]uint64, error) {
	return nil, errors.New("seqs unreadable")
}

// TestEmbedWorkerIfMissing: an IfMissing job is embedded only when the store holds no
// vector for its seq under its tenant and stream at the time its round runs: after a
// drop queued before it, and not twice in one round; a job without IfMissing is
// embedded as before. A store that cannot tell embeds IfMissing jobs as usual; one whose
// answer fails embeds none of them and reports them failed.
func TestEmbedWorkerIfMissing(t *testing.T) {
	ctx := context.Background()
	const dims = 32
	newStore := func(t *testing.T) *vectormem.Store {
		t.Helper()
		store, err := vectormem.New(dims)
		if err != nil {
			t.Fatal(err)
		}
		put := func(tenant, stream string, seqs ...uint64) {
			for _, seq := range seqs {
				text := fmt.Sprintf("stored %s %d", stream, seq)
				if err := store.Upsert(ctx, tenant, stream, []persistence.Vector{{Seq: seq, Values: hashembed.Vector(text, dims), Text: text}}); err != nil {
					t.Fatal(err)
				}
			}
		}
		put("default", "s", 1, 2, 3, 4, 5, 6, 7, 8, 9, 10)
		put("acme", "t", 5)
		put("default", "u", 1)
		return store
	}
	type result struct {
		embedded []string
		failed   int
	}
	// run queues jobs behind a first job that holds the worker until all are queued (so
	// that they most likely make one round: any split must give the same result) and
	// returns what was embedded and how many jobs failed.
	run := func(t *testing.T, store persistence.VectorStore, jobs []memory.EmbedJob) result {
		t.Helper()
		emb := &recordingEmbedder{Embedder: hashembed.New(dims), gate: make(chan struct{})}
		var mu sync.Mutex
		var r result
		w, err := memory.NewEmbedWorker(memory.EmbedWorkerConfig{Embedder: emb, Store: store, BatchSize: 64,
			OnError: func(jobs []memory.EmbedJob, err error) { mu.Lock(); r.failed += len(jobs); mu.Unlock() }})
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range append([]memory.EmbedJob{{Stream: "hold", Seq: 1, Text: "hold"}}, jobs...) {
			if err := w.Enqueue(j); err != nil {
				t.Fatal(err)
			}
		}
		close(emb.gate)
		if err := w.Close(ctx); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		defer mu.Unlock()
		r.embedded = emb.embedded()
		return r
	}
	missing := func(tenant, stream string, seq uint64) memory.EmbedJob {
		return memory.EmbedJob{Tenant: tenant, Stream: stream, Seq: seq, Text: fmt.Sprintf("%s %s %d", tenant, stream, seq), IfMissing: true}
	}
	var jobs []memory.EmbedJob
	for seq := uint64(1); seq <= 12; seq++ {
		jobs = append(jobs, missing("", "s", seq))
	}
	jobs = append(jobs,
		missing("", "s", 12), // already in the round
		memory.EmbedJob{Stream: "s", Seq: 3, Text: "plain s 3"},               // no IfMissing: embedded
		missing("acme", "t", 5), missing("acme", "t", 6), missing("", "t", 5), // tenants are apart
		memory.EmbedJob{Stream: "u", Drop: true}, missing("", "u", 1), // dropped before the round that asks
	)

	t.Run("stored", func(t *testing.T) {
		store := newStore(t)
		r := run(t, store, jobs)
		want := []string{" s 11", " s 12", " t 5", " u 1", "acme t 6", "hold", "plain s 3"}
		if !slices.Equal(r.embedded, want) || r.failed != 0 {
			t.Fatalf("embedded %q (%d failed), want %q", r.embedded, r.failed, want)
		}
		for _, c := range []struct {
			tenant, stream string
			want           []uint64
		}{
			{"default", "s", []uint64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}},
			{"acme", "t", []uint64{5, 6}},
			{"default", "t", []uint64{5}},
			{"default", "u", []uint64{1}},
		} {
			got, err := store.StoredSeqs(ctx, c.tenant, c.stream, nil)
			if err != nil || !slices.Equal(got, c.want) {
				t.Errorf("%s/%s stores %v (%v), want %v", c.tenant, c.stream, got, err, c.want)
			}
		}
	})
	t.Run("store cannot tell", func(t *testing.T) {
		r := run(t, hiddenSeqs{newStore(t)}, jobs)
		if len(r.embedded) != len(jobs) || r.failed != 0 { // every job but the drop, and hold
			t.Fatalf("embedded %d texts (%d failed), want %d", len(r.embedded), r.failed, len(jobs))
		}
	})
	t.Run("store fails to tell", func(t *testing.T) {
		r := run(t, brokenSeqs{newStore(t)}, jobs)
		want := []string{"hold", "plain s 3"}
		if !slices.Equal(r.embedded, want) || r.failed != len(jobs)-2 { // all but the plain job and the drop
			t.Fatalf("embedded %q (%d failed), want %q (%d failed)", r.embedded, r.failed, want, len(jobs)-2)
		}
	})
}

// waitStored polls store until tenant's stream holds exactly want.
func waitStored(t *testing.T, store persistence.VectorStore, tenant, stream string, want []uint64) {
	t.Helper()
	vs := store.(persistence.VectorSeqs)
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, err := vs.StoredSeqs(context.Background(), tenant, stream, nil)
		if err == nil && slices.Equal(got, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s/%s stored %v (%v), want %v", tenant, stream, got, err, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// seqsTo is 1..n.
func seqsTo(n uint64) []uint64 {
	out := make([]uint64, 0, n)
	for seq := uint64(1); seq <= n; seq++ {
		out = append(out, seq)
	}
	return out
}

// history is stream's messages 1..n as a catch-up hands them (IfMissing).
func history(stream string, n uint64) []memory.EmbedJob {
	var jobs []memory.EmbedJob
	for _, seq := range seqsTo(n) {
		jobs = append(jobs, memory.EmbedJob{Stream: stream, Seq: seq, Text: fmt.Sprintf("%s %d", stream, seq), IfMissing: true})
	}
	return jobs
}

// A history far longer than the queue is caught up, a batch at a time, embedding only
// what the store misses, and takes none of the queue's room meanwhile.
func TestEmbedWorkerCatchUpLongerThanTheQueue(t *testing.T) {
	ctx := context.Background()
	store, emb, w := gatedWorker(t, memory.EmbedWorkerConfig{QueueSize: 8, BatchSize: 4})
	for _, seq := range seqsTo(10) {
		if err := store.Upsert(ctx, "default", "s", []persistence.Vector{{Seq: seq, Values: hashembed.Vector("stored", store.Dimensions()), Text: "stored"}}); err != nil {
			t.Fatal(err)
		}
	}
	defer w.Close(ctx)
	if !w.CatchUp(history("s", 100)) {
		t.Fatal("CatchUp refused a history with none waiting")
	}
	// The queue is all the new messages' while the history waits.
	for _, seq := range seqsTo(4) {
		if err := w.Enqueue(memory.EmbedJob{Stream: "n", Seq: seq, Text: fmt.Sprintf("new %d", seq)}); err != nil {
			t.Fatalf("new message %d: %v", seq, err)
		}
	}
	close(emb.gate)
	waitStored(t, store, "default", "s", seqsTo(100))
	waitStored(t, store, "default", "n", seqsTo(4))
	if got := len(emb.embedded()); got != 94 {
		t.Fatalf("embedded %d texts, want 94: the 90 messages the store missed and the 4 new ones", got)
	}
}

// A drop of a stream forgets what of its history still waits: nothing of it is stored
// after the drop.
func TestEmbedWorkerCatchUpForgottenByADrop(t *testing.T) {
	ctx := context.Background()
	store, emb, w := gatedWorker(t, memory.EmbedWorkerConfig{QueueSize: 8, BatchSize: 2})
	defer w.Close(ctx)
	// The worker holds a queued job in the embedder while the history waits behind it.
	if err := w.Enqueue(memory.EmbedJob{Stream: "busy", Seq: 1, Text: "busy"}); err != nil {
		t.Fatal(err)
	}
	if !w.CatchUp(history("s", 40)) {
		t.Fatal("CatchUp refused a history with none waiting")
	}
	if err := w.Enqueue(memory.EmbedJob{Stream: "s", Drop: true}); err != nil {
		t.Fatal(err)
	}
	close(emb.gate)
	// Histories are taken in order: once the next one is stored, s's would have been.
	if !w.CatchUp(history("after", 1)) {
		t.Fatal("CatchUp refused a history")
	}
	waitStored(t, store, "default", "after", seqsTo(1))
	waitStored(t, store, "default", "s", nil)
}

// At most MaxCatchUps histories wait; none is taken after Close.
func TestEmbedWorkerCatchUpBounded(t *testing.T) {
	ctx := context.Background()
	_, emb, w := gatedWorker(t, memory.EmbedWorkerConfig{BatchSize: 1, MaxCatchUps: 2})
	// The worker takes one job of the first at most (the embedder holds it): two wait.
	if !w.CatchUp(history("a", 3)) || !w.CatchUp(history("b", 3)) {
		t.Fatal("CatchUp refused one of the first two histories")
	}
	if w.CatchUp(history("c", 3)) {
		t.Fatal("CatchUp took a third history with MaxCatchUps 2")
	}
	close(emb.gate)
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if w.CatchUp(history("d", 1)) {
		t.Fatal("CatchUp took a history after Close")
	}
}

// gatedWorker is a worker with cfg over a fresh in-process store of 32 dimensions, whose
// embedder (hashembed) waits for its gate to close.
func gatedWorker(t *testing.T, cfg memory.EmbedWorkerConfig) (*vectormem.Store, *recordingEmbedder, *memory.EmbedWorker) {
	t.Helper()
	const dims = 32
	store, err := vectormem.New(dims)
	if err != nil {
		t.Fatal(err)
	}
	emb := &recordingEmbedder{Embedder: hashembed.New(dims), gate: make(chan struct{})}
	cfg.Embedder, cfg.Store = emb, store
	w, err := memory.NewEmbedWorker(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return store, emb, w
}
