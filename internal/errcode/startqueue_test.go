package errcode_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/fathom-agents/fathom/internal/errcode"
	"github.com/fathom-agents/fathom/internal/testenv"
	"github.com/fathom-agents/fathom/messages"
	"github.com/fathom-agents/fathom/messages/sessiongrain"
)

// tenantSlots plays a tenant's max_running_sessions as the session grains answer it: a
// start over the limit is refused with RESOURCE_EXHAUSTED and the tenant's queue time.
type tenantSlots struct {
	mu    sync.Mutex
	free  int
	tries map[string]int
}

func (s *tenantSlots) start(name string) func() error {
	return func() error {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.tries[name]++
		if s.free > 0 {
			s.free--
			return nil
		}
		e := sessiongrain.ErrResourceExhausted("tenant t runs its max_running_sessions")
		e.Metadata = map[string]string{messages.StartQueueKey: "60000"}
		return e
	}
}

func (s *tenantSlots) tried(name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tries[name]
}

func (s *tenantSlots) open() {
	s.mu.Lock()
	s.free++
	s.mu.Unlock()
}

// TestStartQueueLaterStartsWaitBehindTheFirst: a start of a tenant whose queue is not
// empty joins its end without being tried (it cannot take a slot the first start is
// waiting for); when the first start's caller gives up, the next is tried at once and
// gets the slot; a start that finds the queue full is refused at once.
func TestStartQueueLaterStartsWaitBehindTheFirst(t *testing.T) {
	q := errcode.NewStartQueue(nil)
	s := &tenantSlots{tries: map[string]int{}}
	ctx1, cancel1 := context.WithCancel(context.Background())
	defer cancel1()
	done := map[string]chan error{"first": make(chan error, 1), "second": make(chan error, 1)}
	go func() { done["first"] <- q.Wait(ctx1, "t", s.start("first")) }()
	testenv.Eventually(t, 10*time.Second, func() bool { return q.Len("t") == 1 }, "the first start is not queued")
	go func() { done["second"] <- q.Wait(context.Background(), "t", s.start("second")) }()
	testenv.Eventually(t, 10*time.Second, func() bool { return q.Len("t") == 2 }, "the second start is not queued")
	testenv.Eventually(t, 10*time.Second, func() bool { return s.tried("first") >= 2 }, "the first start is not tried again")
	if n := s.tried("second"); n != 0 {
		t.Fatalf("the second start was tried %d times while the first waits", n)
	}

	cancel1() // the first start's client is gone
	if err := <-done["first"]; errcode.Of(err) != errcode.ResourceExhausted {
		t.Fatalf("the abandoned start: %v, want its refusal", err)
	}
	tries := s.tried("first")
	s.open()
	if err := <-done["second"]; err != nil {
		t.Fatalf("the second start: %v", err)
	}
	if s.tried("first") != tries || q.Len("t") != 0 {
		t.Fatalf("after the second start went through: the abandoned start was tried %d more times, %d wait", s.tried("first")-tries, q.Len("t"))
	}
}

// TestStartQueueIsBounded: a tenant's queue holds MaxStartWaiters starts; one more is
// answered with the refusal at once, without being tried.
func TestStartQueueIsBounded(t *testing.T) {
	q := errcode.NewStartQueue(nil)
	s := &tenantSlots{tries: map[string]int{}}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
	}()
	for range errcode.MaxStartWaiters {
		wg.Go(func() {
			_ = q.Wait(ctx, "t", s.start("waiter"))
		})
	}
	testenv.Eventually(t, 10*time.Second, func() bool { return q.Len("t") == errcode.MaxStartWaiters }, "the queue never filled")
	err := q.Wait(context.Background(), "t", s.start("one-more"))
	var ge interface{ GetMetadata() map[string]string }
	if errcode.Of(err) != errcode.ResourceExhausted || !errors.As(err, &ge) || s.tried("one-more") != 0 {
		t.Fatalf("a start past the bound: %v after %d tries, want the refusal at once", err, s.tried("one-more"))
	}
}
