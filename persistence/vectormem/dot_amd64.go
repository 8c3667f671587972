//go:build amd64 && !purego

package vectormem

import "golang.org/x/sys/cpu"

// useAVX2 says dotAVX2 may run on this CPU.
var useAVX2 = cpu.X86.HasAVX2 && cpu.X86.HasFMA

// dotAVX2 is Dot with AVX2 and FMA (dot_amd64.s). len(b) must be at least len(a).
//
//go:noescape
func dotAVX2(a, b []float32) float32
