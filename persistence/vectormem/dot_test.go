package vectormem

import (
	"math"
	"math/rand"
	"testing"
)

// TestDotMatchesGo checks the assembly dot product against dotGo at every length up to
// 100 (all the tails of the 32-, 8- and 1-wide loops), at 1,536 and on slices that
// start off the 32-byte alignment, with b longer than a.
func TestDotMatchesGo(t *testing.T) {
	if !useAVX2 {
		t.Skip("no AVX2+FMA on this CPU (or purego): Dot is dotGo")
	}
	r := rand.New(rand.NewSource(1))
	buf := make([]float32, 2*1600)
	for i := range buf {
		buf[i] = r.Float32()*2 - 1
	}
	lengths := []int{1536}
	for n := 0; n <= 100; n++ {
		lengths = append(lengths, n)
	}
	for _, n := range lengths {
		for _, off := range []int{0, 1, 3} {
			a, b := buf[off:off+n], buf[1600+off:1600+off+n+5]
			want := float64(dotGo(a, b))
			got := float64(Dot(a, b))
			if tol := 1e-5 * math.Max(1, float64(n)); math.Abs(got-want) > tol {
				t.Fatalf("len %d offset %d: Dot = %v, dotGo = %v", n, off, got, want)
			}
		}
	}
}
