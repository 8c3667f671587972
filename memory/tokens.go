package memory

import (
	"context"
	"fmt"
	"math/bits"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"github.com/dlclark/regexp2"
	"github.com/pkoukk/tiktoken-go"
	tiktokenloader "github.com/pkoukk/tiktoken-go-loader"

	"github.com/fathom-agents/fathom/llm"
)

// Encoding names understood by Tokenizer (the BPE files are compiled into the binary by
// tiktoken-go-loader: nothing is downloaded, ever).
const (
	// EncodingO200K is the encoding of gpt-4o, gpt-4.1, gpt-4.5, gpt-5 and the o-series.
	EncodingO200K = "o200k_base"
	// EncodingCL100K is the encoding of gpt-4, gpt-3.5-turbo and the text-embedding models.
	EncodingCL100K = "cl100k_base"
	// EncodingP50K and EncodingR50K are the encodings of older completion models.
	EncodingP50K = "p50k_base"
	EncodingR50K = "r50k_base"

	// DefaultEncoding is used for models EncodingForModel does not know when the caller
	// configures no fallback: the encoding of current OpenAI models.
	DefaultEncoding = EncodingO200K
)

// Token overheads of the chat format, per OpenAI's published counting recipe
// ("How to count tokens with tiktoken", for gpt-3.5-turbo-0613 and every later chat
// model including gpt-4o): each message costs TokensPerMessage plus the tokens of its
// role and content (plus TokensPerName and the name's tokens when a name is set, which
// Fathom never does), and every request costs ReplyPrimingTokens for the
// <|start|>assistant<|message|> that primes the answer.
const (
	TokensPerMessage   = 3
	TokensPerName      = 1
	ReplyPrimingTokens = 3
	// TokensPerToolCall is Fathom's estimate of the framing of one tool call on an
	// assistant message, added to the tokens of the call's name and arguments. OpenAI
	// does not publish the exact rendering of tool calls; the estimate errs high.
	TokensPerToolCall = 3
)

// Tokenizer counts tokens with one tiktoken encoding. Tokenizers are built once per
// encoding (lazily, on first use: building one costs ~150 ms and ~7 MB), shared by every
// caller, and safe for concurrent use.
type Tokenizer struct {
	name string
	// tk is tiktoken-go's encoder (encoder builds it once): Encode's, and the counter's
	// when ranks is nil.
	tkOnce sync.Once
	tk     *tiktoken.Tiktoken
	tkErr  error
	// split counts ASCII text without the regexp2 pre-tokeniser (pretokenize.go); nil
	// for encodings without a hand-written splitter.
	split func(asciiText, func(string))
	// pattern is the encoding's pre-tokeniser, for all other text; ranks are its BPE
	// ranks (bpe.go merges each piece). Both nil if this merge cannot key the ranks:
	// then tiktoken-go counts.
	pattern *regexp2.Regexp
	ranks   *bpeRanks
	// busy and stopped are Stats'.
	busy, stopped atomic.Int64
}

// LongText is the length from which a text's count is a long count in TokenizerStats.
const LongText = 64 << 10

// TokenizerStats is what a Tokenizer has done since the process started: the work an
// operator or a test can watch to see that counts for cancelled callers stop.
type TokenizerStats struct {
	// Busy is the number of counts of long texts (LongText bytes or more) under way.
	Busy int64
	// Stopped is the number of counts given up, or never begun, because the caller's
	// context was done (CountContext, CountMessageContext, WithContext).
	Stopped int64
}

// Stats returns the tokenizer's running figures.
func (t *Tokenizer) Stats() TokenizerStats {
	return TokenizerStats{Busy: t.busy.Load(), Stopped: t.stopped.Load()}
}

// The encodings' pre-tokeniser patterns, as tiktoken-go (encoding.go) and OpenAI's
// tiktoken define them.
const (
	o200kPattern = `[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|` +
		`[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|` +
		`\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	cl100kPattern = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	p50kPattern   = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`
)

// ranksLoader is the offline BPE loader, keeping each file's ranks so the fast counting
// path shares tiktoken-go's map instead of loading a second copy.
type ranksLoader struct {
	offline *tiktokenloader.OfflineLoader
	mu      sync.Mutex
	loaded  map[string]map[string]int
}

