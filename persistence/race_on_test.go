//go:build race

package persistence_test

// raceDetector: sync.Pool drops a share of what is put back under the race detector, so
// allocation counts that rely on a pool hold only without it.
const raceDetector = true
