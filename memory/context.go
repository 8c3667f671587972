package memory

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"time"

	"github.com/fathom-agents/fathom/llm"
)

// Prefixes the context adds when it formats the summary and semantic messages for the
// model.
const (
	// SummaryPrefix starts the system message that carries the summary.
	SummaryPrefix = "[Conversation Summary]\n"
	// SemanticPrefix starts each message brought back by semantic retrieval, so the model
	// knows it is not part of the latest exchange.
	SemanticPrefix = "[From earlier in conversation]\n"
)

// Sentinel errors of the context builder. Compare with errors.Is.
var (
	// ErrInvalid means a configuration or an input the builder cannot use (ratios that
	// do not add up to 1, a negative token count, messages out of order).
	ErrInvalid = errors.New("memory: invalid argument")
	// ErrBudgetTooSmall means the system prompt and the reply priming alone exceed the
	// budget: no context can be built.
	ErrBudgetTooSmall = errors.New("memory: budget smaller than the system prompt")
)

// Ratios split the budget left after the system prompt between the three tiers. Each is
// in [0, 1] and they add up to 1.
type Ratios struct {
	// Recent is the share of the latest messages, verbatim (default 0.5).
	Recent float64
	// Summary is the share of the rolling summary (default 0.3).
	Summary float64
	// Semantic is the share of older messages brought back by similarity (default 0.2).
	Semantic float64
}

// DefaultRatios returns the seed's 50/30/20 split.
func DefaultRatios() Ratios { return Ratios{Recent: 0.5, Summary: 0.3, Semantic: 0.2} }

// Validate reports ratios outside [0, 1] or whose sum is not 1.
func (r Ratios) Validate() error {
	for _, v := range []float64{r.Recent, r.Summary, r.Semantic} {
		if math.IsNaN(v) || v < 0 || v > 1 {
			return fmt.Errorf("%w: ratios must be in [0, 1], got %+v", ErrInvalid, r)
		}
	}
	if s := r.Recent + r.Summary + r.Semantic; math.Abs(s-1) > 1e-9 {
		return fmt.Errorf("%w: ratios must add up to 1, got %+v (sum %g)", ErrInvalid, r, s)
	}
	return nil
}

// Costs are the fixed token costs the builder adds to stored counts. Tokenizer.Costs
// computes them for an encoding; DefaultCosts holds the values of o200k_base and
// cl100k_base.
type Costs struct {
	// Reply is the reply priming every request pays (ReplyPrimingTokens).
	Reply int
	// SummaryOverhead is added to the summary's content tokens: the message framing, the
	// "system" role and SummaryPrefix.
	SummaryOverhead int
	// SemanticPrefix is added to a semantic message's stored count: SemanticPrefix's tokens.
	SemanticPrefix int
}

// DefaultCosts returns the costs of o200k_base and cl100k_base (equal for both; a test
// keeps them in step with Tokenizer.Costs).
func DefaultCosts() Costs { return Costs{Reply: 3, SummaryOverhead: 9, SemanticPrefix: 7} }

// ContextConfig configures BuildContext.
type ContextConfig struct {
	// Budget is the most prompt tokens a context may cost: system prompt, summary,
	// messages and reply priming together. Typically the model's context window minus the
	// room kept for the answer. Default 8,000 (the seed's).
	Budget int
	// Ratios split what the system prompt leaves. Default 50/30/20.
	Ratios Ratios
	// Costs are the encoding's fixed costs. Default DefaultCosts().
	Costs Costs
	// Counter counts the messages the builder elides (the task or the newest turn when
	// they do not fit): only their shortened text is counted. Nil means ByteCounter, an
	// upper bound that needs no tokenizer. Pass the Tokenizer the stored counts came from.
	Counter MessageCounter
}

// DefaultContextConfig returns an 8,000-token budget split 50/30/20.
func DefaultContextConfig() ContextConfig {
	return ContextConfig{Budget: 8000, Ratios: DefaultRatios(), Costs: DefaultCosts()}
}

// Validate reports a configuration BuildContext cannot use.
func (c ContextConfig) Validate() error {
	if c.Budget <= 0 {
		return fmt.Errorf("%w: budget must be positive, got %d", ErrInvalid, c.Budget)
	}
	if c.Costs.Reply < 0 || c.Costs.SummaryOverhead < 0 || c.Costs.SemanticPrefix < 0 {
		return fmt.Errorf("%w: costs must not be negative, got %+v", ErrInvalid, c.Costs)
	}
	return c.Ratios.Validate()
}