// LoadTiktokenBpe implements tiktoken.BpeLoader: a file is read once, and its ranks are
// shared by every caller (Fathom's counting path and tiktoken-go's encoder).
func (l *ranksLoader) LoadTiktokenBpe(file string) (map[string]int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if ranks, ok := l.loaded[file]; ok {
		return ranks, nil
	}
	ranks, err := l.offline.LoadTiktokenBpe(file)
	if err == nil {
		l.loaded[file] = ranks
	}
	return ranks, err
}

// rankFiles are the encodings' BPE rank files, as tiktoken-go names them (the offline
// loader serves them from the binary).
var rankFiles = map[string]string{
	EncodingO200K:  "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken",
	EncodingCL100K: "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken",
	EncodingP50K:   "https://openaipublic.blob.core.windows.net/encodings/p50k_base.tiktoken",
	EncodingR50K:   "https://openaipublic.blob.core.windows.net/encodings/r50k_base.tiktoken",
}

var (
	loaderOnce sync.Once
	loader     = &ranksLoader{offline: tiktokenloader.NewOfflineLoader(), loaded: map[string]map[string]int{}}

	tokenizersMu sync.Mutex
	tokenizers   = map[string]*tokenizerEntry{}
)

// tokenizerEntry builds one encoding at most once.
type tokenizerEntry struct {
	once sync.Once
	t    *Tokenizer
	err  error
}

// GetTokenizer returns the shared Tokenizer of encoding (o200k_base, cl100k_base,
// p50k_base, r50k_base), building it on first use. Concurrent first calls build it once.
func GetTokenizer(encoding string) (*Tokenizer, error) {
	tokenizersMu.Lock()
	e, ok := tokenizers[encoding]
	if !ok {
		e = &tokenizerEntry{}
		tokenizers[encoding] = e
	}
	tokenizersMu.Unlock()
	e.once.Do(func() { e.t, e.err = newTokenizer(encoding) })
	return e.t, e.err
}

// newTokenizer builds the Tokenizer of encoding (GetTokenizer keeps one per encoding):
// Fathom's own counting over the encoding's ranks, or, for ranks it cannot key,
// tiktoken-go's encoder.
func newTokenizer(encoding string) (*Tokenizer, error) {
	switch encoding {
	case EncodingO200K, EncodingCL100K, EncodingP50K, EncodingR50K:
	default:
		return nil, fmt.Errorf("memory: unknown encoding %q (want %s, %s, %s or %s)", encoding, EncodingO200K, EncodingCL100K, EncodingP50K, EncodingR50K)
	}
	// The offline loader reads the BPE ranks compiled into the binary; without it
	// tiktoken-go downloads them at run time.
	loaderOnce.Do(func() { tiktoken.SetBpeLoader(loader) })
	t := &Tokenizer{name: encoding}
	pattern := p50kPattern
	switch encoding {
	case EncodingO200K:
		t.split, pattern = splitO200K, o200kPattern
	case EncodingCL100K:
		t.split, pattern = splitCL100K, cl100kPattern
	}
	ranks, err := loader.LoadTiktokenBpe(rankFiles[encoding])
	if err != nil {
		return nil, fmt.Errorf("memory: load the BPE ranks of %s: %w", encoding, err)
	}
	if t.ranks = newBPERanks(ranks); !t.ranks.ids {
		// Ranks this merge cannot key: count through tiktoken-go.
		t.split, t.ranks = nil, nil
		if _, err := t.encoder(); err != nil {
			return nil, err
		}
		return t, nil
	}
	t.pattern = regexp2.MustCompile(pattern, regexp2.None)
	return t, nil
}

// TokenizerForModel returns the shared Tokenizer of model's encoding. A model
// EncodingForModel does not know gets fallback, or DefaultEncoding when fallback is "".
func TokenizerForModel(model, fallback string) (*Tokenizer, error) {
	enc, ok := EncodingForModel(model)
	if !ok {
		enc = fallback
		if enc == "" {
			enc = DefaultEncoding
		}
	}
	return GetTokenizer(enc)
}

