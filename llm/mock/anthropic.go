package mock

// The Anthropic-compatible endpoint: POST /v1/messages answers from the same script,
// rule engine and fault injection as /v1/chat/completions, in the Anthropic Messages
// wire format (a JSON message, or a stream of message_start, ping,
// content_block_start/delta/stop, message_delta and message_stop events), so the
// production client (llm/anthropic) is exercised byte for byte.
//
// For rule matching the request is read the way the chat endpoint reads its messages:
// System is the "system" field, User the text of the last user message that has text,
// Tool the content of the last tool_result block, unless a user turn without results
// follows it (as the chat endpoint reads tool messages after the last user message). Like the real API the endpoint
// requires max_tokens, a temperature within [0, 1] (and none but 1 with thinking on), user/assistant roles (consecutive turns of one role are merged
// into one turn, as the real API does), tool_use inputs that are JSON objects, and
// tool_result blocks that answer the tool_use blocks of the assistant turn just before
// them, so a client that gets the shape wrong fails here too.
//
// POST /v1/messages/count_tokens checks a request the same way (without max_tokens) and
// answers {"input_tokens": N}, the count the Messages answer's usage would report.
// Every error on an Anthropic request (a /v1/messages path, or any request carrying an
// anthropic-version header) has the API's shape: {"type":"error","error":{"type":...,
// "message":...}}.
//
// Scripted tool-call arguments that are not a JSON object cannot be sent as a tool_use
// input; they are sent as {"_raw": "<text>"}, the convention llm/anthropic uses for
// the same case.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// anthRequest is the part of a Messages API request the mock reads.
type anthRequest struct {
	Model     string          `json:"model"`
	MaxTokens int             `json:"max_tokens"`
	Stream    bool            `json:"stream"`
	System    json.RawMessage `json:"system"`
	Messages  []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	Tools []struct {
		Name        string          `json:"name"`
		InputSchema json.RawMessage `json:"input_schema"`
	} `json:"tools"`
	ToolChoice json.RawMessage `json:"tool_choice"`
	Thinking   *anthThinking   `json:"thinking"`
	// Temperature is within [0, 1], and 1 (or absent) with thinking on.
	Temperature *float64 `json:"temperature"`
	// inTok is the request's input tokens: the system prompt and every message.
	inTok int
	// bps are the request's cache_control breakpoints, in prompt order; blocks every
	// block's prefix (a breakpoint's lookback reads them).
	bps, blocks []breakpoint
}

