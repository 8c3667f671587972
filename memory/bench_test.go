package memory_test

import (
	"encoding/base64"
	"fmt"
	"math/rand"
	"runtime"
	"strings"
	"testing"

	"github.com/pkoukk/tiktoken-go"

	"github.com/fathom-agents/fathom/memory"
)

// corpus returns n chat-like messages (prose, numbers, code, punctuation) of 30–230
// words, the same for every call.
func corpus(n int) []string {
	words := strings.Fields(`the agent should search for recent papers on event sourcing and summarise
		their findings in a table with columns title year venue and key claim . the tool returned
		HTTP 429 so we retry after 30 seconds ; func (s *Store) Append(ctx context.Context) error {
		return nil } 2026-05-09T12:00:00Z https://example.org/a/b?q=1 Grüße 世界 naïve café — “quoted”
		SELECT seq , data FROM fathom_events WHERE stream_id = $1 ORDER BY seq ; 3.14159 42 1,000,000`)
	r := rand.New(rand.NewSource(99))
	out := make([]string, n)
	for i := range out {
		var b strings.Builder
		for j := 30 + r.Intn(200); j > 0; j-- {
			b.WriteString(words[r.Intn(len(words))])
			if r.Intn(12) == 0 {
				b.WriteByte('\n')
			} else {
				b.WriteByte(' ')
			}
		}
		out[i] = b.String()
	}
	return out
}

// session returns n recorded messages with stored counts (counted once, here).
func session(b *testing.B, tk *memory.Tokenizer, texts []string, n int) []memory.Message {
	ms := make([]memory.Message, n)
	for i := range ms {
		ms[i] = memory.Message{Seq: uint64(i + 1), Role: []string{"user", "assistant"}[i%2], Content: texts[i%len(texts)]}
		ms[i].Tokens = tk.CountMessage(ms[i].LLM())
	}
	return ms
}