// EncodingForModel maps a model name to its tiktoken encoding. Provider prefixes such
// as "openai/" (LiteLLM, OpenRouter) and letter case are ignored; dated snapshots
// ("gpt-4o-2024-08-06") map like their family.
//
//   - gpt-4o, chatgpt-4o, gpt-4.1, gpt-4.5, gpt-5 and the o-series (o1, o3, o4-mini, ...) → o200k_base
//   - gpt-4, gpt-3.5-turbo, text-embedding-ada-002, text-embedding-3-* → cl100k_base
//
// ok is false for any other model: the caller picks the fallback.
func EncodingForModel(model string) (encoding string, ok bool) {
	m := strings.ToLower(strings.TrimSpace(model))
	if i := strings.LastIndexByte(m, '/'); i >= 0 {
		m = m[i+1:]
	}
	for _, p := range []string{"gpt-4o", "chatgpt-4o", "gpt-4.1", "gpt-4.5", "gpt-5"} {
		if strings.HasPrefix(m, p) {
			return EncodingO200K, true
		}
	}
	if len(m) >= 2 && m[0] == 'o' && m[1] >= '0' && m[1] <= '9' {
		return EncodingO200K, true
	}
	for _, p := range []string{"gpt-4", "gpt-3.5", "gpt-35", "text-embedding-ada-002", "text-embedding-3"} {
		if strings.HasPrefix(m, p) {
			return EncodingCL100K, true
		}
	}
	return "", false
}

// Name returns the encoding's name.
func (t *Tokenizer) Name() string { return t.name }

// Count returns the number of tokens of text. Special-token strings such as
// "<|endoftext|>" in text are counted as ordinary text, as the chat APIs treat user
// content.
func (t *Tokenizer) Count(text string) int {
	n, _ := t.count(context.Background(), text)
	return n
}

// CountContext is Count giving up once ctx is done: it checks between the text's lines,
// every longLineCheck bytes within a line and every few thousand merges of a long piece,
// so a cancelled caller stops spending CPU on the count within a millisecond or so. The
// error wraps ctx.Err().
func (t *Tokenizer) CountContext(ctx context.Context, text string) (int, error) {
	n, ok := t.count(ctx, text)
	if !ok {
		t.stopped.Add(1)
		return 0, fmt.Errorf("count tokens: %w", ctx.Err())
	}
	return n, nil
}

// count is Count, stopping with ok false once ctx is done.
func (t *Tokenizer) count(ctx context.Context, text string) (n int, ok bool) {
	if text == "" {
		return 0, true
	}
	done := ctx.Done()
	if len(text) >= LongText {
		t.busy.Add(1)
		defer t.busy.Add(-1)
	}
	if t.ranks == nil {
		tk, _ := t.encoder() // built when the tokenizer was
		return len(tk.EncodeOrdinary(text)), true
	}
	if t.split == nil {
		return t.countPieces(done, text)
	}
	// No piece of either pattern spans a newline followed by a byte that is neither white
	// space nor '/' (a white-space piece ends at the run's last newline, a punctuation
	// piece's trailing newlines and slashes end there too, and no other piece holds a
	// newline), so the text is counted in chunks ending there: ASCII chunks by the
	// scanner, others by the regexp pre-tokeniser.
	hasCR := strings.IndexByte(text, '\r') >= 0
	for len(text) > 0 {
		if stopped(done) {
			return n, false
		}
		end := lineEnd(text, hasCR)
		var c int
		if line := text[:end]; isASCII(line) {
			c, ok = t.countASCII(ctx, done, line)
		} else {
			c, ok = t.countPieces(done, line)
		}
		if n += c; !ok {
			return n, false
		}
		text = text[end:]
	}
	return n, true
}

// longLineCheck is the number of bytes of a line counted between checks of the caller's
// context: one line may be megabytes long (base64, a minified document).
const longLineCheck = 64 << 10

// halted reports whether ctx is done, by its Err: the check of a long line's count, every
// longLineCheck bytes.
func halted(ctx context.Context) bool { return ctx.Err() != nil }

// stopped reports whether done is closed.
func stopped(done <-chan struct{}) bool {
	select {
	case <-done:
		return true
	default:
		return false
	}
}

// lineEnd returns the end of text's first chunk: just after the first newline that is
// followed by a byte other than white space and '/' (o200k_base's punctuation pieces take
// trailing newlines and slashes), or len(text). hasCR tells whether text may hold a '\r'
// (without one, the newlines are found by strings.IndexByte).
func lineEnd(text string, hasCR bool) int {
	if !hasCR {
		for i := 0; ; {
			j := strings.IndexByte(text[i:], '\n')
			if j < 0 {
				return len(text)
			}
			if i += j + 1; i < len(text) && !isSpaceByte(text[i]) && text[i] != '/' {
				return i
			}
		}
	}
	for i := 0; i+1 < len(text); i++ {
		if (text[i] == '\n' || text[i] == '\r') && !isSpaceByte(text[i+1]) && text[i+1] != '/' {
			return i + 1
		}
	}
	return len(text)
}

