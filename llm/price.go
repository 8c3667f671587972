package llm

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
)

// Price is what a model costs, in US dollars per million tokens.
type Price struct {
	// InputPerMTok is the price of one million prompt tokens.
	InputPerMTok float64 `json:"input_per_mtok"`
	// OutputPerMTok is the price of one million completion tokens (reasoning included).
	OutputPerMTok float64 `json:"output_per_mtok"`
	// CachedInputPerMTok is the price of one million prompt tokens read from the
	// provider's cache; 0 means InputPerMTok (no discount known).
	CachedInputPerMTok float64 `json:"cached_input_per_mtok,omitempty"`
	// CacheWritePerMTok is the price of one million prompt tokens written to the cache
	// (Anthropic's 5-minute cache writes); 0 means InputPerMTok.
	CacheWritePerMTok float64 `json:"cache_write_per_mtok,omitempty"`
}

// PriceTable maps model names to prices. A model matches its exact name or, failing
// that, the longest name that is a prefix of it followed by "-" (so "gpt-4o-mini"
// prices "gpt-4o-mini-2024-07-18"). Models without a price cost 0.
type PriceTable map[string]Price

// anthropicPrice is a Claude price: cache reads cost a tenth of the input price,
// 5-minute cache writes 1.25 times it.
func anthropicPrice(in, out float64) Price {
	return Price{InputPerMTok: in, OutputPerMTok: out, CachedInputPerMTok: in / 10, CacheWritePerMTok: in * 1.25}
}

// DefaultPrices are list prices of common models (USD per million tokens, as published
// by their providers; checked 2026-11). Models released later, and any price that
// changed, go in a price file (--prices, LoadPriceTable), which needs no release.
func DefaultPrices() PriceTable {
	return PriceTable{
		"gpt-5.1":      {InputPerMTok: 1.25, OutputPerMTok: 10.00, CachedInputPerMTok: 0.125},
		"gpt-5":        {InputPerMTok: 1.25, OutputPerMTok: 10.00, CachedInputPerMTok: 0.125},
		"gpt-5-mini":   {InputPerMTok: 0.25, OutputPerMTok: 2.00, CachedInputPerMTok: 0.025},
		"gpt-5-nano":   {InputPerMTok: 0.05, OutputPerMTok: 0.40, CachedInputPerMTok: 0.005},
		"gpt-4o":       {InputPerMTok: 2.50, OutputPerMTok: 10.00, CachedInputPerMTok: 1.25},
		"gpt-4o-mini":  {InputPerMTok: 0.15, OutputPerMTok: 0.60, CachedInputPerMTok: 0.075},
		"gpt-4.1":      {InputPerMTok: 2.00, OutputPerMTok: 8.00, CachedInputPerMTok: 0.50},
		"gpt-4.1-mini": {InputPerMTok: 0.40, OutputPerMTok: 1.60, CachedInputPerMTok: 0.10},
		"gpt-4.1-nano": {InputPerMTok: 0.10, OutputPerMTok: 0.40, CachedInputPerMTok: 0.025},
		"o3":           {InputPerMTok: 2.00, OutputPerMTok: 8.00, CachedInputPerMTok: 0.50},
		"o3-mini":      {InputPerMTok: 1.10, OutputPerMTok: 4.40, CachedInputPerMTok: 0.55},
		"o4-mini":      {InputPerMTok: 1.10, OutputPerMTok: 4.40, CachedInputPerMTok: 0.275},

		"claude-opus-4-6":   anthropicPrice(5.00, 25.00),
		"claude-opus-4-5":   anthropicPrice(5.00, 25.00),
		"claude-opus-4-1":   anthropicPrice(15.00, 75.00),
		"claude-opus-4":     anthropicPrice(15.00, 75.00),
		"claude-sonnet-4-6": anthropicPrice(3.00, 15.00),
		"claude-sonnet-4-5": anthropicPrice(3.00, 15.00),
		"claude-sonnet-4":   anthropicPrice(3.00, 15.00),
		"claude-haiku-4-5":  anthropicPrice(1.00, 5.00),
		"claude-3-7-sonnet": anthropicPrice(3.00, 15.00),
		"claude-3-5-haiku":  anthropicPrice(0.80, 4.00),
	}
}

