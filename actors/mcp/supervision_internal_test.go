package mcp

import (
	"testing"
	"time"
)

func TestBackoffDoublesUpToTheCap(t *testing.T) {
	s := &backoffStrategy{initial: 500 * time.Millisecond, max: 30 * time.Second, window: time.Minute}
	want := []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 30 * time.Second, 30 * time.Second}
	for i, w := range want {
		if got := s.delay(i + 1); got != w {
			t.Errorf("failure %d: delay %s, want %s", i+1, got, w)
		}
	}
	if got := s.delay(1000); got != 30*time.Second {
		t.Errorf("failure 1000: delay %s", got)
	}
}