// Message is one recorded message of a session as the builder sees it.
type Message struct {
	// Seq is the message's position: the sequence number of the event that recorded it.
	// Messages passed to BuildContext are in increasing Seq order.
	Seq uint64
	// Role is "user", "assistant", "system" or "tool".
	Role string
	// Content is the text.
	Content string
	// ToolCalls are the calls of an assistant message.
	ToolCalls []llm.ToolCall
	// ToolCallID names the call a tool message answers.
	ToolCallID string
	// Tokens is Tokenizer.CountMessage of the message, computed once when it was
	// recorded and stored in its event. The builder never re-tokenises.
	Tokens int
	// Thinking are an assistant message's reasoning blocks, sent back with it
	// (llm.Message.Thinking).
	Thinking []llm.ThinkingBlock
}

// LLM returns the message in the provider's format.
func (m Message) LLM() llm.Message {
	return llm.Message{Role: m.Role, Content: m.Content, ToolCalls: m.ToolCalls, ToolCallID: m.ToolCallID, Thinking: m.Thinking}
}

// Summary is the rolling summary of a session (a summary_updated event).
type Summary struct {
	// Content is the summary text.
	Content string
	// Tokens is Tokenizer.Count(Content): the content's tokens, without framing.
	Tokens int
	// Through is the Seq of the newest message the summary covers.
	Through uint64
}

// Hit is one semantic search result: a recorded message similar to the query.
type Hit struct {
	// Seq identifies the message.
	Seq uint64
	// Score is the similarity (cosine, higher is closer). Hits are passed best first.
	Score float32
}

// Input is the session state one context is built from.
type Input struct {
	// SystemPrompt is the step's system prompt; SystemTokens is its CountMessage (0 when
	// SystemPrompt is empty) plus TaskPrompt's.
	SystemPrompt string
	SystemTokens int
	// TaskPrompt is system text about the current task that changes from call to call
	// (a step's description, the workspace listing). It is sent last, after the history,
	// so that the system prompt and the history stay a prefix the provider can cache
	// from one call to the next. Empty means none.
	TaskPrompt string
	// Summary is the current summary, nil (or empty Content) when there is none.
	Summary *Summary
	// Messages are the recorded messages in increasing Seq order. The builder reads only
	// the newest ones that fit and the ones Hits name, so passing the whole history costs
	// nothing extra.
	Messages []Message
	// Hits are semantic search results for the current user message (or step
	// description), best first. Hits naming messages not in Messages are ignored.
	Hits []Hit
	// Search, when Hits is nil, finds the hits only when they can matter: it is called
	// (once) when the recent tier's first pass leaves an older message out of the
	// context, and not at all when every message fits verbatim (a hit could then only
	// name a message the context already holds). So a short history costs no
	// embedding and no search. Nil means no hits.
	Search func() []Hit
	// LongTerm are the user's long-term memories for the call, best first. They are paid
	// from the semantic share before the hits (with LongTermOverhead), whole or not at
	// all (FitLongTerm).
	LongTerm []LongTerm
	// LongTermOverhead is the memory message's own cost: its role and LongTermPrefix.
	LongTermOverhead int
	// Task is the Seq of the message that states the current task (a step's opening
	// message, a sub-agent's task brief); 0 means none. Like the newest turn, it is
	// always in the context, elided if it does not fit.
	Task uint64
	// Origin names where the recorded messages can be read whole (e.g. "session s-1"),
	// for the note that replaces an elided middle: "the whole text is event seq N of
	// {Origin}". Empty means "the session's journal".
	Origin string
	// Now stamps Metadata.BuiltAt; zero means time.Now().
	Now time.Time
}

// Tier says where a context message came from.
type Tier uint8

// Tiers of a context message.
const (
	// TierRecent: one of the newest messages, verbatim.
	TierRecent Tier = iota + 1
	// TierSemantic: an older message brought back by semantic retrieval.
	TierSemantic
	// TierTask: the message stating the task (Input.Task), older than the recent tier.
	TierTask
)

// String returns "recent", "semantic" or "task".
func (t Tier) String() string {
	switch t {
	case TierRecent:
		return "recent"
	case TierSemantic:
		return "semantic"
	case TierTask:
		return "task"
	}
	return fmt.Sprintf("tier(%d)", uint8(t))
}

