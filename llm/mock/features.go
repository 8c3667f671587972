package mock

// What current models add to a call, served the way the real APIs serve it:
//
//   - Prompt caching. OpenAI caches every prompt prefix on its own: a request whose
//     leading messages were sent before reports them as
//     usage.prompt_tokens_details.cached_tokens (whole 128-token chunks, prompts of at
//     least Config.CacheMinTokens only). Anthropic caches only up to its cache_control
//     breakpoints: a breakpoint whose prefix (tools, system, messages up to the marked
//     block) was seen before is a cache read (usage.cache_read_input_tokens), the rest
//     up to the last breakpoint a cache write (usage.cache_creation_input_tokens), and
//     usage.input_tokens counts only what is left, as the real API does.
//   - Reasoning. OpenAI's reasoning_effort makes the answer spend reasoning tokens
//     (usage.completion_tokens_details.reasoning_tokens, counted in completion_tokens).
//     Anthropic's thinking {"type":"enabled","budget_tokens":N} (N >= 1024 and below
//     max_tokens) puts a signed thinking block first in the answer; a later request
//     with thinking on must send it back unchanged at the start of an assistant turn
//     that called tools, or gets the API's 400.
//   - response_format. A json_schema format must name the schema and give it as an
//     object; the scripted answer is returned as it is (script JSON for such calls). An
//     unscripted call (no rule matched, and a default that is not a JSON object)
//     answers JSON, as the model would: the smallest instance of the schema (see
//     minimalInstance), or {} for json_object.
//   - What the Chat Completions API refuses, it refuses here too, with its status and
//     error (invalid_request_error with param and code): max_tokens for a reasoning
//     model (o-series, gpt-5: code unsupported_parameter), a reasoning_effort it does
//     not know (invalid_value), a tool message that does not answer a call of the
//     assistant message before it, and an assistant message whose tool calls are not
//     all answered by the tool messages right after it.
//   - tool_choice. A named tool must be one of the request's tools; when a call is
//     forced (a named tool; "required"/"any": the first tool) and the rule answers
//     text, the text becomes that tool's arguments (a JSON object, else {}; an
//     unscripted call: the smallest instance of the tool's schema), which is how a
//     forced structured-output tool answers. parallel_tool_calls false
//     (Anthropic: disable_parallel_tool_use) keeps only the first scripted call.

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"regexp"
	"slices"
	"strings"
	"sync"
)

// DefaultCacheMinTokens is the smallest prompt (OpenAI) or cached prefix (Anthropic)
// the mock caches, as the real APIs do (1024 tokens).
const DefaultCacheMinTokens = 1024

// maxCachedPrefixes bounds the prompt cache; when it is full it starts over.
const maxCachedPrefixes = 1 << 14

// promptCache remembers prefixes (by hash) and their token counts.
type promptCache struct {
	mu   sync.Mutex
	seen map[string]int
}

// hit reports whether prefix key was cached before; store caches it.
func (c *promptCache) hit(key string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.seen[key]
	return ok
}

func (c *promptCache) store(key string, tokens int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.seen == nil || len(c.seen) >= maxCachedPrefixes {
		c.seen = make(map[string]int)
	}
	c.seen[key] = tokens
}

// prefixHasher hashes a growing prefix: key returns the hash of everything added so far.
type prefixHasher struct{ h hash.Hash }

func newPrefixHasher(api string) *prefixHasher {
	p := &prefixHasher{h: sha256.New()}
	p.add(api)
	return p
}

func (p *prefixHasher) add(parts ...string) {
	for _, s := range parts {
		fmt.Fprintf(p.h, "%d:%s;", len(s), s)
	}
}

func (p *prefixHasher) key() string { return string(p.h.Sum(nil)) }

// openAICached is the cached_tokens of an OpenAI prompt whose message prefixes have
// keys (in order) and cumulative token counts toks, of total promptTok tokens; it then
// caches every prefix.
func (s *Server) openAICached(keys []string, toks []int, promptTok int) int {
	cached := 0
	for i := len(keys) - 1; i >= 0; i-- {
		if s.cache.hit(keys[i]) {
			cached = toks[i]
			break
		}
	}
	for i, k := range keys {
		s.cache.store(k, toks[i])
	}
	if promptTok < s.cfg.CacheMinTokens {
		return 0
	}
	return min(cached, promptTok) / 128 * 128
}