// anthBlock is a request content block (text, tool_use or tool_result).
type anthBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ID        string          `json:"id"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	// Thinking and Signature are a thinking block's; Data a redacted_thinking block's.
	Thinking  string `json:"thinking"`
	Signature string `json:"signature"`
	Data      string `json:"data"`
	// CacheControl marks a prompt-cache breakpoint after this block.
	CacheControl json.RawMessage `json:"cache_control"`
}

// anthTurn is one decoded request message.
type anthTurn struct {
	role   string
	blocks []anthBlock
}

// anthBlocks decodes message or tool_result content: a string (one text block), an
// array of blocks, or nothing.
func anthBlocks(raw json.RawMessage) ([]anthBlock, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, err
		}
		return []anthBlock{{Type: "text", Text: s}}, nil
	}
	var bs []anthBlock
	if err := json.Unmarshal(raw, &bs); err != nil {
		return nil, err
	}
	return bs, nil
}

// anthText joins the text blocks of bs with newlines.
func anthText(bs []anthBlock) string {
	var parts []string
	for _, b := range bs {
		if b.Type == "text" {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// decodeAnthRequest decodes and checks a request and returns it with the data rules
// match against; the error is an invalid_request_error message. needMaxTokens is false
// for count_tokens, which takes no max_tokens.
func decodeAnthRequest(body []byte, needMaxTokens bool) (anthRequest, TemplateData, error) {
	var (
		req   anthRequest
		d     TemplateData
		input []string
	)
	if err := json.Unmarshal(body, &req); err != nil {
		return req, d, fmt.Errorf("request is not valid JSON: %w", err)
	}
	var raw struct {
		Tools json.RawMessage `json:"tools"`
	}
	_ = json.Unmarshal(body, &raw) // valid JSON: checked above
	if err := req.Thinking.check(req.MaxTokens); err != nil {
		return req, d, err
	}
	if t := req.Temperature; t != nil {
		switch {
		case *t < 0:
			return req, d, errors.New("temperature: Input should be greater than or equal to 0")
		case *t > 1:
			return req, d, errors.New("temperature: Input should be less than or equal to 1")
		case *t != 1 && req.Thinking.on():
			return req, d, errors.New("`temperature` may only be set to 1 when thinking is enabled. Please consult our documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking#feature-compatibility")
		}
	}
	prefix := newPrefixHasher("anthropic")
	prefix.add(string(raw.Tools))
	if needMaxTokens && req.MaxTokens <= 0 {
		return req, d, errors.New("max_tokens: field required and must be positive")
	}
	if len(req.Messages) == 0 {
		return req, d, errors.New("messages: must not be empty")
	}
	sys, err := anthBlocks(req.System)
	if err != nil {
		return req, d, fmt.Errorf("system: %w", err)
	}
	d.System = anthText(sys)
	req.inTok = approxTokens(d.System)
	running := 0
	mark := func(b anthBlock, tokens int) {
		prefix.add(b.Type, b.Text, string(b.Input), string(b.Content), b.Thinking, b.Data)
		running += tokens
		req.blocks = append(req.blocks, breakpoint{key: prefix.key(), tokens: running, block: len(req.blocks)})
		if len(bytes.TrimSpace(b.CacheControl)) > 0 && string(bytes.TrimSpace(b.CacheControl)) != "null" {
			req.bps = append(req.bps, req.blocks[len(req.blocks)-1])
		}
	}
	for _, b := range sys {
		mark(b, approxTokens(b.Text))
	}
	running = req.inTok
	turns := make([]anthTurn, len(req.Messages))
	for i, m := range req.Messages {
		bs, err := anthBlocks(m.Content)
		if err != nil {
			return req, d, fmt.Errorf("messages.%d.content: %w", i, err)
		}
		running += 3
		for _, b := range bs {
			mark(b, anthTokens([]anthBlock{b}))
		}
		for _, b := range bs {
			if b.Type == "tool_result" {
				if _, err := anthBlocks(b.Content); err != nil {
					return req, d, fmt.Errorf("messages.%d: tool_result content: %w", i, err)
				}
			}
		}
		turns[i] = anthTurn{role: m.Role, blocks: bs}
		req.inTok += 3 + anthTokens(bs)
	}
	turns = mergeAnthTurns(turns)
	if err := checkAnthTurns(turns); err != nil {
		return req, d, err
	}
	if req.Thinking.on() {
		if err := checkThinkingTurns(turns); err != nil {
			return req, d, err
		}
	}
	for _, t := range turns {
		if s := anthText(t.blocks); s != "" {
			input = append(input, s)
		}
		if t.role != "user" {
			continue
		}
		if s := anthText(t.blocks); s != "" {
			d.User = s
			if !slices.ContainsFunc(t.blocks, func(b anthBlock) bool { return b.Type == "tool_result" }) {
				d.Tool = "" // a user turn without results: Tool is what follows it
			}
		}
		for _, b := range t.blocks {
			if b.Type == "tool_result" {
				rbs, _ := anthBlocks(b.Content) // checked above
				d.Tool = anthText(rbs)
				input = append(input, d.Tool)
			}
		}
	}
	d.Input = strings.Join(input, "\n")
	d.All = strings.TrimPrefix(d.System+"\n"+d.Input, "\n")
	d.goalAndStep()
	return req, d, nil
}

// anthTokens estimates the tokens of a message's blocks: text, tool_use inputs and
// tool_result contents.
func anthTokens(bs []anthBlock) int {
	n := 0
	for _, b := range bs {
		switch b.Type {
		case "text":
			n += approxTokens(b.Text)
		case "tool_use":
			n += approxTokens(string(b.Input))
		case "tool_result":
			if rbs, err := anthBlocks(b.Content); err == nil {
				n += anthTokens(rbs)
			}
		}
	}
	return n
}

// mergeAnthTurns joins consecutive turns of the same role into one, as the real API
// does before it checks a conversation.
func mergeAnthTurns(turns []anthTurn) []anthTurn {
	var out []anthTurn
	for _, t := range turns {
		if n := len(out); n > 0 && out[n-1].role == t.role {
			out[n-1].blocks = append(out[n-1].blocks, t.blocks...)
			continue
		}
		out = append(out, anthTurn{role: t.role, blocks: append([]anthBlock(nil), t.blocks...)})
	}
	return out
}

// checkAnthTurns enforces the Messages API's conversation rules on merged turns (so an
// index in its errors counts merged turns): roles are user or assistant, tool_use inputs are objects, and every tool_use of an
// assistant turn is answered by a tool_result in the next turn (and only those).
func checkAnthTurns(turns []anthTurn) error {
	for i, t := range turns {
		if t.role != "user" && t.role != "assistant" {
			return fmt.Errorf("messages.%d.role: must be \"user\" or \"assistant\", not %q", i, t.role)
		}
		uses := map[string]bool{}
		if i > 0 && turns[i-1].role == "assistant" {
			for _, b := range turns[i-1].blocks {
				if b.Type == "tool_use" {
					uses[b.ID] = true
				}
			}
		}
		for j, b := range t.blocks {
			switch b.Type {
			case "tool_use":
				if in := bytes.TrimSpace(b.Input); len(in) == 0 || in[0] != '{' {
					return fmt.Errorf("messages.%d.content.%d.input: must be a JSON object", i, j)
				}
			case "tool_result":
				if !uses[b.ToolUseID] {
					return fmt.Errorf("messages.%d.content.%d: tool_result for tool_use id %q, which the previous assistant turn does not have", i, j, b.ToolUseID)
				}
				delete(uses, b.ToolUseID)
			}
		}
		if t.role == "user" && len(uses) > 0 {
			return fmt.Errorf("messages.%d: tool_use ids were found without tool_result blocks immediately after", i)
		}
	}
	return nil
}

// readAnthRequest reads and decodes a Messages API request body (bounded by
// MaxRequestBytes); on a bad one it answers with an Anthropic-shaped error and reports false.
func readAnthRequest(w http.ResponseWriter, r *http.Request, needMaxTokens bool) (anthRequest, TemplateData, bool) {
	body, err := readBody(r)
	if err != nil {
		writeAnthError(w, http.StatusBadRequest, "read body: "+err.Error(), 0)
		return anthRequest{}, TemplateData{}, false
	}
	if len(body) > MaxRequestBytes {
		writeAnthError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body exceeds %d bytes", MaxRequestBytes), 0)
		return anthRequest{}, TemplateData{}, false
	}
	req, d, err := decodeAnthRequest(body, needMaxTokens)
	if err != nil {
		writeAnthError(w, http.StatusBadRequest, err.Error(), 0)
		return anthRequest{}, TemplateData{}, false
	}
	return req, d, true
}

// messages answers POST /v1/messages.
func (s *Server) messages(w http.ResponseWriter, r *http.Request) {
	req, d, ok := readAnthRequest(w, r, true)
	if !ok {
		return
	}
	var toolNames []string
	for _, t := range req.Tools {
		toolNames = append(toolNames, t.Name)
	}
	forced, callsAllowed, oneCall, err := anthToolChoice(req.ToolChoice, toolNames)
	if err != nil {
		writeAnthError(w, http.StatusBadRequest, err.Error(), 0)
		return
	}
	if forced != "" && req.Thinking.on() {
		writeAnthError(w, http.StatusBadRequest, "Thinking may not be enabled when tool_choice forces tool use.", 0)
		return
	}
	n := s.requests.Add(1)
	rule := s.pick(&d)
	if rule != nil && rule.DelayMS > 0 {
		select {
		case <-time.After(time.Duration(rule.DelayMS) * time.Millisecond):
		case <-r.Context().Done():
			return
		}
	}
	if rule != nil && rule.Status != 0 && rule.Status != http.StatusOK {
		msg := rule.ErrorMessage
		if msg == "" {
			msg = http.StatusText(rule.Status)
		}
		s.cfg.Logger.Debug("mock-llm error answer", "api", "anthropic", "status", rule.Status)
		writeAnthError(w, rule.Status, msg, rule.RetryAfterS)
		return
	}
	model := req.Model
	if model == "" {
		model = s.cfg.ModelName
	}
	if rule != nil && !callsAllowed && len(rule.ToolCalls) > 0 {
		rule = nil // tools are off: the default text answers
	}
	ans, err := s.anthAnswer(rule, d, model, n)
	if err != nil {
		writeAnthError(w, http.StatusInternalServerError, err.Error(), 0)
		return
	}
	if forced != "" && len(ans.calls) == 0 { // a forced tool answers with the text as its input
		args := forcedArgs(ans.content)
		if rule == nil {
			for _, t := range req.Tools {
				if t.Name == forced {
					args = forcedUnscripted(ans.content, t.InputSchema)
					break
				}
			}
		}
		ans.calls = []toolCall{{id: fmt.Sprintf("toolu_mock_%d_0", n), name: forced, args: args}}
		ans.content, ans.finish = "", "tool_use"
	}
	if oneCall && len(ans.calls) > 1 {
		ans.calls = ans.calls[:1]
	}
	if req.Thinking.on() {
		ans.thinking = thinkingText(d)
		ans.outTok += approxTokens(ans.thinking)
	}
	ans.cacheRead, ans.cacheWrite = s.anthCache(req.bps, req.blocks)
	ans.inTok = max(req.inTok-ans.cacheRead-ans.cacheWrite, 0)
	s.cfg.Logger.Debug("mock-llm answer", "api", "anthropic", "model", model, "bytes", len(ans.content), "tool_calls", len(ans.calls), "stream", req.Stream)
	if req.Stream {
		writeAnthStream(w, r, ans)
		return
	}
	if ans.malformed {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"type":"message","content":[`))
		return
	}
	var content []map[string]any
	if ans.thinking != "" {
		content = append(content, map[string]any{"type": "thinking", "thinking": ans.thinking, "signature": thinkingSignature(ans.thinking)})
	}
	if len(ans.calls) == 0 {
		content = append(content, map[string]any{"type": "text", "text": ans.content})
	}
	for _, c := range ans.calls {
		content = append(content, map[string]any{"type": "tool_use", "id": c.id, "name": c.name, "input": json.RawMessage(c.args)})
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"id": ans.id, "type": "message", "role": "assistant", "model": model, "content": content,
		"stop_reason": ans.finish, "stop_sequence": nil,
		"usage": ans.anthUsage(ans.outTok),
	})
}

