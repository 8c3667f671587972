package tools

import (
	"context"
	"sync"
	"time"
)

// MemoryWrite describes a long-term memory item a tool call saved or deleted
// (persistence/ltm). Tools report them with RecordMemory; the session records each as a
// memory_saved or memory_deleted event with the call's result.
type MemoryWrite struct {
	// ID identifies the item within its tenant and user.
	ID string
	// Tenant, User and Agent are the item's namespace.
	Tenant, User, Agent string
	// Text and Metadata are the saved item's (empty for a delete).
	Text     string
	Metadata map[string]string
	// CreatedAt, UpdatedAt and ExpiresAt are the saved item's times (ExpiresAt zero:
	// never).
	CreatedAt, UpdatedAt, ExpiresAt time.Time
	// Replaced is true when a save replaced an item of the same id.
	Replaced bool
	// Deleted is true for a delete.
	Deleted bool
}

type memoriesKey struct{}

// memoryLog collects the memory writes of one call.
type memoryLog struct {
	mu   sync.Mutex
	list []MemoryWrite
}

// RecordMemory reports a long-term memory write the running call made. Outside the
// executor (no call in ctx) it does nothing.
func RecordMemory(ctx context.Context, w MemoryWrite) {
	l, ok := ctx.Value(memoriesKey{}).(*memoryLog)
	if !ok {
		return
	}
	l.mu.Lock()
	l.list = append(l.list, w)
	l.mu.Unlock()
}

func (l *memoryLog) take() []MemoryWrite {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]MemoryWrite(nil), l.list...)
}
