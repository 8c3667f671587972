package llm_test

import (
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
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

// TestCostOfPricesCachedAndReasoningTokens: cache reads cost the cached rate, cache
// writes the write rate, reasoning tokens are output tokens.
func TestCostOfPricesCachedAndReasoningTokens(t *testing.T) {
	p := llm.DefaultPrices()
	cases := []struct {
		model string
		u     llm.Usage
		want  float64
	}{
		// gpt-4o-mini: 0.15 in, 0.075 cached, 0.60 out.
		{"gpt-4o-mini", llm.Usage{InputTokens: 2_000_000, CachedInputTokens: 1_000_000, OutputTokens: 1_000_000, ReasoningTokens: 500_000}, 0.15 + 0.075 + 0.60},
		// claude-sonnet-4-6: 3 in, 0.30 read, 3.75 write, 15 out.
		{"claude-sonnet-4-6", llm.Usage{InputTokens: 3_000_000, CachedInputTokens: 1_000_000, CacheWriteInputTokens: 1_000_000}, 3 + 0.30 + 3.75},
		// no cached rate known: cached tokens at the input rate.
		{"my-model", llm.Usage{InputTokens: 1_000_000, CachedInputTokens: 1_000_000}, 1},
		{"unknown", llm.Usage{InputTokens: 1_000_000}, 0},
	}
	p["my-model"] = llm.Price{InputPerMTok: 1, OutputPerMTok: 2}
	for _, c := range cases {
		if got := p.CostOf(c.model, c.u); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("CostOf(%s, %+v) = %v, want %v", c.model, c.u, got, c.want)
		}
	}
	withCache := llm.Usage{InputTokens: 1_000_000, CachedInputTokens: 900_000}
	if p.CostOf("gpt-5", withCache) >= p.CostOf("gpt-5", llm.Usage{InputTokens: 1_000_000}) {
		t.Error("cached tokens are not cheaper")
	}
}

// TestPricerWarnsOncePerModel: a model without a price is logged once, however many
// calls it makes.
func TestPricerWarnsOncePerModel(t *testing.T) {
	var buf strings.Builder
	var mu sync.Mutex
	log := slog.New(slog.NewTextHandler(lockedWriter{&mu, &buf}, nil))
	pr := llm.NewPricer(llm.DefaultPrices(), log)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pr.Cost("brand-new-model", llm.Usage{InputTokens: 10})
			pr.Cost("gpt-4o", llm.Usage{InputTokens: 10})
		}()
	}
	wg.Wait()
	pr.Cost("other-new-model", llm.Usage{InputTokens: 10})
	mu.Lock()
	out := buf.String()
	mu.Unlock()
	if n := strings.Count(out, "model=brand-new-model"); n != 1 {
		t.Fatalf("warned %d times for brand-new-model:\n%s", n, out)
	}
	if !strings.Contains(out, "model=other-new-model") || strings.Contains(out, "model=gpt-4o") || !strings.Contains(out, "--prices") {
		t.Fatalf("warnings:\n%s", out)
	}
	if got := pr.Cost("gpt-4o", llm.Usage{InputTokens: 1_000_000}); got != 2.5 {
		t.Fatalf("priced model cost %v", got)
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
