//go:build race

package fathomtest_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/fathom-agents/fathom/internal/fathomtest"
)

// fatalTB records a Fatalf and unwinds with errFatal instead of ending the test.
type fatalTB struct {
	testing.TB
	msg string
}

var errFatal = errors.New("fatal")

func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	panic(errFatal)
}

// TestSecondLiveNodeRefusedUnderRace: under -race, Start refuses a second node while one
// is live in the process, naming the way out, and starts one again once the first is
// closed, by the test or at its end.
func TestSecondLiveNodeRefusedUnderRace(t *testing.T) {
	t.Run("one live", func(t *testing.T) {
		fathomtest.StartNode(t, fathomtest.Options{})
		ft := &fatalTB{TB: t}
		func() {
			defer func() {
				if r := recover(); r != errFatal {
					panic(r)
				}
			}()
			fathomtest.StartNode(ft, fathomtest.Options{})
		}()
		if !strings.Contains(ft.msg, "second live node") || !strings.Contains(ft.msg, "_norace_test.go") {
			t.Fatalf("a second live node under -race: %q, want it refused naming *_norace_test.go", ft.msg)
		}
	})
	t.Run("closed by the test", func(t *testing.T) {
		n := fathomtest.StartNode(t, fathomtest.Options{})
		if err := n.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		fathomtest.StartNode(t, fathomtest.Options{}) // the first one is closed: allowed
	})
}