// BenchmarkContext: building the context of one LLM call (8,000-token budget, a summary,
// 20 semantic hits) for sessions of 200 and 10,000 recorded messages, against the cost
// of re-tokenising the 200 messages, which the builder avoids by using stored counts.
// Cost must depend on the budget, not the history: history=10000 ≈ history=200, and
// both ≤ 5% of retokenize-200.
func BenchmarkContext(b *testing.B) {
	tk, err := memory.GetTokenizer(memory.EncodingO200K)
	if err != nil {
		b.Fatal(err)
	}
	texts := corpus(200)
	cfg := memory.DefaultContextConfig()
	cfg.Costs = tk.Costs()
	sys := "You are a research agent of Fathom."
	for _, n := range []int{200, 10000} {
		ms := session(b, tk, texts, n)
		r := rand.New(rand.NewSource(1))
		hits := make([]memory.Hit, 20)
		for i := range hits {
			hits[i] = memory.Hit{Seq: uint64(1 + r.Intn(n)), Score: 1 - float32(i)/40}
		}
		in := memory.Input{SystemPrompt: sys, SystemTokens: 12, Messages: ms, Hits: hits,
			Summary: &memory.Summary{Content: texts[0], Tokens: tk.Count(texts[0]), Through: uint64(n / 2)}}
		b.Run(fmt.Sprintf("history=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				c, err := memory.BuildContext(cfg, in)
				if err != nil || c.TotalTokens > cfg.Budget {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("baseline=retokenize-200", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			n := 0
			for _, t := range texts {
				n += tk.Count(t)
			}
			if n == 0 {
				b.Fatal("no tokens")
			}
		}
	})
}

// BenchmarkCountMixed: memory's Count against bare tiktoken-go on the same corpus, with
// identical counts. Encode(text, nil, nil) is the call most code makes; EncodeOrdinary is
// what Count's reference is (no special-token scan), so Count should be ≤ 1.0× both.
//
// The corpus mixes in a few non-ASCII words (so most lines go through the regexp
// pre-tokeniser); BenchmarkCountASCII is the same corpus with them left out (every line
// takes the scanner, see pretokenize.go).
func BenchmarkCountMixed(b *testing.B) { benchCount(b, corpus(200)) }

// BenchmarkCountASCII is BenchmarkCount on ASCII text.
func BenchmarkCountASCII(b *testing.B) {
	texts := corpus(200)
	for i, t := range texts {
		texts[i] = strings.Map(func(r rune) rune {
			if r >= 0x80 {
				return 'x'
			}
			return r
		}, t)
	}
	benchCount(b, texts)
}

func benchCount(b *testing.B, texts []string) {
	size := 0
	for _, t := range texts {
		size += len(t)
	}
	for _, enc := range []string{memory.EncodingCL100K, memory.EncodingO200K} {
		// The encodings are loaded in their own sub-benchmark: a run of one of them
		// (make bench's rows) loads only that one.
		b.Run(enc, func(b *testing.B) {
			tk, err := memory.GetTokenizer(enc)
			if err != nil {
				b.Fatal(err)
			}
			bare, err := tiktoken.GetEncoding(enc) // the offline loader is installed by GetTokenizer
			if err != nil {
				b.Fatal(err)
			}
			for _, t := range texts {
				if n, a, o := tk.Count(t), len(bare.Encode(t, nil, nil)), len(bare.EncodeOrdinary(t)); n != a || n != o {
					b.Fatalf("%s: Count %d, Encode %d, EncodeOrdinary %d", enc, n, a, o)
				}
			}
			run := func(name string, count func(string) int) {
				b.Run(name, func(b *testing.B) {
					b.SetBytes(int64(size))
					for b.Loop() {
						for _, t := range texts {
							if count(t) == 0 {
								b.Fatal("no tokens")
							}
						}
					}
				})
			}
			run("memory.Count", tk.Count)
			run("tiktoken.Encode", func(s string) int { return len(bare.Encode(s, nil, nil)) })
			run("tiktoken.EncodeOrdinary", func(s string) int { return len(bare.EncodeOrdinary(s)) })
		})
	}
}

// BenchmarkCount: counting 1 MiB of text that byte-pair encoding finds hard (o200k_base)
// against 1 MiB of English prose, the same-run baseline. A run of one letter and a random
// DNA sequence are each a single piece of the pre-tokeniser, a megabyte long; a base64
// blob is many short pieces with few merges. Each must cost at most 2× the prose (the
// merge is O(n log n) in the piece's length; it used to be quadratic: 40,000 x's took
// 13 s). The non-ASCII runs (é, CJK) go through the regexp pre-tokeniser and are
// reported only. On Linux each run also reports thread-cpu-ns/op, the CPU time of the
// benchmark's own thread per count: on a loaded machine a steadier figure than ns/op,
// which counts the time other processes hold the core.
func BenchmarkCount(b *testing.B) {
	tk, err := memory.GetTokenizer(memory.EncodingO200K)
	if err != nil {
		b.Fatal(err)
	}
	// The tables of the count of long pieces are built on the first (once per process,
	// like the tokenizer itself): not part of any count measured here.
	tk.Count(strings.Repeat("x", 1000))
	for _, c := range countInputs(1 << 20) {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(c.text)))
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			start, ok := threadCPU()
			for b.Loop() {
				if tk.Count(c.text) == 0 {
					b.Fatal("no tokens")
				}
			}
			if end, ok2 := threadCPU(); ok && ok2 {
				b.ReportMetric(float64(end-start)/float64(b.N), "thread-cpu-ns/op")
			}
		})
	}
}

// countInput is a named text of BenchmarkCount.
type countInput struct{ name, text string }

// countInputs returns BenchmarkCount's texts, each size bytes long (the non-ASCII ones
// within a character of it), the same on every call.
func countInputs(size int) []countInput {
	r := rand.New(rand.NewSource(7))
	words := strings.Fields(`The committee met on Tuesday to review the proposal , and after a long discussion
		about the budget , the schedule and the risks it agreed that the work should begin in the spring .
		Nobody expected the results to be so clear ; the data showed that most people preferred the simpler
		design , which was cheaper to build and easier to maintain . "We should have asked them sooner ,"
		she said , although she admitted that the early drafts had been confusing . In 2019 , 42 of the
		150 members voted against it , but by then the decision had already been made .`)
	var prose strings.Builder
	for prose.Len() < size {
		prose.WriteString(words[r.Intn(len(words))])
		if r.Intn(40) == 0 {
			prose.WriteString("\n\n")
		} else {
			prose.WriteByte(' ')
		}
	}
	acgt := make([]byte, size)
	for i := range acgt {
		acgt[i] = "ACGT"[r.Intn(4)]
	}
	blob := make([]byte, size)
	r.Read(blob)
	return []countInput{
		{"prose", prose.String()[:size]},
		{"letter", strings.Repeat("x", size)},
		{"acgt", string(acgt)},
		{"base64", base64.StdEncoding.EncodeToString(blob)[:size]},
		{"letter-nonascii", strings.Repeat("é", size/2)},
		{"cjk", strings.Repeat("世界和平", size/12)},
	}
}
