//go:build race

package openai

// raceDetector is set in a test binary built with -race, where sync.Pool drops a share
// of what is put back (so pooled buffers are allocated again).
const raceDetector = true
