package memory_test

import (
	"context"
	"encoding/base64"
	"errors"
	"math/rand"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/fathom-agents/fathom/llm"
	"github.com/fathom-agents/fathom/memory"
)

func tokenizer(t testing.TB, enc string) *memory.Tokenizer {
	t.Helper()
	tk, err := memory.GetTokenizer(enc)
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

// TestReferenceCounts: counts equal tiktoken's reference values, with no network (the
// offline loader reads the BPE files compiled into the binary).
func TestReferenceCounts(t *testing.T) {
	for _, tc := range []struct {
		enc, text string
		want      int
	}{
		{memory.EncodingCL100K, "hello world", 2},
		{memory.EncodingO200K, "hello world", 2},
		{memory.EncodingCL100K, "tiktoken is great!", 6},
		{memory.EncodingCL100K, "", 0},
		{memory.EncodingCL100K, "<|endoftext|>", 7}, // special-token text counts as ordinary text
	} {
		if got := tokenizer(t, tc.enc).Count(tc.text); got != tc.want {
			t.Errorf("%s %q: %d tokens, want %d", tc.enc, tc.text, got, tc.want)
		}
	}
	if ids := tokenizer(t, memory.EncodingCL100K).Encode("hello world"); len(ids) != 2 || ids[0] != 15339 || ids[1] != 1917 {
		t.Errorf("cl100k ids of hello world = %v, want [15339 1917]", ids)
	}
}

func TestEncodingForModel(t *testing.T) {
	for model, want := range map[string]string{
		"gpt-4o": memory.EncodingO200K, "gpt-4o-mini": memory.EncodingO200K, "gpt-4o-2024-08-06": memory.EncodingO200K,
		"GPT-4.1-nano": memory.EncodingO200K, "o1": memory.EncodingO200K, "o3-mini": memory.EncodingO200K,
		"o4-mini": memory.EncodingO200K, "openai/gpt-5": memory.EncodingO200K, "chatgpt-4o-latest": memory.EncodingO200K,
		"gpt-4": memory.EncodingCL100K, "gpt-4-turbo": memory.EncodingCL100K, "gpt-4-0613": memory.EncodingCL100K,
		"gpt-3.5-turbo": memory.EncodingCL100K, "text-embedding-3-small": memory.EncodingCL100K,
	} {
		if got, ok := memory.EncodingForModel(model); !ok || got != want {
			t.Errorf("%s: %q %v, want %q", model, got, ok, want)
		}
	}
	for _, model := range []string{"", "llama3", "claude-3-5-sonnet", "omni", "fathom-demo"} {
		if got, ok := memory.EncodingForModel(model); ok {
			t.Errorf("%s: %q, want unknown", model, got)
		}
	}
	tk, err := memory.TokenizerForModel("llama3", memory.EncodingCL100K)
	if err != nil || tk.Name() != memory.EncodingCL100K {
		t.Fatalf("fallback: %v %v", tk, err)
	}
	if tk, err = memory.TokenizerForModel("llama3", ""); err != nil || tk.Name() != memory.DefaultEncoding {
		t.Fatalf("default fallback: %v %v", tk, err)
	}
	if _, err := memory.TokenizerForModel("llama3", "nope"); err == nil {
		t.Fatal("unknown fallback encoding accepted")
	}
}

// TestTokenizerSharedAndConcurrent: concurrent first uses build one Tokenizer.
func TestTokenizerSharedAndConcurrent(t *testing.T) {
	var wg sync.WaitGroup
	got := make([]*memory.Tokenizer, 16)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tk, err := memory.GetTokenizer(memory.EncodingCL100K)
			if err != nil {
				t.Error(err)
				return
			}
			if n := tk.Count("hello world"); n != 2 {
				t.Errorf("count %d", n)
			}
			got[i] = tk
		}()
	}
	wg.Wait()
	for _, tk := range got[1:] {
		if tk != got[0] {
			t.Fatal("two tokenizers built for one encoding")
		}
	}
}

// TestCountMessage: OpenAI's recipe. The cookbook's example conversation (from "How to
// count tokens with tiktoken") costs 129 prompt tokens on gpt-4 / gpt-4o per the API;
// here we check the rule on a small case by hand: 3 + role + content per message,
// 3 for the reply.
func TestCountMessage(t *testing.T) {
	tk := tokenizer(t, memory.EncodingCL100K)
	m := llm.Message{Role: "user", Content: "hello world"}
	if got := tk.CountMessage(m); got != 3+1+2 {
		t.Fatalf("CountMessage = %d, want 6", got)
	}
	if got := tk.CountRequest([]llm.Message{m, {Role: "system", Content: "hello world"}}); got != 3+6+6 {
		t.Fatalf("CountRequest = %d, want 15", got)
	}
	call := llm.Message{Role: "assistant", ToolCalls: []llm.ToolCall{{ID: "c1", Name: "web_search", Arguments: `{"q":"x"}`}}}
	want := 3 + 1 + memory.TokensPerToolCall + tk.Count("web_search") + tk.Count(`{"q":"x"}`)
	if got := tk.CountMessage(call); got != want {
		t.Fatalf("tool call message = %d, want %d", got, want)
	}
}