// ContextMessage is a message placed in a context, with its provenance.
type ContextMessage struct {
	Message
	// Tier is the tier that selected the message.
	Tier Tier
	// Score is the similarity of a semantic message (0 for recent ones).
	Score float32
	// Cost is what the message costs in this context: Tokens, plus the attribution
	// prefix for a semantic message.
	Cost int
}

// Metadata describes how a context was built, for logs, spans and the console.
type Metadata struct {
	// RecentCount and SemanticCount are the number of messages of each tier.
	RecentCount, SemanticCount int
	// HasSummary is true when the summary is in the context; SummaryOmitted is true when
	// there was a summary but it did not fit its tier's budget.
	HasSummary, SummaryOmitted bool
	// SummaryThrough is the Seq the included summary covers (0 without one).
	SummaryThrough uint64
	// SystemTokens, SummaryTokens, RecentTokens and SemanticTokens are what each part
	// costs (SummaryTokens includes its framing, SemanticTokens the prefixes).
	SystemTokens, SummaryTokens, RecentTokens, SemanticTokens int
	// RecentShare, SummaryShare and SemanticShare are each tier's own share of the budget
	// before unused budget flowed on.
	RecentShare, SummaryShare, SemanticShare int
	// HitsIgnored counts hits that named no candidate message (unknown, in the recent
	// tier, repeated, or empty of text) or one whose text the context already holds (a
	// message of the same role and content among the hits taken or in the recent tier).
	HitsIgnored int
	// TaskTokens is what the task message costs when it is outside the recent tier
	// (Context.Task); 0 otherwise.
	TaskTokens int
	// Elided counts the messages whose middle was cut to fit (the task and the newest
	// turn, when they are larger than the room left).
	Elided int
	// LongTermCount and LongTermTokens are the long-term memories included and what
	// they cost (with the memory message's overhead), paid from the semantic share.
	LongTermCount, LongTermTokens int
	// BuiltAt is when the context was built.
	BuiltAt time.Time
}

// Context is the assembled prompt of one LLM call, with tier provenance.
type Context struct {
	// SystemPrompt is the step's system prompt.
	SystemPrompt string
	// TaskPrompt is Input.TaskPrompt, sent after the recent messages.
	TaskPrompt string
	// Summary is the included summary, nil when none was included.
	Summary *Summary
	// LongTerm are the long-term memories included, best first (LongTermMessage).
	LongTerm []LongTerm
	// Semantic are the retrieved older messages, in Seq order.
	Semantic []ContextMessage
	// Task is the task message (Input.Task) when it is older than the recent tier; nil
	// when it is in it or there is none.
	Task *ContextMessage
	// Recent are the newest messages, in Seq order.
	Recent []ContextMessage
	// TotalTokens is what the formatted request costs, reply priming included; at most
	// Budget.
	TotalTokens int
	// Budget is the budget the context was built for.
	Budget int
	// Metadata describes the build.
	Metadata Metadata
}

