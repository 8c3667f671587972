package wire

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/fathom-agents/fathom/llm"
)

// TestMemoIsBounded: a memo keeps at most two generations of its limit, finds what it
// keeps only for an equal part, and keeps a part found in the older generation.
func TestMemoIsBounded(t *testing.T) {
	const limit = 1000
	m := MessageMemo[string](limit, false)
	put := func(i int) llm.Message {
		msg := llm.Message{Role: "user", Content: fmt.Sprintf("message %03d %s", i, strings.Repeat("x", 50))}
		m.Put(m.Sum(&msg), &msg, "enc "+msg.Content, 50)
		return msg
	}
	first := put(0)
	for i := 1; i < 1000; i++ {
		put(i)
		if i%7 == 0 { // the first message recurs: it stays
			if enc, ok := m.Get(m.Sum(&first), &first); !ok || enc != "enc "+first.Content {
				t.Fatalf("after %d puts: the recurring message is gone (%q, %v)", i, enc, ok)
			}
		}
	}
	if n := m.Len(); n > 2*limit/100 {
		t.Fatalf("the memo keeps %d parts of ~100 bytes with a limit of %d bytes per generation", n, limit)
	}
	old := llm.Message{Role: "user", Content: fmt.Sprintf("message %03d %s", 1, strings.Repeat("x", 50))}
	if _, ok := m.Get(m.Sum(&old), &old); ok {
		t.Fatal("an early message outlived two generations")
	}
	other := first
	other.ToolCallID = "c1"
	if _, ok := m.Get(m.Sum(&first), &other); ok {
		t.Fatal("a different message was found under an equal one's hash")
	}
	big := llm.Message{Role: "user", Content: strings.Repeat("y", limit)}
	m.Put(m.Sum(&big), &big, "enc", 3)
	if _, ok := m.Get(m.Sum(&big), &big); ok {
		t.Fatal("a part larger than a generation was kept")
	}
}

// TestMemoConcurrentUse: calls from many sessions use one client's memo at once, with
// every part admitted and with parts admitted on their second sighting and held
// before.
func TestMemoConcurrentUse(t *testing.T) {
	for _, m := range []*Memo[llm.Message, string]{
		MessageMemo[string](4000, false),
		MessageMemo[string](4000, false).AdmitOnSecondSighting(64).HoldFirstSightings(1000),
	} {
		var wg sync.WaitGroup
		for g := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range 500 {
					msg := llm.Message{Role: "tool", ToolCallID: fmt.Sprint(g), Content: fmt.Sprintf("result %d", i%50),
						ToolCalls: []llm.ToolCall{{ID: "c", Name: "n", Arguments: "{}"}}}
					sum := m.Sum(&msg)
					if enc, ok := m.Get(sum, &msg); ok && enc != msg.ToolCallID+msg.Content {
						t.Errorf("message %q found as %q", msg.Content, enc)
						return
					}
					m.Put(sum, &msg, msg.ToolCallID+msg.Content, len(msg.Content))
				}
			}()
		}
		wg.Wait()
		if m.Len() == 0 {
			t.Fatal("the memo keeps nothing of parts put again and again")
		}
	}
}

// TestAdmitOnSecondSightingIsBounded: a memo that admits on the second sighting keeps a
// part put twice, not a part put once, and remembers at most two generations of sums
// put once: a part put again after that many others counts as new.
func TestAdmitOnSecondSightingIsBounded(t *testing.T) {
	const n = 8
	m := MessageMemo[string](1<<20, false).AdmitOnSecondSighting(n)
	msg := func(i int) llm.Message { return llm.Message{Role: "user", Content: fmt.Sprint("m", i)} }
	put := func(i int) {
		p := msg(i)
		m.Put(m.Sum(&p), &p, "enc", 3)
	}
	kept := func(i int) bool {
		p := msg(i)
		_, ok := m.Get(m.Sum(&p), &p)
		return ok
	}
	put(0)
	if kept(0) {
		t.Fatal("a part put once is kept")
	}
	put(0)
	if !kept(0) {
		t.Fatal("a part put twice is not kept")
	}
	for i := 1; i <= 3*n; i++ {
		put(i)
	}
	if m.Len() != 1 {
		t.Fatalf("the memo keeps %d parts, want only the one put twice", m.Len())
	}
	m.mu.Lock()
	seen := len(m.seenCur) + len(m.seenOld)
	m.mu.Unlock()
	if seen > 2*n {
		t.Fatalf("the memo remembers %d sums, want at most %d", seen, 2*n)
	}
	put(1) // forgotten: 3n sums were put after it
	if kept(1) {
		t.Fatal("a part put again after more than two generations of others is kept")
	}
	put(3 * n) // remembered
	if !kept(3 * n) {
		t.Fatal("a part put again right after is not kept")
	}
}

// TestHeldFirstSightings: a memo that holds first sightings finds a part put once when
// it is asked for again soon after, and keeps it from then on; it holds at most two
// generations of its hold limit, so a part put once and not asked for again is gone
// after that many bytes of others.
func TestHeldFirstSightings(t *testing.T) {
	const hold = 1000
	m := MessageMemo[string](1<<20, false).AdmitOnSecondSighting(1 << 10).HoldFirstSightings(hold)
	msg := func(i int) llm.Message {
		return llm.Message{Role: "user", Content: fmt.Sprintf("m%03d %s", i, strings.Repeat("x", 45))}
	}
	put := func(i int) {
		p := msg(i)
		m.Put(m.Sum(&p), &p, fmt.Sprint("enc", i), 3)
	}
	get := func(i int) (string, bool) {
		p := msg(i)
		return m.Get(m.Sum(&p), &p)
	}
	put(0)
	if m.Len() != 0 {
		t.Fatalf("a part put once is kept: the memo keeps %d", m.Len())
	}
	if enc, ok := get(0); !ok || enc != "enc0" {
		t.Fatalf("a part put once and asked for again is not found: %q, %v", enc, ok)
	}
	if m.Len() != 1 || m.held.Len() != 0 {
		t.Fatalf("a part found held is not kept: the memo keeps %d, holds %d", m.Len(), m.held.Len())
	}
	other := msg(0)
	other.ToolCallID = "c1"
	if _, ok := m.Get(m.Sum(&other), &other); ok {
		t.Fatal("a different part was found")
	}
	put(1)
	for i := 2; i < 100; i++ { // 98 parts of ~55 bytes: over five generations of the hold
		put(i)
	}
	if _, ok := get(1); ok {
		t.Fatal("a part put once is held after two generations of others")
	}
	if n := m.held.Len(); n > 2*hold/50 {
		t.Fatalf("the memo holds %d parts of ~55 bytes with a hold of %d bytes per generation", n, hold)
	}
	if _, ok := get(99); !ok {
		t.Fatal("the newest part put once is not held")
	}
	if _, ok := get(0); !ok || m.Len() != 2 {
		t.Fatalf("the memo lost a kept part to held ones, or did not keep one found held: it keeps %d", m.Len())
	}
}