// countTokens answers POST /v1/messages/count_tokens.
func (s *Server) countTokens(w http.ResponseWriter, r *http.Request) {
	req, _, ok := readAnthRequest(w, r, false)
	if !ok {
		return
	}
	writeJSON(w, http.StatusOK, map[string]int{"input_tokens": req.inTok})
}

// isAnthropic tells whether r is an Anthropic API request, whose errors take the
// Anthropic shape: a /v1/messages path or an anthropic-version header.
func isAnthropic(r *http.Request) bool {
	return r.URL.Path == "/v1/messages" || strings.HasPrefix(r.URL.Path, "/v1/messages/") || r.Header.Get("anthropic-version") != ""
}

// anthAnswer renders what rule (nil: the default) answers to d, in Anthropic terms:
// finish is a stop_reason and each call's args is a JSON object.
func (s *Server) anthAnswer(rule *compiledRule, d TemplateData, model string, n int64) (answer, error) {
	ans := answer{id: fmt.Sprintf("msg_mock_%d", n), model: model, finish: "end_turn"}
	if rule != nil {
		ans.cut, ans.malformed, ans.chunkDelay = rule.CutStream, rule.Malformed, time.Duration(rule.ChunkDelayMS)*time.Millisecond
	}
	if rule != nil && len(rule.ToolCalls) > 0 {
		ans.finish = "tool_use"
		for i, tc := range rule.ToolCalls {
			var args strings.Builder
			if err := rule.args[i].Execute(&args, d); err != nil {
				return answer{}, fmt.Errorf("render scripted tool arguments: %w", err)
			}
			input := anthInput(args.String())
			ans.calls = append(ans.calls, toolCall{id: fmt.Sprintf("toolu_mock_%d_%d", n, i), name: tc.Name, args: input})
			ans.outTok += approxTokens(input) + 3
		}
		return ans, nil
	}
	tmpl := s.fallback
	if rule != nil {
		tmpl = rule.tmpl
	}
	var out strings.Builder
	if err := tmpl.Execute(&out, d); err != nil {
		return answer{}, fmt.Errorf("render scripted response: %w", err)
	}
	ans.content = out.String()
	ans.outTok = approxTokens(ans.content)
	return ans, nil
}

