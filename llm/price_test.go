package llm_test

import (
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/fathom-agents/fathom/llm"
)

func TestPriceTable(t *testing.T) {
	p := llm.DefaultPrices()
	cases := []struct {
		model   string
		in, out uint64
		want    float64
	}{
		{"gpt-4o-mini", 1_000_000, 1_000_000, 0.75},
		{"gpt-4o-mini-2024-07-18", 2_000_000, 0, 0.30}, // dated variant: prefix match
		{"gpt-4o-2024-08-06", 0, 100_000, 1.00},
		{"unknown-model", 1_000_000, 1_000_000, 0},
		{"gpt-4oo", 1_000_000, 0, 0}, // a prefix must be followed by "-"
	}
	for _, c := range cases {
		if got := p.Cost(c.model, c.in, c.out); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("Cost(%s, %d, %d) = %v, want %v", c.model, c.in, c.out, got, c.want)
		}
	}
}

func TestLoadPriceTable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "prices.json")
	if err := os.WriteFile(path, []byte(`{"my-model":{"input_per_mtok":1,"output_per_mtok":2},"gpt-4o":{"input_per_mtok":0,"output_per_mtok":0}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := llm.LoadPriceTable(path, llm.DefaultPrices())
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Cost("my-model", 1_000_000, 1_000_000); got != 3 {
		t.Fatalf("my-model cost %v", got)
	}
	if got := p.Cost("gpt-4o", 1_000_000, 0); got != 0 {
		t.Fatalf("overridden gpt-4o cost %v", got)
	}
	if got := p.Cost("gpt-4o-mini", 1_000_000, 0); got != 0.15 {
		t.Fatalf("base table lost: gpt-4o-mini cost %v", got)
	}
	for _, bad := range []string{`{"m":{"input_per_mtok":-1}}`, `[1,2]`, `{`} {
		if _, err := llm.ParsePriceTable([]byte(bad)); err == nil {
			t.Errorf("ParsePriceTable(%s) accepted", bad)
		}
	}
	if _, err := llm.LoadPriceTable(filepath.Join(t.TempDir(), "missing.json"), nil); err == nil {
		t.Error("missing file accepted")
	}
}