// isSpaceByte reports whether b is ASCII white space or starts a multi-byte character
// (which may be Unicode white space: the chunk then continues, conservatively).
func isSpaceByte(b byte) bool {
	return b >= 0x80 || asciiClasses[b] == clsSpace || asciiClasses[b] == clsNewline
}

// countASCII counts ASCII text with the hand-written splitter and the BPE ranks: the
// same count as tiktoken-go's, without its regexp2 pre-tokeniser. It stops, ok false,
// once done is closed (long pieces) or ctx is done (every longLineCheck bytes).
func (t *Tokenizer) countASCII(ctx context.Context, done <-chan struct{}, text string) (n int, ok bool) {
	s := asciiText(text)
	check := longLineCheck
	if t.name == EncodingO200K {
		// The scanner's loop written out per encoding: a direct call per piece. After a
		// piece of one or two bytes that starts with a simple byte and is followed by
		// one (as in base64, not in prose, whose pieces start with a space), the pieces
		// are found a block at a time (o200kBlock), as splitO200K finds them.
		for i, c := 0, 0; i < len(s); i = c {
			if i >= check {
				if halted(ctx) {
					return n, false
				}
				check = i + longLineCheck
			}
			c = s.endO200K(i)
			if c-i > 2 {
				m, live := bpeCount(done, text[i:c], t.ranks)
				if n += m; !live {
					return n, false
				}
				continue
			}
			n += t.countShort(text[i:c])
			if c < len(s) && o200kBlockSimple[s[i]] && o200kBlockSimple[s[c]] {
				var m int
				var live bool
				if c, m, live = t.countBlocks(ctx, s, c); !live {
					return n + m, false
				}
				n += m
			}
		}
		return n, true
	}
	for i, c := 0, 0; i < len(s); i = c {
		if i >= check {
			if halted(ctx) {
				return n, false
			}
			check = i + longLineCheck
		}
		c = s.endCL100K(i)
		if n += t.countShort(text[i:c]); c-i > 2 {
			m, live := bpeCount(done, text[i:c], t.ranks)
			if n += m; !live {
				return n, false
			}
		}
	}
	return n, true
}

// countBlocks counts the pieces of o200k_base found by o200kBlock in ASCII text s from
// start, a piece start, block after block while every byte of a block is simple. It
// returns the start of the piece it leaves (that may go on past the last block) and the
// tokens of those before. A piece of 4 to 8 bytes is counted by countPairsWord where it
// can be (three quarters of base64's), others by bpeCount (those of 3 bytes cost it a
// lookup and two pairs). Every piece is shorter than a block, so its merge does not
// check for cancellation; the blocks stop, ok false, if ctx is done at a check (every
// longLineCheck bytes).
func (t *Tokenizer) countBlocks(ctx context.Context, s asciiText, start int) (end, n int, ok bool) {
	text := string(s)
	check := start + longLineCheck
	for end = start; end < len(s); {
		if end >= check {
			if halted(ctx) {
				return end, n, false
			}
			check = end + longLineCheck
		}
		starts, simple := s.o200kBlock(end)
		a := end
		for m := starts & (starts - 1); m != 0; m &= m - 1 {
			b := end + bits.TrailingZeros64(m)
			if n += t.countShort(text[a:b]); b-a > 2 {
				c := 0
				if b-a >= 4 && b-a <= 8 && a+8 <= len(text) {
					c = countPairsWord(load64(text, a), b-a, t.ranks)
				}
				if c == 0 {
					c, _ = bpeCount(nil, text[a:b], t.ranks)
				}
				n += c
			}
			a = b
		}
		if a == end || simple < 64 {
			return a, n, true
		}
		end = a
	}
	return end, n, true
}

// countShort returns the tokens of a piece of one or two bytes, 0 for a longer one:
// without a branch on the length, which the random lengths of text without words (such
// as base64) would mispredict.
func (t *Tokenizer) countShort(piece string) int {
	l := len(piece)
	if l > 2 {
		return 0
	}
	merged := 0
	if t.ranks.pair[int(piece[0])<<8|int(piece[l-1])] != noRank {
		merged = 1
	}
	return l - merged&(l-1)
}