// Lookup returns the price of model and whether it has one.
func (t PriceTable) Lookup(model string) (Price, bool) {
	if p, ok := t[model]; ok {
		return p, true
	}
	best, found := "", false
	for name := range t {
		if strings.HasPrefix(model, name+"-") && len(name) > len(best) {
			best, found = name, true
		}
	}
	return t[best], found
}

// Cost is the price of a call to model that used the given tokens.
func (t PriceTable) Cost(model string, inputTokens, outputTokens uint64) float64 {
	p, ok := t.Lookup(model)
	if !ok {
		return 0
	}
	return (float64(inputTokens)*p.InputPerMTok + float64(outputTokens)*p.OutputPerMTok) / 1e6
}

// CostOf is the price of a call to model with usage u: uncached input at the input
// rate, cache reads at the cached rate, cache writes at the cache-write rate, output
// (reasoning included) at the output rate. A model without a price costs 0.
func (t PriceTable) CostOf(model string, u Usage) float64 {
	p, ok := t.Lookup(model)
	if !ok {
		return 0
	}
	cachedRate, writeRate := p.CachedInputPerMTok, p.CacheWritePerMTok
	if cachedRate == 0 {
		cachedRate = p.InputPerMTok
	}
	if writeRate == 0 {
		writeRate = p.InputPerMTok
	}
	cached, written := max(u.CachedInputTokens, 0), max(u.CacheWriteInputTokens, 0)
	plain := max(u.InputTokens-cached-written, 0)
	return (float64(plain)*p.InputPerMTok + float64(cached)*cachedRate + float64(written)*writeRate +
		float64(max(u.OutputTokens, 0))*p.OutputPerMTok) / 1e6
}

// Pricer prices calls with a PriceTable and logs a warning the first time it meets a
// model the table has no price for (that model's calls then cost 0 and a cost budget
// does not see them). It is safe for concurrent use.
type Pricer struct {
	table  PriceTable
	log    *slog.Logger
	warned sync.Map // model → struct{}
}

// NewPricer returns a Pricer over t that warns on log (nil: slog.Default()).
func NewPricer(t PriceTable, log *slog.Logger) *Pricer {
	if log == nil {
		log = slog.Default()
	}
	return &Pricer{table: t, log: log}
}

// Cost is t.CostOf(model, u), warning once per model without a price.
func (p *Pricer) Cost(model string, u Usage) float64 {
	if _, ok := p.table.Lookup(model); !ok {
		if _, seen := p.warned.LoadOrStore(model, struct{}{}); !seen {
			p.log.Warn("model has no price: its calls cost 0 in cost_usd and budgets; add it with --prices FILE",
				"model", model)
		}
		return 0
	}
	return p.table.CostOf(model, u)
}

// unpricedWarned are the models WarnUnpriced warned about in this process.
var unpricedWarned sync.Map // model → struct{}

// WarnUnpriced logs a warning on log the first time in this process that a call to
// model is priced with t and t has no price for it (its calls then cost 0 in cost_usd
// and a cost budget does not see them). It reports whether model has a price.
func WarnUnpriced(log *slog.Logger, t PriceTable, model string) bool {
	if _, ok := t.Lookup(model); ok {
		return true
	}
	if _, seen := unpricedWarned.LoadOrStore(model, struct{}{}); !seen && log != nil {
		log.Warn("model has no price: its calls cost 0 in cost_usd and budgets; add it with --prices FILE", "model", model)
	}
	return false
}

// ParsePriceTable reads a JSON object of model → {"input_per_mtok", "output_per_mtok",
// "cached_input_per_mtok", "cache_write_per_mtok"} (the last two optional).
func ParsePriceTable(data []byte) (PriceTable, error) {
	var t PriceTable
	if err := json.Unmarshal(data, &t); err != nil {
		return nil, fmt.Errorf("price table: %w", err)
	}
	for model, p := range t {
		if p.InputPerMTok < 0 || p.OutputPerMTok < 0 || p.CachedInputPerMTok < 0 || p.CacheWritePerMTok < 0 {
			return nil, fmt.Errorf("price table: model %q has a negative price", model)
		}
	}
	return t, nil
}

// LoadPriceTable reads a price file (see ParsePriceTable) and lays it over base: the
// file's models replace or add to base's.
func LoadPriceTable(path string, base PriceTable) (PriceTable, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("price table: %w", err)
	}
	t, err := ParsePriceTable(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	out := make(PriceTable, len(base)+len(t))
	for k, v := range base {
		out[k] = v
	}
	for k, v := range t {
		out[k] = v
	}
	return out, nil
}