// breakpoint is an Anthropic cache_control mark (or a block a mark may look back to):
// the prefix up to it, its tokens and the block's position in the prompt.
type breakpoint struct {
	key    string
	tokens int
	block  int
}

// anthLookback is how many blocks before a breakpoint the API checks for a cached
// prefix: a breakpoint on the newest block still reads what an earlier call cached at
// its own newest block.
const anthLookback = 20

// anthCache turns breakpoints into (cache read, cache write) token counts and caches
// every breakpoint's prefix. A breakpoint reads the longest prefix cached at it or at
// one of the anthLookback blocks before it (blocks are every block's prefix, in order).
func (s *Server) anthCache(bps, blocks []breakpoint) (read, write int) {
	if len(bps) == 0 {
		return 0, 0
	}
	last := bps[len(bps)-1]
	if last.tokens < s.cfg.CacheMinTokens {
		return 0, 0
	}
	for i := len(bps) - 1; i >= 0 && read == 0; i-- {
		for j := bps[i].block; j >= 0 && j >= bps[i].block-anthLookback; j-- {
			if s.cache.hit(blocks[j].key) {
				read = blocks[j].tokens
				break
			}
		}
	}
	for _, bp := range bps {
		s.cache.store(bp.key, bp.tokens)
	}
	return read, last.tokens - read
}

// reasoningModels are the OpenAI models that reason: the o-series and gpt-5 (but not
// gpt-5-chat).
var reasoningModels = regexp.MustCompile(`^(o[1-9]($|-)|gpt-5($|[-.](?:[0-9]|mini|nano|pro|codex)))`)

// reasoningEfforts are the reasoning_effort values the API accepts.
var reasoningEfforts = []string{"none", "minimal", "low", "medium", "high", "xhigh"}

// check reports what the API refuses in a chat request (the checks features.go lists).
func (r *chatRequest) check() *apiError {
	if len(r.MaxTokens) > 0 && string(r.MaxTokens) != "null" && reasoningModels.MatchString(r.Model) {
		return &apiError{param: "max_tokens", code: "unsupported_parameter",
			msg: "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead."}
	}
	if e := r.ReasoningEffort; e != "" && !slices.Contains(reasoningEfforts, e) {
		return &apiError{param: "reasoning_effort", code: "invalid_value",
			msg: fmt.Sprintf("Invalid value: '%s'. Supported values are: 'none', 'minimal', 'low', 'medium', 'high', and 'xhigh'.", e)}
	}
	// open holds the ids of the last assistant message's tool calls not answered yet,
	// while only tool messages follow it; call is that message's index.
	var open map[string]bool
	call := -1
	unanswered := func() *apiError {
		var ids []string
		for _, tc := range r.Messages[call].ToolCalls {
			if open[tc.ID] {
				ids = append(ids, tc.ID)
			}
		}
		return &apiError{param: fmt.Sprintf("messages.[%d].role", call),
			msg: "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: " + strings.Join(ids, ", ")}
	}
	for i, m := range r.Messages {
		if m.Role == "tool" {
			if call < 0 {
				return &apiError{param: fmt.Sprintf("messages.[%d].role", i),
					msg: "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'."}
			}
			if !open[m.ToolCallID] {
				return &apiError{param: fmt.Sprintf("messages.[%d].tool_call_id", i),
					msg: fmt.Sprintf("Invalid parameter: 'tool_call_id' of '%s' not found in 'tool_calls' of previous message.", m.ToolCallID)}
			}
			delete(open, m.ToolCallID)
			continue
		}
		if len(open) > 0 {
			return unanswered()
		}
		open, call = nil, -1
		if m.Role == "assistant" && len(m.ToolCalls) > 0 {
			open, call = map[string]bool{}, i
			for _, tc := range m.ToolCalls {
				open[tc.ID] = true
			}
		}
	}
	if len(open) > 0 {
		return unanswered()
	}
	return nil
}

// reasoningTokens is what an answer spends thinking at an OpenAI reasoning_effort.
func reasoningTokens(effort string) int {
	switch effort {
	case "minimal", "none", "":
		return 0
	case "low":
		return 64
	case "medium":
		return 192
	}
	return 512 // high, xhigh, max
}

