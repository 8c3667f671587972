//go:build !race

package persistence_test

// raceDetector: see race_on_test.go.
const raceDetector = false
