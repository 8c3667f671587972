package summarizer_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/fathom-agents/fathom/actors/summarizer"
	"github.com/fathom-agents/fathom/internal/testenv"
	"github.com/fathom-agents/fathom/llm"
	"github.com/fathom-agents/fathom/memory"
)

// provider is a scripted llm.Provider: behave decides each call by its number (1-based).
type provider struct {
	calls  atomic.Int32
	mu     sync.Mutex
	reqs   []llm.Request
	behave func(ctx context.Context, n int, req llm.Request) (llm.Response, error)
}

func (p *provider) Name() string { return "test" }
func (p *provider) Chat(ctx context.Context, req llm.Request) (llm.Response, error) {
	n := int(p.calls.Add(1))
	p.mu.Lock()
	p.reqs = append(p.reqs, req)
	p.mu.Unlock()
	return p.behave(ctx, n, req)
}

func answer(s string) (llm.Response, error) {
	return llm.Response{Content: s, Model: "m", Usage: llm.Usage{InputTokens: 10, OutputTokens: 3}}, nil
}

func start(t *testing.T, cfg summarizer.Config) (*actor.ActorSystem, *actor.PID) {
	t.Helper()
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.DiscardHandler)
	}))
	pid, err := summarizer.Spawn(system.Root, "summarizers", cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = system.Root.StopFuture(pid).Wait()
		system.Shutdown()
	})
	return system, pid
}

func input(n int) memory.SummaryInput {
	ms := make([]memory.Message, n)
	for i := range ms {
		ms[i] = memory.Message{Seq: uint64(i + 1), Role: "user", Content: fmt.Sprintf("fact %d", i+1), Tokens: 6}
	}
	return memory.SummaryInput{Messages: ms}
}

// ask sends a request and returns a channel with its one answer.
func ask(system *actor.ActorSystem, pid *actor.PID, session string, in memory.SummaryInput) <-chan any {
	ch := make(chan any, 1)
	f := system.Root.RequestFuture(pid, &summarizer.Request{SessionID: session, Input: in}, 20*time.Second)
	go func() {
		res, err := f.Result()
		if err != nil {
			res = err
		}
		ch <- res
	}()
	return ch
}

func wait(t *testing.T, ch <-chan any) any {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(25 * time.Second):
		t.Fatal("no answer")
		return nil
	}
}

func TestResult(t *testing.T) {
	p := &provider{behave: func(_ context.Context, _ int, _ llm.Request) (llm.Response, error) {
		return answer("  The user listed facts 1 to 3.  ")
	}}
	system, pid := start(t, summarizer.Config{Provider: p})
	res, ok := wait(t, ask(system, pid, "s1", input(3))).(*summarizer.Result)
	if !ok {
		t.Fatalf("answer %T", res)
	}
	tok, _ := memory.GetTokenizer(memory.DefaultEncoding)
	if res.SessionID != "s1" || res.Content != "The user listed facts 1 to 3." || res.Through != 3 || res.From != 1 ||
		res.Tokens != tok.Count(res.Content) || res.Model != "m" {
		t.Fatalf("result %+v", res)
	}
	req := p.reqs[0]
	if !strings.HasPrefix(req.Messages[0].Content, "FATHOM-ROLE: summarizer") || !strings.Contains(req.Messages[0].Content, "2000 tokens") ||
		!strings.Contains(req.Messages[1].Content, "[#2 user]\nfact 2") || req.MaxTokens != 4000 {
		t.Fatalf("request %+v", req)
	}
}

