//go:build !amd64 || purego

package vectormem

// useAVX2 is false where dot_amd64.s is not built.
const useAVX2 = false

func dotAVX2(a, b []float32) float32 { return dotGo(a, b) }