// BuildContext assembles the context of one LLM call from session state. It is a pure
// function of cfg and in (apart from reading the clock when in.Now is zero) and never
// tokenises stored messages: every count comes from in (only the shortened text of an
// elided message is counted, with cfg.Counter). Its cost depends on the budget and the
// number of hits, not on the length of the history: it walks back from the newest
// message only as far as the budget reaches, and finds hits by binary search.
//
// # Budget split and flow
//
// A = Budget − SystemTokens − Costs.Reply is split into shares: summary ⌊A·Summary⌋,
// recent ⌊A·Recent⌋, semantic the rest. The tiers are then filled in this order, each
// passing what it leaves unused to the next:
//
//  1. Summary: included whole when its cost (Tokens + SummaryOverhead) fits its share,
//     else omitted (Metadata.SummaryOmitted). Unused share → recent.
//  2. The newest turn (the newest message; when it is a tool result, back to the
//     assistant message that made the calls) and the task message (Input.Task) are
//     always included: whole when they fit what the summary left of A, else the largest
//     are elided to an equal share of it (head and tail kept, the middle replaced by a
//     note naming the event that holds the whole text; Metadata.Elided). They are paid
//     from the recent share first, then from the semantic share.
//  3. Recent: whole messages from the turn back, stopping at the first that does not
//     fit (the tier is a contiguous run ending at the newest message; reaching the
//     task message takes it into the run). A run may not start with a tool result
//     whose assistant call was cut off: such leading tool messages are dropped.
//     Unused → semantic.
//  4. Semantic: the long-term memories (Input.LongTerm) whole, best first, while they
//     fit (with their message's overhead); then hits best first, skipping messages in the recent tier, the task,
//     repeats, messages without text and messages that do not fit what is left; each
//     costs Tokens plus SemanticPrefix. Unused → recent.
//  5. Recent again: the walk back resumes with what semantic left, stopping at the first
//     message that does not fit or is already a semantic message.
//
// So no budget is lost while a tier that wants it comes later in the order, and the
// total never exceeds Budget. Only when what the summary leaves cannot hold even the
// notes of the elided messages (a budget far below MinContextRoom) are the turn and
// the task left to the recent walk like any other message.
func BuildContext(cfg ContextConfig, in Input) (*Context, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if in.SystemTokens < 0 || (in.Summary != nil && in.Summary.Tokens < 0) {
		return nil, fmt.Errorf("%w: negative token count", ErrInvalid)
	}
	avail := cfg.Budget - in.SystemTokens - cfg.Costs.Reply
	if avail < 0 {
		return nil, fmt.Errorf("%w: system prompt %d + reply priming %d tokens > budget %d",
			ErrBudgetTooSmall, in.SystemTokens, cfg.Costs.Reply, cfg.Budget)
	}
	summaryShare := int(float64(avail) * cfg.Ratios.Summary)
	recentShare := int(float64(avail) * cfg.Ratios.Recent)
	semanticShare := avail - summaryShare - recentShare

	c := &Context{SystemPrompt: in.SystemPrompt, TaskPrompt: in.TaskPrompt, Budget: cfg.Budget}
	md := &c.Metadata
	md.SystemTokens = in.SystemTokens
	md.SummaryShare, md.RecentShare, md.SemanticShare = summaryShare, recentShare, semanticShare

	// 1. Summary.
	left := summaryShare
	if s := in.Summary; s != nil && s.Content != "" {
		if cost := s.Tokens + cfg.Costs.SummaryOverhead; cost <= left {
			sum := *s
			c.Summary = &sum
			md.HasSummary, md.SummaryThrough, md.SummaryTokens = true, s.Through, cost
			left -= cost
		} else {
			md.SummaryOmitted = true
		}
	}

	// 2. The newest turn and the task.
	msgs := in.Messages
	w := recentWalk{msgs: msgs, lo: len(msgs), floor: len(msgs), task: -1}
	if err := w.pin(in.Task, avail-md.SummaryTokens, newElider(cfg.Counter, in.Origin)); err != nil {
		return nil, err
	}
	md.Elided = w.elided

	// 3. Recent, first pass.
	left, err := w.extend(recentShare+left-w.used-w.taskCost, nil)
	if err != nil {
		return nil, err
	}

	// 4. Semantic: the user's long-term memories first, then the hits.
	left += semanticShare
	c.LongTerm, md.LongTermTokens = FitLongTerm(in.LongTerm, in.LongTermOverhead, min(left, semanticShare))
	md.LongTermCount = len(c.LongTerm)
	left -= md.LongTermTokens
	hits := in.Hits
	if hits == nil && in.Search != nil && w.leftOut() {
		hits = in.Search()
	}
	var chosen map[uint64]bool
	if len(hits) > 0 {
		chosen = make(map[uint64]bool, len(hits))
	}
	for _, h := range hits {
		i, ok := findSeq(msgs[:w.lo], h.Seq)
		if !ok || chosen[h.Seq] || msgs[i].Content == "" || i == w.task {
			md.HitsIgnored++
			continue
		}
		m := msgs[i]
		if m.Tokens < 0 {
			return nil, fmt.Errorf("%w: message %d has %d tokens", ErrInvalid, m.Seq, m.Tokens)
		}
		if repeats(m, c.Semantic, msgs[w.lo:]) {
			md.HitsIgnored++
			continue
		}
		cost := m.Tokens + cfg.Costs.SemanticPrefix
		if cost > left {
			continue
		}
		chosen[h.Seq] = true
		left -= cost
		md.SemanticTokens += cost
		c.Semantic = append(c.Semantic, ContextMessage{Message: m, Tier: TierSemantic, Score: h.Score, Cost: cost})
	}
	sort.Slice(c.Semantic, func(a, b int) bool { return c.Semantic[a].Seq < c.Semantic[b].Seq })

	// 5. Recent, second pass with what semantic left.
	if _, err := w.extend(left, chosen); err != nil {
		return nil, err
	}
	c.Recent = make([]ContextMessage, 0, len(msgs)-w.lo)
	for i := w.lo; i < len(msgs); i++ {
		m := w.at(i)
		c.Recent = append(c.Recent, ContextMessage{Message: m, Tier: TierRecent, Cost: m.Tokens})
	}
	if w.task >= 0 && w.task < w.lo {
		c.Task = &ContextMessage{Message: w.taskMsg, Tier: TierTask, Cost: w.taskCost}
		md.TaskTokens = w.taskCost
	}
	md.RecentTokens = w.used

	md.RecentCount, md.SemanticCount = len(c.Recent), len(c.Semantic)
	c.TotalTokens = in.SystemTokens + cfg.Costs.Reply + md.SummaryTokens + md.RecentTokens + md.SemanticTokens + md.TaskTokens + md.LongTermTokens
	md.BuiltAt = in.Now
	if md.BuiltAt.IsZero() {
		md.BuiltAt = time.Now()
	}
	return c, nil
}

