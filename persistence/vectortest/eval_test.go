package vectortest_test

import (
	"maps"
	"strings"
	"testing"

	"github.com/fathom-agents/fathom/persistence/vectortest"
)

// TestHalves: the evaluation set's halves split its facts evenly, every domain's and
// every kind's, and each fact's queries (of every session) fall in one half.
func TestHalves(t *testing.T) {
	set, err := vectortest.LoadEval()
	if err != nil {
		t.Fatal(err)
	}
	tune, held := set.Halves()
	if len(tune.Queries)+len(held.Queries) != len(set.Queries) || len(tune.Queries) != len(held.Queries) {
		t.Fatalf("halves of %d and %d queries from %d", len(tune.Queries), len(held.Queries), len(set.Queries))
	}
	count := func(qs []vectortest.EvalQuery) map[string]int {
		n := map[string]int{}
		for _, q := range qs {
			d, _, _ := strings.Cut(q.Session, "-")
			n[d]++
			n[q.Kind]++
		}
		return n
	}
	if a, b := count(tune.Queries), count(held.Queries); len(a) != 7 || !maps.Equal(a, b) {
		t.Fatalf("unbalanced halves: %v and %v", a, b)
	}
	// A paraphrase (a fact's key across sessions) is asked in one half only.
	inTune := map[string]bool{}
	for _, q := range tune.Queries {
		inTune[q.Query] = true
	}
	for _, q := range held.Queries {
		if q.Kind == "paraphrase" && inTune[q.Query] {
			t.Fatalf("%q is in both halves", q.Query)
		}
	}
}