// countPieces counts text split by the encoding's regexp pre-tokeniser, each piece merged
// by bpeCount: tiktoken-go's pieces and count, without its quadratic merge.
func (t *Tokenizer) countPieces(done <-chan struct{}, text string) (n int, ok bool) {
	if !utf8.ValidString(text) {
		// As tiktoken-go reads it: the pattern runs on runes, each invalid byte a U+FFFD.
		text = string([]rune(text))
	}
	// The matches are in runes and in order; at and off are the rune and byte offsets
	// of the text already counted.
	at, off := 0, 0
	skip := func(to int) int { // byte offset of rune to, from (at, off)
		for ; at < to; at++ {
			_, size := utf8.DecodeRuneInString(text[off:])
			off += size
		}
		return off
	}
	m, _ := t.pattern.FindStringMatch(text)
	for k := 1; m != nil; k++ {
		if k%256 == 0 && stopped(done) {
			return n, false
		}
		start := skip(m.Index)
		c, ok := bpeCount(done, text[start:skip(m.Index+m.Length)], t.ranks)
		if n += c; !ok {
			return n, false
		}
		m, _ = t.pattern.FindNextMatch(m)
	}
	return n, true
}

// Encode returns the token ids of text (special-token strings encoded as ordinary text).
// It is tiktoken-go's encoder, built on the first call (counting does not need it). It
// panics if that encoder cannot be built, which GetTokenizer has already shown it can
// for an encoding counted through it.
func (t *Tokenizer) Encode(text string) []int {
	tk, err := t.encoder()
	if err != nil {
		panic(err)
	}
	return tk.EncodeOrdinary(text)
}

// encoder is tiktoken-go's encoder of t's encoding, built once on first use (about 13 MB
// that counting with Fathom's own ranks never needs), over the same ranks (the shared
// loader).
func (t *Tokenizer) encoder() (*tiktoken.Tiktoken, error) {
	t.tkOnce.Do(func() {
		t.tk, t.tkErr = tiktoken.GetEncoding(t.name)
		if t.tkErr != nil {
			t.tkErr = fmt.Errorf("memory: build encoding %s: %w", t.name, t.tkErr)
		}
	})
	return t.tk, t.tkErr
}

// CountMessage returns what m costs inside a chat request: TokensPerMessage, the tokens
// of its role and content, and for each tool call TokensPerToolCall plus the tokens of
// its name and arguments. This is the count Fathom stores with each recorded message
// and the unit of the context builder's budget.
func (t *Tokenizer) CountMessage(m llm.Message) int {
	n := TokensPerMessage + t.Count(m.Role) + t.Count(m.Content)
	for _, c := range m.ToolCalls {
		n += TokensPerToolCall + t.Count(c.Name) + t.Count(c.Arguments)
	}
	return n
}

// CountMessageContext is CountMessage giving up once ctx is done (see CountContext).
func (t *Tokenizer) CountMessageContext(ctx context.Context, m llm.Message) (int, error) {
	n := TokensPerMessage
	for _, text := range messageTexts(m) {
		c, err := t.CountContext(ctx, text)
		if err != nil {
			return 0, err
		}
		n += c
	}
	return n + TokensPerToolCall*len(m.ToolCalls), nil
}

// messageTexts returns the texts of m that CountMessage counts.
func messageTexts(m llm.Message) []string {
	texts := []string{m.Role, m.Content}
	for _, c := range m.ToolCalls {
		texts = append(texts, c.Name, c.Arguments)
	}
	return texts
}

// CountRequest returns the prompt tokens of a chat request made of msgs: the sum of
// CountMessage plus ReplyPrimingTokens.
func (t *Tokenizer) CountRequest(msgs []llm.Message) int {
	n := ReplyPrimingTokens
	for _, m := range msgs {
		n += t.CountMessage(m)
	}
	return n
}

// Costs returns the context builder's fixed costs for this encoding: the reply
// priming, the framing of the summary message and the attribution prefix of semantic
// messages. Each prefix cost carries one token of slack, because BPE may merge a
// prefix's last character with the start of the text it precedes differently from
// counting them apart.
func (t *Tokenizer) Costs() Costs {
	return Costs{
		Reply:           ReplyPrimingTokens,
		SummaryOverhead: TokensPerMessage + t.Count("system") + t.Count(SummaryPrefix) + 1,
		SemanticPrefix:  t.Count(SemanticPrefix) + 1,
	}
}
