package tools_test

import (
	"context"
	"testing"

	"github.com/fathom-agents/fathom/tools"
)

// TestRegistryVersionMovesWithItsTools: Version changes when a tool is registered,
// replaced or removed, and not when nothing changed.
func TestRegistryVersionMovesWithItsTools(t *testing.T) {
	mk := func(name string) tools.Tool {
		return tools.MustNew(name, "d", tools.SandboxNone, func(context.Context, struct{}) (any, error) { return nil, nil })
	}
	reg, err := tools.NewRegistry(mk("a"))
	if err != nil {
		t.Fatal(err)
	}
	v := reg.Version()
	steps := []struct {
		what    string
		do      func()
		changes bool
	}{
		{"register b", func() { _ = reg.Register(mk("b")) }, true},
		{"register b again (refused)", func() { _ = reg.Register(mk("b")) }, false},
		{"replace b", func() { _ = reg.Replace(mk("b")) }, true},
		{"unregister b", func() { reg.Unregister("b") }, true},
		{"unregister b again", func() { reg.Unregister("b") }, false},
	}
	for _, s := range steps {
		s.do()
		if now := reg.Version(); (now != v) != s.changes {
			t.Fatalf("%s: version %d -> %d (changes: %v)", s.what, v, now, s.changes)
		}
		v = reg.Version()
	}
}
