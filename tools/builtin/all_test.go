package builtin_test

import (
	"slices"
	"testing"

	"github.com/fathom-agents/fathom/persistence/artifact/local"
	"github.com/fathom-agents/fathom/tools"
	"github.com/fathom-agents/fathom/tools/builtin"
)

// TestBuiltinToolsAreListedOnce: Names (what a configuration file's agents may name) is
// exactly the tools of a node with an artifact store; long-term memory adds its three
// (given by an agent's memory setting, not named); a node without an artifact store
// offers the list less the artifact tools.
func TestBuiltinToolsAreListedOnce(t *testing.T) {
	store, err := local.Open(t.TempDir(), local.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	names := func(opts builtin.Options) []string {
		reg, err := builtin.Registry(opts)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, tl := range reg.Tools() {
			out = append(out, tl.Name())
		}
		slices.Sort(out)
		return out
	}
	want := []string{"ask_human", "code_execute", "list_artifacts", "read_artifact", "web_search", "write_artifact", "write_todos"}
	if got := builtin.Names(); !slices.Equal(got, want) {
		t.Fatalf("Names() = %v, want %v", got, want)
	}
	if got := names(builtin.Options{Artifacts: store}); !slices.Equal(got, builtin.Names()) {
		t.Fatalf("a node with an artifact store offers %v, Names() %v", got, builtin.Names())
	}
	withMemory := append(builtin.Names(), "forget", "recall", "remember")
	slices.Sort(withMemory)
	if got := names(builtin.Options{Artifacts: store, Memory: &builtin.MemoryTools{}}); !slices.Equal(got, withMemory) {
		t.Fatalf("a node with long-term memory offers %v, want %v", got, withMemory)
	}
	if got := names(builtin.Options{}); !slices.Equal(got, []string{"ask_human", "code_execute", "web_search", "write_todos"}) {
		t.Fatalf("a node without an artifact store offers %v", got)
	}
}

// TestOnlyReadingToolsDeclareNoEffects: the built-ins that only read or change only the
// session's own state declare tools.NoEffects (their calls may start before they are
// durable); every tool with an effect outside the session (code, files written, a human
// asked, the web, long-term memory written) does not.
func TestOnlyReadingToolsDeclareNoEffects(t *testing.T) {
	store, err := local.Open(t.TempDir(), local.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	reg, err := builtin.Registry(builtin.Options{Artifacts: store, Memory: &builtin.MemoryTools{}})
	if err != nil {
		t.Fatal(err)
	}
	var none []string
	for _, tl := range reg.Tools() {
		if tools.HasNoEffects(tl) {
			none = append(none, tl.Name())
		}
	}
	slices.Sort(none)
	if want := []string{"list_artifacts", "read_artifact", "recall", "write_todos"}; !slices.Equal(none, want) {
		t.Fatalf("tools declaring no effects: %v, want %v", none, want)
	}
}