// TestCrashRestartsWorker: a panicking provider crashes the worker; the supervisor
// restarts it (a SupervisorEvent), the job fails with ErrCrashed, and the next job on the
// same (only) worker succeeds.
func TestCrashRestartsWorker(t *testing.T) {
	p := &provider{behave: func(_ context.Context, n int, _ llm.Request) (llm.Response, error) {
		if n == 1 {
			panic("provider bug")
		}
		return answer("fine")
	}}
	system, pid := start(t, summarizer.Config{Provider: p, Workers: 1})
	restarts := make(chan *actor.SupervisorEvent, 4)
	sub := system.EventStream.Subscribe(func(evt any) {
		if e, ok := evt.(*actor.SupervisorEvent); ok {
			restarts <- e
		}
	})
	defer system.EventStream.Unsubscribe(sub)

	f, ok := wait(t, ask(system, pid, "s1", input(2))).(*summarizer.Failure)
	if !ok || !errors.Is(f.Err, summarizer.ErrCrashed) || !strings.Contains(f.Err.Error(), "provider bug") || f.Through != 2 {
		t.Fatalf("crashed job: %+v", f)
	}
	select {
	case e := <-restarts:
		if e.Directive != actor.RestartDirective {
			t.Fatalf("directive %v", e.Directive)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no SupervisorEvent for the crash")
	}
	if res, ok := wait(t, ask(system, pid, "s1", input(4))).(*summarizer.Result); !ok || res.Content != "fine" || res.Through != 4 {
		t.Fatalf("job after restart: %#v", res)
	}
}

// TestOneJobPerSessionCoalesced: while a session's job runs, a second request waits and
// a third replaces it (ErrSuperseded); other sessions are not blocked by the slow one.
func TestOneJobPerSessionCoalesced(t *testing.T) {
	release := make(chan struct{})
	var running atomic.Int32
	var maxRunning atomic.Int32
	p := &provider{behave: func(ctx context.Context, _ int, req llm.Request) (llm.Response, error) {
		if strings.Contains(req.Messages[1].Content, "slow") {
			if n := running.Add(1); n > maxRunning.Load() {
				maxRunning.Store(n)
			}
			defer running.Add(-1)
			<-release
		}
		return answer("ok")
	}}
	system, pid := start(t, summarizer.Config{Provider: p, Workers: 2})
	slow := input(1)
	slow.Messages[0].Content = "slow"
	first := ask(system, pid, "s", slow)
	testenv.Eventually(t, 10*time.Second, func() bool { return p.calls.Load() > 0 }, "the first job to reach the model")
	// Sends from one goroutine reach the pool's mailbox in order: second is queued before third.
	second := ask(system, pid, "s", slow)
	third := ask(system, pid, "s", input(5))
	if f, ok := wait(t, second).(*summarizer.Failure); !ok || !errors.Is(f.Err, summarizer.ErrSuperseded) {
		t.Fatalf("second: %+v", f)
	}
	// Another session runs on the other worker meanwhile.
	if res, ok := wait(t, ask(system, pid, "other", input(2))).(*summarizer.Result); !ok || res.SessionID != "other" {
		t.Fatalf("other session blocked: %+v", res)
	}
	if p.calls.Load() != 2 {
		t.Fatalf("%d calls while s runs, want 2 (first + other)", p.calls.Load())
	}
	close(release)
	if res, ok := wait(t, first).(*summarizer.Result); !ok || res.Through != 1 {
		t.Fatalf("first: %+v", res)
	}
	if res, ok := wait(t, third).(*summarizer.Result); !ok || res.Through != 5 {
		t.Fatalf("third: %+v", res)
	}
	if maxRunning.Load() != 1 {
		t.Fatalf("%d jobs of one session ran at once", maxRunning.Load())
	}
}

// TestSlowModelTimesOut: a model that ignores its deadline fails the job with ErrTimeout
// and frees the worker for the next job.
func TestSlowModelTimesOut(t *testing.T) {
	hang := make(chan struct{})
	defer close(hang)
	p := &provider{behave: func(ctx context.Context, n int, _ llm.Request) (llm.Response, error) {
		switch n {
		case 1: // honours ctx
			<-ctx.Done()
			return llm.Response{}, ctx.Err()
		case 2: // ignores ctx
			<-hang
			return llm.Response{}, nil
		}
		return answer("back")
	}}
	system, pid := start(t, summarizer.Config{Provider: p, Workers: 1, Timeout: 100 * time.Millisecond})
	for i := 0; i < 2; i++ {
		if f, ok := wait(t, ask(system, pid, "s", input(1))).(*summarizer.Failure); !ok || !errors.Is(f.Err, summarizer.ErrTimeout) {
			t.Fatalf("call %d: %+v", i+1, f)
		}
	}
	if res, ok := wait(t, ask(system, pid, "s", input(1))).(*summarizer.Result); !ok || res.Content != "back" {
		t.Fatalf("after timeouts: %+v", res)
	}
}

func TestFailures(t *testing.T) {
	block := make(chan struct{})
	p := &provider{behave: func(_ context.Context, n int, req llm.Request) (llm.Response, error) {
		switch {
		case strings.Contains(req.Messages[1].Content, "block"):
			<-block
			return answer("x")
		case strings.Contains(req.Messages[1].Content, "empty"):
			return answer("  ")
		}
		return llm.Response{}, &llm.APIError{StatusCode: 503, Message: "down"}
	}}
	system, pid := start(t, summarizer.Config{Provider: p, Workers: 1, MaxQueued: 1})
	var apiErr *llm.APIError
	if f, ok := wait(t, ask(system, pid, "s", input(1))).(*summarizer.Failure); !ok || !errors.As(f.Err, &apiErr) || !llm.IsRetryable(f.Err) {
		t.Fatalf("API error: %+v", f)
	}
	empty := input(1)
	empty.Messages[0].Content = "empty"
	if f, ok := wait(t, ask(system, pid, "s", empty)).(*summarizer.Failure); !ok || !errors.Is(f.Err, summarizer.ErrEmpty) {
		t.Fatalf("empty: %+v", f)
	}
	if f, ok := wait(t, ask(system, pid, "s", memory.SummaryInput{})).(*summarizer.Failure); !ok || !errors.Is(f.Err, summarizer.ErrInvalid) {
		t.Fatalf("no messages: %+v", f)
	}
	blocked := input(1)
	blocked.Messages[0].Content = "block"
	a := ask(system, pid, "a", blocked)
	testenv.Eventually(t, 10*time.Second, func() bool { return p.calls.Load() >= 3 }, "the blocking job to reach the model")
	b := ask(system, pid, "b", input(1)) // waits for the one worker; queued before c (one sender, one mailbox)
	if f, ok := wait(t, ask(system, pid, "c", input(1))).(*summarizer.Failure); !ok || !errors.Is(f.Err, summarizer.ErrOverloaded) {
		t.Fatalf("overloaded: %+v", f)
	}
	close(block)
	wait(t, a)
	wait(t, b)
	if _, err := summarizer.Props(summarizer.Config{}); err == nil {
		t.Fatal("config without provider accepted")
	}
}

// TestWorkerReplacedAfterRestartLimit: past MaxRestarts the supervisor stops the worker;
// the pool starts a fresh one and keeps serving.
func TestWorkerReplacedAfterRestartLimit(t *testing.T) {
	p := &provider{behave: func(_ context.Context, n int, _ llm.Request) (llm.Response, error) {
		if n <= 3 {
			panic(fmt.Sprintf("bug %d", n))
		}
		return answer("recovered")
	}}
	system, pid := start(t, summarizer.Config{Provider: p, Workers: 1, MaxRestarts: 1})
	for i := 0; i < 3; i++ {
		if f, ok := wait(t, ask(system, pid, "s", input(1))).(*summarizer.Failure); !ok || !errors.Is(f.Err, summarizer.ErrCrashed) {
			t.Fatalf("crash %d: %+v", i+1, f)
		}
	}
	if res, ok := wait(t, ask(system, pid, "s", input(1))).(*summarizer.Result); !ok || res.Content != "recovered" {
		t.Fatalf("after the worker was replaced: %+v", res)
	}
}
