//go:build race

package fathomtest

// raceDetector is set in a binary built with -race.
const raceDetector = true
