package persistence

import "context"

// AsyncIndexAppender is implemented by a store whose indexed appends can complete
// without a goroutine of the caller's waiting on the commit (the PostgreSQL journal: an
// append is queued to its group-commit goroutines, whose completion calls back). It is
// optional: AppendIndexedAsync (the function) runs any SessionIndex so, falling back to
// AppendIndexed on a goroutine of its own.
//
// A wrapper that must see every append (FormatGate) forwards it; a wrapper that does not
// implement it (journaltest.Faulty) makes its appends take the synchronous path, its
// own AppendIndexed, so whatever it injects still applies.
type AsyncIndexAppender interface {
	// AppendIndexedAsync starts SessionIndex.AppendIndexed(ctx, stream, expectedSeq,
	// recs, entry) and returns without waiting for it; done gets its outcome, exactly
	// once, on another goroutine (never on the caller's before AppendIndexedAsync
	// returned), and must not block: it runs on the store's own goroutines. The
	// guarantees are AppendIndexed's: done(last, nil) only once the append is durable.
	// When ctx ends before the outcome is known, done gets ctx.Err() promptly (the
	// append may still commit, as a cancelled AppendIndexed may have). recs and entry
	// must not be changed until done ran.
	AppendIndexedAsync(ctx context.Context, stream string, expectedSeq uint64, recs []Record, entry IndexEntry, done func(last uint64, err error))
}

// AppendIndexedAsync makes s.AppendIndexed(ctx, stream, expectedSeq, recs, entry) and
// calls done with its outcome, exactly once and never on the caller's goroutine before
// it returned (AsyncIndexAppender's contract): through s's AppendIndexedAsync when s
// implements AsyncIndexAppender, else by running AppendIndexed on a new goroutine.
func AppendIndexedAsync(ctx context.Context, s SessionIndex, stream string, expectedSeq uint64, recs []Record, entry IndexEntry, done func(last uint64, err error)) {
	if a, ok := s.(AsyncIndexAppender); ok {
		a.AppendIndexedAsync(ctx, stream, expectedSeq, recs, entry, done)
		return
	}
	appendIndexedOnGoroutine(ctx, s, stream, expectedSeq, recs, entry, done)
}

// appendIndexedOnGoroutine is AppendIndexedAsync's fallback, a function of its own so
// that only this path moves entry to the heap (its goroutine holds it).
func appendIndexedOnGoroutine(ctx context.Context, s SessionIndex, stream string, expectedSeq uint64, recs []Record, entry IndexEntry, done func(last uint64, err error)) {
	go func() { done(s.AppendIndexed(ctx, stream, expectedSeq, recs, entry)) }()
}