// responseFormat is an OpenAI response_format.
type responseFormat struct {
	Type       string `json:"type"`
	JSONSchema *struct {
		Name   string          `json:"name"`
		Schema json.RawMessage `json:"schema"`
	} `json:"json_schema"`
}

var schemaName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// check reports a response_format the real API rejects.
func (f *responseFormat) check() error {
	if f == nil {
		return nil
	}
	switch f.Type {
	case "text", "json_object":
		return nil
	case "json_schema":
		if f.JSONSchema == nil || !schemaName.MatchString(f.JSONSchema.Name) {
			return errors.New("response_format.json_schema.name: required, letters, digits, '_' and '-' only, at most 64")
		}
		if s := strings.TrimSpace(string(f.JSONSchema.Schema)); s != "" && !strings.HasPrefix(s, "{") {
			return errors.New("response_format.json_schema.schema: must be a JSON Schema object")
		}
		return nil
	}
	return fmt.Errorf("response_format.type: %q is not one of text, json_object, json_schema", f.Type)
}

// unscripted is what a call with this response_format answers when no rule matched and
// the script's default is text: JSON, as a model would answer (the smallest instance of
// a json_schema, {} for json_object), unless the default already is a JSON object.
func (f *responseFormat) unscripted(text string) string {
	if f == nil || (f.Type != "json_schema" && f.Type != "json_object") {
		return text
	}
	var obj map[string]any
	if json.Unmarshal([]byte(text), &obj) == nil {
		return text // the script's default is JSON already
	}
	if f.Type == "json_object" || f.JSONSchema == nil {
		return "{}"
	}
	return minimalInstance(f.JSONSchema.Schema)
}

// forcedUnscripted is the tool input of a forced call no rule scripted: what forcedArgs
// finds in the default text, else (a model forced to call a tool answers its schema)
// the smallest object valid against the tool's schema.
func forcedUnscripted(text string, schema json.RawMessage) string {
	if args := forcedArgs(text); args != "{}" {
		return args
	}
	if args := minimalInstance(schema); strings.HasPrefix(args, "{") {
		return args
	}
	return "{}"
}

// forcedArgs is the tool input a forced tool call gets from a text answer: the text
// when it is a JSON object, else the object of a ```json fence or the outermost {...}
// in it (what a model asked for the object would have put in the call), else {}.
func forcedArgs(text string) string {
	t := strings.TrimSpace(text)
	candidates := []string{t}
	if _, rest, ok := strings.Cut(t, "```json"); ok {
		if body, _, ok := strings.Cut(rest, "```"); ok {
			candidates = append(candidates, strings.TrimSpace(body))
		}
	}
	if i, j := strings.Index(t, "{"), strings.LastIndex(t, "}"); i >= 0 && j > i {
		candidates = append(candidates, t[i:j+1])
	}
	for _, c := range candidates {
		var obj map[string]any
		if strings.HasPrefix(c, "{") && json.Unmarshal([]byte(c), &obj) == nil {
			return c
		}
	}
	return "{}"
}