// repeats reports whether the context already holds m's text: a semantic message taken
// or a recent one of the same role and content, neither making tool calls. Sessions
// repeat messages word for word (a tool's same answer, a boilerplate reply); a copy in
// the semantic tier costs its tokens and tells the model nothing new.
func repeats(m Message, taken []ContextMessage, recent []Message) bool {
	same := func(o Message) bool {
		return len(o.Content) == len(m.Content) && o.Role == m.Role && len(o.ToolCalls) == 0 && o.Content == m.Content
	}
	if len(m.ToolCalls) > 0 {
		return false
	}
	for _, o := range taken {
		if same(o.Message) {
			return true
		}
	}
	return slices.ContainsFunc(recent, same)
}

// MinContextRoom is the least room, in tokens, the context of a call should have beside
// its system prompt, its summary and the reply priming: what the task and a newest turn
// of a few messages need once elided (their framing and notes, with some text), counted
// with a tokenizer (ByteCounter needs about four times as much). A budget that leaves
// less may lose them (see BuildContext).
const MinContextRoom = 256

// recentWalk is the recent tier being grown backwards: msgs[lo:] are in it and cost
// used. msgs[floor:] is the pinned newest turn; task is the index of the pinned task
// message (-1: none), which costs taskCost until the run reaches it.
type recentWalk struct {
	msgs  []Message
	lo    int
	used  int
	floor int
	// over holds the elided versions of pinned messages, by index.
	over     map[int]Message
	task     int
	taskMsg  Message
	taskCost int
	elided   int
}

// leftOut says whether a message older than the recent run is outside the context (the
// task message, pinned on its own, does not count): only then can a semantic hit add
// one.
func (w *recentWalk) leftOut() bool {
	return w.lo > 1 || (w.lo == 1 && w.task != 0)
}

// at returns message i as the context holds it (elided when it was).
func (w *recentWalk) at(i int) Message {
	if m, ok := w.over[i]; ok {
		return m
	}
	return w.msgs[i]
}

// pin places the newest turn (the newest message, back to the assistant message whose
// calls the trailing tool results answer) and the task message (seq taskSeq, when it is
// older than the turn) within room, eliding the largest of them to an equal share when
// they do not fit whole. When not even their notes fit, nothing is pinned.
func (w *recentWalk) pin(taskSeq uint64, room int, el elider) error {
	n := len(w.msgs)
	start := n - 1
	for start >= 0 && w.msgs[start].Role == "tool" {
		start--
	}
	if start < 0 {
		return nil // nothing but tool results: no turn to keep
	}
	idx := make([]int, 0, n-start+1)
	if taskSeq != 0 {
		// A tool result cannot stand on its own: only another role is pinned as the task.
		if i, ok := findSeq(w.msgs[:start], taskSeq); ok && w.msgs[i].Role != "tool" {
			idx = append(idx, i)
		}
	}
	for i := start; i < n; i++ {
		if i > start && w.msgs[i].Seq <= w.msgs[i-1].Seq {
			return fmt.Errorf("%w: messages out of order at seq %d", ErrInvalid, w.msgs[i].Seq)
		}
		idx = append(idx, i)
	}
	costs := make([]int, len(idx))
	total := 0
	for k, i := range idx {
		if w.msgs[i].Tokens < 0 {
			return fmt.Errorf("%w: message %d has %d tokens", ErrInvalid, w.msgs[i].Seq, w.msgs[i].Tokens)
		}
		costs[k] = w.msgs[i].Tokens
		total += costs[k]
	}
	var over map[int]Message
	elided := 0
	if total > room {
		level := waterLevel(costs, room)
		over = make(map[int]Message)
		total = 0
		for k, i := range idx {
			if costs[k] <= level {
				total += costs[k]
				continue
			}
			m, cut, ok := el.elide(w.msgs[i], level)
			if !ok {
				return nil // the budget cannot hold them: the recent walk decides
			}
			over[i] = m
			if cut {
				elided++
			}
			costs[k] = m.Tokens
			total += m.Tokens
		}
	}
	w.over, w.elided = over, elided
	w.lo, w.floor = start, start
	for k, i := range idx {
		if i < start {
			w.task, w.taskMsg, w.taskCost = i, w.at(i), costs[k]
			continue
		}
		w.used += costs[k]
	}
	return nil
}

