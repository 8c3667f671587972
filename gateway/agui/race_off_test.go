//go:build !race

package agui

// raceDetector is set in a test binary built with -race, where sync.Pool drops a share
// of what is put back (encoding/json's encoder state is then allocated again).
const raceDetector = false
