package llm

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
)

// Price is what a model costs, in US dollars per million tokens.
type Price struct {
	// InputPerMTok is the price of one million prompt tokens.
	InputPerMTok float64 `json:"input_per_mtok"`
	// OutputPerMTok is the price of one million completion tokens.
	OutputPerMTok float64 `json:"output_per_mtok"`
}

// PriceTable maps model names to prices. A model matches its exact name or, failing
// that, the longest name that is a prefix of it followed by "-" (so "gpt-4o-mini"
// prices "gpt-4o-mini-2024-07-18"). Models without a price cost 0.
type PriceTable map[string]Price

// DefaultPrices are list prices of common models (USD per million tokens, as published
// by their providers in 2025). Override them with a price file (ParsePriceTable).
func DefaultPrices() PriceTable {
	return PriceTable{
		"gpt-4o":            {InputPerMTok: 2.50, OutputPerMTok: 10.00},
		"gpt-4o-mini":       {InputPerMTok: 0.15, OutputPerMTok: 0.60},
		"gpt-4.1":           {InputPerMTok: 2.00, OutputPerMTok: 8.00},
		"gpt-4.1-mini":      {InputPerMTok: 0.40, OutputPerMTok: 1.60},
		"gpt-4.1-nano":      {InputPerMTok: 0.10, OutputPerMTok: 0.40},
		"o3-mini":           {InputPerMTok: 1.10, OutputPerMTok: 4.40},
		"claude-sonnet-4":   {InputPerMTok: 3.00, OutputPerMTok: 15.00},
		"claude-3-5-haiku":  {InputPerMTok: 0.80, OutputPerMTok: 4.00},
		"claude-opus-4":     {InputPerMTok: 15.00, OutputPerMTok: 75.00},
		"claude-3-7-sonnet": {InputPerMTok: 3.00, OutputPerMTok: 15.00},
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

// ParsePriceTable reads a JSON object of model → {"input_per_mtok", "output_per_mtok"}.
func ParsePriceTable(data []byte) (PriceTable, error) {
	var t PriceTable
	if err := json.Unmarshal(data, &t); err != nil {
		return nil, fmt.Errorf("price table: %w", err)
	}
	for model, p := range t {
		if p.InputPerMTok < 0 || p.OutputPerMTok < 0 {
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