// waterLevel returns the largest level L with Σ min(cost, L) ≤ room (L ≥ the largest
// cost when everything fits).
func waterLevel(costs []int, room int) int {
	sorted := append([]int(nil), costs...)
	sort.Ints(sorted)
	for k, c := range sorted {
		rest := len(sorted) - k
		if c*rest > room {
			return max(room, 0) / rest
		}
		room -= c
	}
	return sorted[len(sorted)-1]
}

// extend grows the run backwards within budget, stopping at the first message that
// does not fit or is in skip, then drops leading orphan tool results (never the pinned
// turn). Reaching the pinned task takes it into the run at no further cost. It returns
// the budget left.
func (w *recentWalk) extend(budget int, skip map[uint64]bool) (int, error) {
	for w.lo > 0 {
		i := w.lo - 1
		m := &w.msgs[i]
		if m.Tokens < 0 {
			return 0, fmt.Errorf("%w: message %d has %d tokens", ErrInvalid, m.Seq, m.Tokens)
		}
		if w.lo < len(w.msgs) && m.Seq >= w.msgs[w.lo].Seq {
			return 0, fmt.Errorf("%w: messages out of order at seq %d", ErrInvalid, m.Seq)
		}
		if i == w.task {
			w.used += w.taskCost
			w.task, w.taskCost = -1, 0
			w.lo--
			continue
		}
		if m.Tokens > budget || skip[m.Seq] {
			break
		}
		budget -= m.Tokens
		w.used += m.Tokens
		w.lo--
	}
	// A tool result must follow the assistant message that called it: a run starting
	// with one would be rejected by the API.
	for w.lo < w.floor && w.msgs[w.lo].Role == "tool" {
		budget += w.msgs[w.lo].Tokens
		w.used -= w.msgs[w.lo].Tokens
		w.lo++
	}
	return budget, nil
}

// findSeq finds the message with seq in msgs (sorted by Seq) by binary search.
func findSeq(msgs []Message, seq uint64) (int, bool) {
	i := sort.Search(len(msgs), func(i int) bool { return msgs[i].Seq >= seq })
	return i, i < len(msgs) && msgs[i].Seq == seq
}

// Messages formats the context for the LLM in the seed's order: the system prompt, the
// long-term memories (LongTermMessage), the summary as a system message (SummaryPrefix + content), the semantic messages (each
// SemanticPrefix + content), the task message when it is older than the recent tier,
// then the recent messages verbatim (elided ones as elided), all oldest first, and last
// the task prompt as a system message. Everything before the task prompt is what the
// next call sends again (the history only grows at its end), so it caches as a prefix.
//
// Semantic messages lose their tool linkage (a tool result out of its exchange would be
// rejected by the API): tool calls are dropped and a tool result is sent as a user
// message. Both only lower the cost below what the builder charged.
func (c *Context) Messages() []llm.Message {
	out := make([]llm.Message, 0, 4+len(c.Semantic)+len(c.Recent))
	if c.SystemPrompt != "" {
		out = append(out, llm.Message{Role: "system", Content: c.SystemPrompt})
	}
	if len(c.LongTerm) > 0 {
		out = append(out, LongTermMessage(c.LongTerm))
	}
	if c.Summary != nil {
		out = append(out, llm.Message{Role: "system", Content: SummaryPrefix + c.Summary.Content})
	}
	for _, m := range c.Semantic {
		role := m.Role
		if role == "tool" {
			role = "user"
		}
		out = append(out, llm.Message{Role: role, Content: SemanticPrefix + m.Content})
	}
	if c.Task != nil {
		out = append(out, c.Task.LLM())
	}
	for _, m := range c.Recent {
		out = append(out, m.LLM())
	}
	if c.TaskPrompt != "" {
		out = append(out, llm.Message{Role: "system", Content: c.TaskPrompt})
	}
	return out
}