// TestCookbookExample: the example conversation of OpenAI's cookbook ("How to count
// tokens with tiktoken"), whose prompt tokens the API reports as 129 for gpt-4 /
// gpt-3.5-turbo and 124 for gpt-4o / gpt-4o-mini (recipe: 3 per message + role +
// content + 1 + name per named message + 3). llm.Message has no name field, so the test
// adds the named messages' name cost itself.
func TestCookbookExample(t *testing.T) {
	type msg struct{ role, name, content string }
	conv := []msg{
		{"system", "", "You are a helpful, pattern-following assistant that translates corporate jargon into plain English."},
		{"system", "example_user", "New synergies will help drive top-line growth."},
		{"system", "example_assistant", "Things working well together will increase revenue."},
		{"system", "example_user", "Let's circle back when we have more bandwidth to touch base on opportunities for increased leverage."},
		{"system", "example_assistant", "Let's talk later when we're less busy about how to do better."},
		{"user", "", "This late pivot means we don't have time to boil the ocean for the client deliverable."},
	}
	for enc, want := range map[string]int{memory.EncodingCL100K: 129, memory.EncodingO200K: 124} {
		tk := tokenizer(t, enc)
		var msgs []llm.Message
		extra := 0
		for _, m := range conv {
			msgs = append(msgs, llm.Message{Role: m.role, Content: m.content})
			if m.name != "" {
				extra += memory.TokensPerName + tk.Count(m.name)
			}
		}
		if got := tk.CountRequest(msgs) + extra; got != want {
			t.Errorf("%s: %d prompt tokens, want %d (the API's count)", enc, got, want)
		}
	}
}

// TestCosts: DefaultCosts are the costs of both modern encodings.
func TestCosts(t *testing.T) {
	for _, enc := range []string{memory.EncodingCL100K, memory.EncodingO200K} {
		if got := tokenizer(t, enc).Costs(); got != memory.DefaultCosts() {
			t.Errorf("%s costs %+v, DefaultCosts %+v", enc, got, memory.DefaultCosts())
		}
	}
}

func TestCountLongUnicode(t *testing.T) {
	tk := tokenizer(t, memory.EncodingO200K)
	s := strings.Repeat("Grüße, 世界! ", 200)
	if got, want := tk.Count(s), len(tk.Encode(s)); got != want || got == 0 {
		t.Fatalf("count %d, encode %d", got, want)
	}
}

// errAfter is a context whose Err turns context.Canceled at its (after+1)th call; its
// Done never closes: a count sees it only by asking Err.
type errAfter struct {
	context.Context
	after int32
	calls atomic.Int32
}

func (c *errAfter) Err() error {
	if c.calls.Add(1) > c.after {
		return context.Canceled
	}
	return nil
}

// TestCountStopsWithinLongLine: a count of one line megabytes long (base64, which o200k_base
// counts a block of pieces at a time; prose without a newline, in both encodings) asks
// its context every 64 KiB of the line, and stops at the first answer that it is done:
// CountContext returns the context's error having asked it only a few times, so having
// counted a few times 64 KiB of the 8 MiB line, not all of it.
func TestCountStopsWithinLongLine(t *testing.T) {
	blob := make([]byte, 6<<20)
	rand.New(rand.NewSource(3)).Read(blob)
	b64 := base64.StdEncoding.EncodeToString(blob)[:8<<20]
	prose := strings.Repeat("the committee met on Tuesday to review the proposal, and agreed. ", 8<<20/66)
	for _, enc := range []string{memory.EncodingO200K, memory.EncodingCL100K} {
		tk := tokenizer(t, enc)
		for name, text := range map[string]string{"base64": b64, "prose": prose} {
			ctx := &errAfter{Context: context.Background(), after: 3}
			n, err := tk.CountContext(ctx, text)
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("%s, %s: CountContext = %d, %v; want context.Canceled", enc, name, n, err)
			}
			// The checks that said go on, the one that said stop, and the error's.
			if calls := ctx.calls.Load(); calls > ctx.after+2 {
				t.Fatalf("%s, %s: Err called %d times", enc, name, calls)
			}
		}
	}
}
