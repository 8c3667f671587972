package testenv

import (
	"bytes"
	"sync"
)

// Buffer is a bytes.Buffer safe for concurrent writers and readers: the sink of a logger
// that actors and servers write to from their own goroutines while a test reads it.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (l *Buffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns everything written so far.
func (l *Buffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