// anthUsage is the Messages API usage object with output tokens out.
func (a answer) anthUsage(out int) map[string]any {
	return map[string]any{"input_tokens": a.inTok, "output_tokens": out,
		"cache_read_input_tokens": a.cacheRead, "cache_creation_input_tokens": a.cacheWrite,
		"cache_creation": map[string]int{"ephemeral_5m_input_tokens": a.cacheWrite, "ephemeral_1h_input_tokens": 0}}
}

// anthInput is the tool_use input for scripted arguments: the compacted object, or
// {"_raw": args} when args is not a JSON object.
func anthInput(args string) string {
	var buf bytes.Buffer
	if t := strings.TrimSpace(args); t != "" && t[0] == '{' && json.Compact(&buf, []byte(t)) == nil {
		return buf.String()
	}
	raw, _ := json.Marshal(map[string]string{"_raw": args}) // a map of strings always encodes
	return string(raw)
}

// writeAnthStream sends the answer as Messages API events: message_start, a ping, a
// text block in word-sized text_delta events (or, for tool calls, one tool_use block
// per call with its input in two input_json_delta fragments), message_delta and
// message_stop. A chunk_delay_ms rule waits before each delta; a cut_stream rule
// stops after the first half of the deltas; a
// malformed rule sends an event whose data is not JSON.
func writeAnthStream(w http.ResponseWriter, r *http.Request, a answer) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	type event struct {
		typ  string
		data map[string]any
	}
	send := func(e event) bool {
		e.data["type"] = e.typ
		b, _ := json.Marshal(e.data)
		if _, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", e.typ, b); err != nil {
			return false
		}
		if flusher != nil {
			flusher.Flush()
		}
		return r.Context().Err() == nil
	}
	start := event{"message_start", map[string]any{"message": map[string]any{
		"id": a.id, "type": "message", "role": "assistant", "model": a.model, "content": []any{},
		"stop_reason": nil, "stop_sequence": nil, "usage": a.anthUsage(1)}}}
	if !send(start) || !send(event{"ping", map[string]any{}}) {
		return
	}
	if a.malformed {
		_, _ = fmt.Fprint(w, "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":\n\n")
		return
	}
	var body []event
	deltas := 0
	blockStart := func(i int, cb map[string]any) {
		body = append(body, event{"content_block_start", map[string]any{"index": i, "content_block": cb}})
	}
	blockDelta := func(i int, d map[string]any) {
		body = append(body, event{"content_block_delta", map[string]any{"index": i, "delta": d}})
		deltas++
	}
	blockStop := func(i int) { body = append(body, event{"content_block_stop", map[string]any{"index": i}}) }
	first := 0
	if a.thinking != "" {
		blockStart(0, map[string]any{"type": "thinking", "thinking": "", "signature": ""})
		for _, piece := range splitWords(a.thinking) {
			blockDelta(0, map[string]any{"type": "thinking_delta", "thinking": piece})
		}
		blockDelta(0, map[string]any{"type": "signature_delta", "signature": thinkingSignature(a.thinking)})
		blockStop(0)
		first = 1
	}
	if len(a.calls) == 0 {
		blockStart(first, map[string]any{"type": "text", "text": ""})
		for _, piece := range splitWords(a.content) {
			blockDelta(first, map[string]any{"type": "text_delta", "text": piece})
		}
		blockStop(first)
	}
	for i, c := range a.calls {
		i += first
		half := len(c.args) / 2
		blockStart(i, map[string]any{"type": "tool_use", "id": c.id, "name": c.name, "input": map[string]any{}})
		blockDelta(i, map[string]any{"type": "input_json_delta", "partial_json": c.args[:half]})
		blockDelta(i, map[string]any{"type": "input_json_delta", "partial_json": c.args[half:]})
		blockStop(i)
	}
	body = append(body,
		event{"message_delta", map[string]any{"delta": map[string]any{"stop_reason": a.finish, "stop_sequence": nil},
			"usage": map[string]int{"output_tokens": a.outTok, "input_tokens": a.inTok,
				"cache_read_input_tokens": a.cacheRead, "cache_creation_input_tokens": a.cacheWrite}}},
		event{"message_stop", map[string]any{}})
	sent := 0
	for _, e := range body {
		if e.typ == "content_block_delta" {
			if a.cut && sent >= (deltas+1)/2 {
				return // the handler returns mid-stream: the client sees the body end without message_stop
			}
			sent++
			if !a.pause(r) {
				return
			}
		}
		if !send(e) {
			return
		}
	}
}

