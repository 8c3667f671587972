package supervise

import (
	"testing"
	"time"
)

func TestBackoffDoublesUpToTheCap(t *testing.T) {
	s := &Backoff{Initial: 500 * time.Millisecond, Max: 30 * time.Second, Window: time.Minute}
	want := []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 30 * time.Second, 30 * time.Second}
	for i, w := range want {
		if got := s.Delay(i + 1); got != w {
			t.Errorf("failure %d: delay %s, want %s", i+1, got, w)
		}
	}
	if got := s.Delay(1000); got != 30*time.Second {
		t.Errorf("failure 1000: delay %s", got)
	}
}

func TestPrefixAndAny(t *testing.T) {
	if m := Prefix("conn-"); !m("conn-3") || m("token") {
		t.Fatal("Prefix(conn-) must match conn-3 and not token")
	}
	if !Any("whatever") {
		t.Fatal("Any must match every name")
	}
}
