// Package memory keeps a long session inside its token budget without forgetting:
// token counting, the 50/30/20 context builder, the summary trigger and request, and
// the embedding side of semantic retrieval. It has no actor code; the session grain
// and actors/summarizer call it.
//
// # Token counting
//
// Counts come from tiktoken (pkoukk/tiktoken-go with its offline BPE loader: the
// encodings are compiled into the binary and nothing is ever downloaded). A Tokenizer
// is built once per encoding, lazily, and shared. TokenizerForModel maps model names to
// encodings (gpt-4o, gpt-4.1, gpt-5 and the o-series → o200k_base; gpt-4 and gpt-3.5 →
// cl100k_base; anything else → a configured fallback). CountMessage follows OpenAI's
// recipe: 3 tokens per message plus its role and content, 3 per request for the reply
// priming. Each message is counted once, when it is recorded, and the count is stored
// in its event.
//
// The ranks and the pre-tokeniser patterns are tiktoken's, and counts equal tiktoken's,
// but the merge is Fathom's own (bpe.go): tiktoken-go's rescans every pair after each
// merge, quadratic in a piece's length, and text without pre-token splits (a run of one
// letter, a DNA sequence, a CJK paragraph) is one piece however long. Long pieces are
// merged in windows of 4096 bytes, each through a tournament tree of its pairs in
// tiktoken's order, O(n log 4096): exact for pieces up to 4096 bytes, and for longer ones
// unless a chain of merges reaches back more than 192 bytes across a window's cut (none
// does on a megabyte of one letter, of random DNA or of base64).
//
// # Context
//
// BuildContext is a pure function from session state (system prompt, summary, recorded
// messages with their stored counts, semantic hits) to a Context: the summary, the
// semantic messages and the recent messages, each with its tier, and the total tokens,
// never above the budget. Its cost depends on the budget, not on the history. The
// newest turn and the task message (Input.Task) are always in it: a message too large
// for the room left is elided (its head and tail kept, the middle replaced by a note
// naming the event that holds the whole text; Elide, elide.go). Context.Messages
// formats it for the model in the seed's order.
//
//	tok, _ := memory.TokenizerForModel("gpt-4o", "")
//	cfg := memory.DefaultContextConfig()
//	cfg.Costs = tok.Costs()
//	ctx, err := memory.BuildContext(cfg, memory.Input{
//		SystemPrompt: sys, SystemTokens: tok.CountMessage(llm.Message{Role: "system", Content: sys}),
//		Summary: summary, Messages: msgs, Hits: hits,
//	})
//	resp, err := provider.Chat(c, llm.Request{Messages: ctx.Messages()})
//
// # Summaries
//
// ShouldSummarize says when the messages a summary does not cover exceed the threshold
// (4,000 tokens); Summarize prepares the call that regenerates the summary from scratch
// (target 2,000 tokens). actors/summarizer runs those calls in the background.
//
// # Embeddings
//
// Embedder is the embedding provider interface; memory/hashembed is the deterministic
// local default and memory/openaiembed the OpenAI-compatible client. EmbedWorker embeds
// recorded messages in the background into a persistence.VectorStore, whose Search
// gives the hits BuildContext takes.
//
// Embedder lives here rather than in llm/ because memory is its only consumer and llm's
// Provider is chat-shaped: an embedding model is configured, batched and failed
// independently of the chat model (a session keeps working when embeddings fail).
package memory
