package vectormem_test

import (
	"math/rand"
	"testing"

	"github.com/fathom-agents/fathom/persistence/vectormem"
	"github.com/fathom-agents/fathom/persistence/vectortest"
)

// sum adds up data with the same unrolling as Dot: the memory-bandwidth baseline of a
// scan (one load per float, nothing else).
func sum(data []float32) float32 {
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+8 <= len(data); i += 8 {
		d := data[i : i+8 : i+8]
		s0 += d[0] + d[4]
		s1 += d[1] + d[5]
		s2 += d[2] + d[6]
		s3 += d[3] + d[7]
	}
	for ; i < len(data); i++ {
		s0 += data[i]
	}
	return (s0 + s1) + (s2 + s3)
}

var sink float32

// BenchmarkTopK: exact top-10 over 10,000 × 1,536 float32 (61 MB, more than any cache)
// against summing the same slice, in one run: the scan should be within 2× of the
// bandwidth baseline. MB/s is over the matrix.
func BenchmarkTopK(b *testing.B) {
	const n, dims, k = 10000, 1536, 10
	r := rand.New(rand.NewSource(5))
	vecs := vectortest.RandomUnit(r, n, dims)
	data := make([]float32, 0, n*dims)
	for _, v := range vecs {
		data = append(data, v...)
	}
	q := vectortest.RandomUnit(r, 1, dims)[0]
	b.Run("exact-top10", func(b *testing.B) {
		b.SetBytes(int64(len(data) * 4))
		b.ReportAllocs()
		for b.Loop() {
			if hits := vectormem.TopK(data, dims, q, k); len(hits) != k {
				b.Fatal(len(hits))
			}
		}
	})
	b.Run("baseline=sum", func(b *testing.B) {
		b.SetBytes(int64(len(data) * 4))
		for b.Loop() {
			sink += sum(data)
		}
	})
}