// anthAuth is auth for the Anthropic endpoint: with a token configured, a request must
// carry it as x-api-key or as a bearer token.
func (s *Server) anthAuth(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.cfg.Token != "" && r.Header.Get("x-api-key") != s.cfg.Token && r.Header.Get("Authorization") != "Bearer "+s.cfg.Token {
			writeAnthError(w, http.StatusUnauthorized, "missing or wrong x-api-key", 0)
			return
		}
		h(w, r)
	}
}

// anthErrorType is the Anthropic error type of an HTTP status.
func anthErrorType(status int) string {
	switch {
	case status == http.StatusUnauthorized:
		return "authentication_error"
	case status == http.StatusForbidden:
		return "permission_error"
	case status == http.StatusNotFound:
		return "not_found_error"
	case status == http.StatusRequestEntityTooLarge:
		return "request_too_large"
	case status == http.StatusTooManyRequests:
		return "rate_limit_error"
	case status == 529:
		return "overloaded_error"
	case status >= 500:
		return "api_error"
	}
	return "invalid_request_error"
}

// writeAnthError writes an Anthropic error body ({"type":"error","error":{...}}), with
// a Retry-After header when retryAfter > 0.
func writeAnthError(w http.ResponseWriter, status int, msg string, retryAfter int) {
	if retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(retryAfter))
	}
	writeJSON(w, status, map[string]any{"type": "error", "error": map[string]any{"type": anthErrorType(status), "message": msg}})
}