// openAIToolChoice reads an OpenAI tool_choice: the forced function ("" for none) and
// whether calls are allowed at all.
func openAIToolChoice(raw json.RawMessage, tools []string) (forced string, allowed bool, err error) {
	t := strings.TrimSpace(string(raw))
	if t == "" || t == "null" {
		return "", true, nil
	}
	var mode string
	if json.Unmarshal(raw, &mode) == nil {
		switch mode {
		case "auto":
			return "", true, nil
		case "none":
			return "", false, nil
		case "required":
			if len(tools) == 0 {
				return "", false, errors.New("tool_choice: 'required' needs tools")
			}
			return tools[0], true, nil // a text answer becomes a call of the first tool
		}
		return "", false, fmt.Errorf("tool_choice: %q is not one of none, auto, required", mode)
	}
	var named struct {
		Type     string `json:"type"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if err := json.Unmarshal(raw, &named); err != nil || named.Type != "function" {
		return "", false, errors.New(`tool_choice: want "none", "auto", "required" or {"type":"function","function":{"name":...}}`)
	}
	for _, n := range tools {
		if n == named.Function.Name {
			return n, true, nil
		}
	}
	return "", false, fmt.Errorf("tool_choice: function %q is not among the request's tools", named.Function.Name)
}

// anthToolChoice reads an Anthropic tool_choice the same way; disableParallel reports
// disable_parallel_tool_use.
func anthToolChoice(raw json.RawMessage, tools []string) (forced string, allowed, disableParallel bool, err error) {
	if t := strings.TrimSpace(string(raw)); t == "" || t == "null" {
		return "", true, false, nil
	}
	var tc struct {
		Type                   string `json:"type"`
		Name                   string `json:"name"`
		DisableParallelToolUse bool   `json:"disable_parallel_tool_use"`
	}
	if err := json.Unmarshal(raw, &tc); err != nil {
		return "", false, false, errors.New("tool_choice: must be an object")
	}
	switch tc.Type {
	case "auto":
		return "", true, tc.DisableParallelToolUse, nil
	case "none":
		return "", false, false, nil
	case "any":
		if len(tools) == 0 {
			return "", false, false, errors.New("tool_choice: 'any' needs tools")
		}
		return tools[0], true, tc.DisableParallelToolUse, nil // a text answer becomes a call of the first tool
	case "tool":
		for _, n := range tools {
			if n == tc.Name {
				return n, true, tc.DisableParallelToolUse, nil
			}
		}
		return "", false, false, fmt.Errorf("tool_choice.name: tool %q is not among the request's tools", tc.Name)
	}
	return "", false, false, fmt.Errorf("tool_choice.type: %q is not one of auto, any, tool, none", tc.Type)
}

// thinkingSignature is the mock's signature of a thinking text: a client that alters
// the block, or makes one up, fails the check on the next turn.
func thinkingSignature(thinking string) string {
	sum := sha256.Sum256([]byte("fathom-mock-thinking\x00" + thinking))
	return base64.StdEncoding.EncodeToString(sum[:])
}

// thinkingText is what the mock "thinks" before answering d.
func thinkingText(d TemplateData) string {
	q := d.User
	if d.Tool != "" {
		q = d.Tool
	}
	if len(q) > 80 {
		q = q[:80]
	}
	return "The request is: " + strings.TrimSpace(q) + ". I answer as scripted."
}

// anthThinking is a request's extended thinking setting.
type anthThinking struct {
	Type         string `json:"type"`
	BudgetTokens int    `json:"budget_tokens"`
}

// check reports a thinking setting the real API rejects.
func (t *anthThinking) check(maxTokens int) error {
	if t == nil || t.Type == "" || t.Type == "disabled" {
		return nil
	}
	if t.Type != "enabled" {
		return fmt.Errorf("thinking.type: %q is not one of enabled, disabled", t.Type)
	}
	if t.BudgetTokens < 1024 {
		return errors.New("thinking.enabled.budget_tokens: Input should be greater than or equal to 1024")
	}
	if maxTokens > 0 && t.BudgetTokens >= maxTokens {
		return errors.New("`max_tokens` must be greater than `thinking.budget_tokens`")
	}
	return nil
}

func (t *anthThinking) on() bool { return t != nil && t.Type == "enabled" }

// checkThinkingTurns enforces what the real API requires with thinking on: the last
// assistant turn, when it called tools, starts with a thinking or redacted_thinking
// block, and every thinking block carries its own signature unchanged.
func checkThinkingTurns(turns []anthTurn) error {
	for _, t := range turns {
		for _, b := range t.blocks {
			if b.Type == "thinking" && b.Signature != thinkingSignature(b.Thinking) {
				return errors.New("messages: invalid `signature` in `thinking` block")
			}
		}
	}
	for i := len(turns) - 1; i >= 0; i-- {
		t := turns[i]
		if t.role != "assistant" {
			continue
		}
		uses := false
		for _, b := range t.blocks {
			uses = uses || b.Type == "tool_use"
		}
		if uses && (len(t.blocks) == 0 || (t.blocks[0].Type != "thinking" && t.blocks[0].Type != "redacted_thinking")) {
			return fmt.Errorf("messages.%d.content.0.type: Expected `thinking` or `redacted_thinking`, but found `%s`. When `thinking` is enabled, a final `assistant` message must start with a thinking block", i, t.blocks[0].Type)
		}
		return nil
	}
	return nil
}
