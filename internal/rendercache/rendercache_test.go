package rendercache

import (
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
)

// TestGetRendersOnceForConcurrentCallers: callers of one key all get the one rendering.
func TestGetRendersOnceForConcurrentCallers(t *testing.T) {
	c := New[string, []byte](4)
	var renders atomic.Int32
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b, err := c.Get("k", func() ([]byte, error) { renders.Add(1); return []byte("frame"), nil })
			if err != nil || string(b) != "frame" {
				t.Errorf("Get = %q, %v", b, err)
			}
		}()
	}
	wg.Wait()
	if n := renders.Load(); n != 1 {
		t.Fatalf("rendered %d times, want once", n)
	}
}

// TestGetKeepsTheNewestKeys: past its size the cache forgets the oldest key (rendered
// again on its next use) and keeps the newer ones; an error is kept like a value.
func TestGetKeepsTheNewestKeys(t *testing.T) {
	c := New[int, string](2)
	var renders []int
	get := func(k int) string {
		v, _ := c.Get(k, func() (string, error) { renders = append(renders, k); return strconv.Itoa(k), nil })
		return v
	}
	for _, k := range []int{0, 1, 2, 1, 2, 0} {
		if v := get(k); v != strconv.Itoa(k) {
			t.Fatalf("Get(%d) = %q", k, v)
		}
	}
	if len(renders) != 4 || renders[3] != 0 {
		t.Fatalf("renders %v, want 0 1 2 then 0 again (evicted by 2)", renders)
	}
	boom := errors.New("boom")
	for range 2 {
		if _, err := c.Get(9, func() (string, error) { return "", boom }); !errors.Is(err, boom) {
			t.Fatalf("err %v", err)
		}
	}
}

// TestHitAllocatesNothing: a reader that finds its key rendered (every subscriber of an
// event but the first) allocates nothing, for a key of several fields too.
func TestHitAllocatesNothing(t *testing.T) {
	type key struct {
		stream string
		seq    uint64
		text   string
	}
	c := New[key, []byte](8)
	render := func() ([]byte, error) { return []byte("frame"), nil }
	stream := strconv.Itoa(42) // not a constant: a key made at run time
	if _, err := c.Get(key{stream, 1, "a"}, render); err != nil {
		t.Fatal(err)
	}
	var got []byte
	allocs := testing.AllocsPerRun(100, func() { got, _ = c.Get(key{stream, 1, "a"}, render) })
	if string(got) != "frame" || allocs != 0 {
		t.Fatalf("Get = %q with %.1f allocations per hit, want the frame and none", got, allocs)
	}
}

// BenchmarkGet: miss is a key rendered for the first time, evicting the oldest (a live
// stream's event taken by its first subscriber); hit is a rendered key taken by
// concurrent readers (the other subscribers of the event).
func BenchmarkGet(b *testing.B) {
	type key struct {
		stream string
		seq    uint64
	}
	render := func() ([]byte, error) { return nil, nil }
	stream := strconv.Itoa(42)
	b.Run("miss", func(b *testing.B) {
		c := New[key, []byte](4096)
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			_, _ = c.Get(key{stream, uint64(i)}, render)
		}
	})
	b.Run("hit", func(b *testing.B) {
		c := New[key, []byte](4096)
		for i := range 4096 {
			_, _ = c.Get(key{stream, uint64(i)}, render)
		}
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for i := 0; pb.Next(); i++ {
				_, _ = c.Get(key{stream, uint64(i % 64)}, render)
			}
		})
	})
}
