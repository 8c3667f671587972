// Package mock is a scripted OpenAI-compatible model server: the built-in demo model of
// `fathom run` and the model of every test. It serves GET /v1/models,
// POST /v1/chat/completions (JSON or a stream of chunks ending in "data: [DONE]"),
// GET /v1/models/{id}, POST /v1/messages (the same script in Anthropic's Messages
// format, JSON or SSE), POST /v1/messages/count_tokens and POST /v1/embeddings (deterministic local embeddings, see Embed; float or base64) over
// real HTTP, so the production clients (llm/openai, llm/anthropic) are exercised byte
// for byte; only the answers are scripted. What the real APIs refuse is refused here
// too, with their status and error shape (see features.go and anthropic.go; an unknown
// model id is a 404), so a client that sends it fails against the mock as it would in
// production.
//
// A script is JSON:
//
//	{"rules":[
//	  {"system_match":"FATHOM-ROLE: orchestrator","response":"{\"steps\":[...]}"},
//	  {"match":"Step: .*","response":"done: {{.Step}}","delay_ms":50},
//	  {"match":".*","status":429,"error_message":"slow down","retry_after_s":1,"times":2}
//	],"default":"I have nothing scripted for that."}
//
// The first rule whose regular expressions match (match: the last user message;
// system_match: the system message; tool_match: the last tool result) answers, with
// text or, when it has tool_calls, with tool calls ({"name", "arguments"} where
// arguments is a template of the JSON text). times limits how often a rule fires (0 =
// always). response is a text/template with .Goal and .Step (from the "Goal: " and
// "Step: " lines of the user message, else of the system message; a "Current step: "
// line when there is no "Step: " line), .User, .System,
// .Tool, .All, .Input (see TemplateData), .N (1-based count of this rule's hits) and the
// functions json, find and findAll (see funcs).
package mock

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/template"
	"time"

	"github.com/fathom-agents/fathom/memory/hashembed"
)

// MaxRequestBytes bounds a chat request body.
const MaxRequestBytes = 4 << 20

// Rule is one scripted answer.
type Rule struct {
	// Match is a regular expression matched against the last user message ("" = any).
	Match string `json:"match,omitempty"`
	// SystemMatch is a regular expression matched against the system message ("" = any).
	SystemMatch string `json:"system_match,omitempty"`
	// ToolMatch is a regular expression matched against the last tool message (a tool
	// result); a rule with it never matches a conversation without tool results.
	ToolMatch string `json:"tool_match,omitempty"`
	// ContextMatch is a regular expression matched against the whole conversation: every
	// message's content, joined by newlines ("" = any).
	ContextMatch string `json:"context_match,omitempty"`
	// ToolCalls, when set, makes the answer a set of tool calls instead of text.
	ToolCalls []ToolCallRule `json:"tool_calls,omitempty"`
	// Response is the answer's text/template.
	Response string `json:"response,omitempty"`
	// Status, when not 0 or 200, makes the rule answer with that HTTP error.
	Status int `json:"status,omitempty"`
	// ErrorMessage is the error body's message for Status.
	ErrorMessage string `json:"error_message,omitempty"`
	// RetryAfterS sets a Retry-After header (seconds) on error answers.
	RetryAfterS int `json:"retry_after_s,omitempty"`
	// DelayMS delays the answer (to test timeouts and in-flight crashes).
	DelayMS int `json:"delay_ms,omitempty"`
	// Times limits how many requests the rule answers; 0 means unlimited.
	Times int `json:"times,omitempty"`
	// CutStream makes a streamed answer stop halfway, without "data: [DONE]".
	CutStream bool `json:"cut_stream,omitempty"`
	// ChunkDelayMS makes a streamed answer slow: it waits that long before each delta
	// (to watch an answer grow).
	ChunkDelayMS int `json:"chunk_delay_ms,omitempty"`
	// Malformed makes the answer invalid JSON (the body, or a stream chunk).
	Malformed bool `json:"malformed,omitempty"`
}

// ToolCallRule is one scripted tool call.
type ToolCallRule struct {
	// Name is the tool to call.
	Name string `json:"name"`
	// Arguments is a text/template producing the arguments' JSON text (sent as is, so a
	// script can send invalid arguments on purpose).
	Arguments string `json:"arguments"`
}

// Script is an ordered list of rules and a default answer.
type Script struct {
	// Rules are tried in order.
	Rules []Rule `json:"rules"`
	// Default answers requests no rule matches.
	Default string `json:"default,omitempty"`
}

// ParseScript decodes and checks a JSON script. Unknown fields are errors, so a typo does
// not silently change a test.
func ParseScript(data []byte) (Script, error) {
	var s Script
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return Script{}, fmt.Errorf("mock script: %w", err)
	}
	if _, err := compile(s); err != nil {
		return Script{}, err
	}
	return s, nil
}

// LoadScript reads a JSON script file.
func LoadScript(path string) (Script, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Script{}, fmt.Errorf("mock script: %w", err)
	}
	s, err := ParseScript(data)
	if err != nil {
		return Script{}, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

type compiledRule struct {
	Rule
	match, system, tool *regexp.Regexp
	context             *regexp.Regexp
	tmpl                *template.Template
	args                []*template.Template
	hits                atomic.Int64
}

// funcs are the functions response and argument templates may call: json quotes a
// string for embedding in JSON; find returns the first match of a regular expression
// in a text (its first group when it has one; "" for none); findAll returns every
// match (or first group) once, in order of appearance.
var funcs = template.FuncMap{
	"json": func(s string) (string, error) {
		b, err := json.Marshal(s)
		return string(b), err
	},
	"find": func(pattern, text string) (string, error) {
		re, err := cachedRegexp(pattern)
		if err != nil {
			return "", err
		}
		m := re.FindStringSubmatch(text)
		switch {
		case m == nil:
			return "", nil
		case len(m) > 1:
			return m[1], nil
		}
		return m[0], nil
	},
	"findAll": func(pattern, text string) ([]string, error) {
		re, err := cachedRegexp(pattern)
		if err != nil {
			return nil, err
		}
		var out []string
		seen := map[string]bool{}
		for _, m := range re.FindAllStringSubmatch(text, -1) {
			v := m[0]
			if len(m) > 1 {
				v = m[1]
			}
			if !seen[v] {
				seen[v] = true
				out = append(out, v)
			}
		}
		return out, nil
	},
}

// regexps caches the expressions find and findAll compile (a script uses a handful).
var regexps sync.Map

func cachedRegexp(pattern string) (*regexp.Regexp, error) {
	if re, ok := regexps.Load(pattern); ok {
		return re.(*regexp.Regexp), nil
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		return nil, err
	}
	regexps.Store(pattern, re)
	return re, nil
}

// Validate reports a rule New would refuse: a pattern that does not compile, a template
// that does not parse.
func (s Script) Validate() error {
	_, err := compile(s)
	return err
}

func compile(s Script) ([]*compiledRule, error) {
	out := make([]*compiledRule, len(s.Rules))
	for i, r := range s.Rules {
		c := &compiledRule{Rule: r}
		var err error
		if r.Match != "" {
			if c.match, err = regexp.Compile(r.Match); err != nil {
				return nil, fmt.Errorf("mock script: rule %d match: %w", i, err)
			}
		}
		if r.SystemMatch != "" {
			if c.system, err = regexp.Compile(r.SystemMatch); err != nil {
				return nil, fmt.Errorf("mock script: rule %d system_match: %w", i, err)
			}
		}
		if r.ToolMatch != "" {
			if c.tool, err = regexp.Compile(r.ToolMatch); err != nil {
				return nil, fmt.Errorf("mock script: rule %d tool_match: %w", i, err)
			}
		}
		if r.ContextMatch != "" {
			if c.context, err = regexp.Compile(r.ContextMatch); err != nil {
				return nil, fmt.Errorf("mock script: rule %d context_match: %w", i, err)
			}
		}
		for j, tc := range r.ToolCalls {
			if tc.Name == "" {
				return nil, fmt.Errorf("mock script: rule %d tool call %d has no name", i, j)
			}
			at, err := template.New(fmt.Sprint("rule", i, "call", j)).Funcs(funcs).Parse(tc.Arguments)
			if err != nil {
				return nil, fmt.Errorf("mock script: rule %d tool call %d arguments: %w", i, j, err)
			}
			c.args = append(c.args, at)
		}
		if c.tmpl, err = template.New(fmt.Sprint("rule", i)).Funcs(funcs).Parse(r.Response); err != nil {
			return nil, fmt.Errorf("mock script: rule %d response: %w", i, err)
		}
		if r.Status != 0 && (r.Status < 100 || r.Status > 599) {
			return nil, fmt.Errorf("mock script: rule %d: status %d is not an HTTP status", i, r.Status)
		}
		out[i] = c
	}
	return out, nil
}

// Config configures a Server.
type Config struct {
	// Script is what the server answers.
	Script Script
	// Logger receives one debug line per request. Nil discards.
	Logger *slog.Logger
	// Token, when set, is the bearer token every request must carry.
	Token string
	// ModelName is listed by /v1/models and reported in answers. Default "fathom-mock".
	ModelName string
	// CacheMinTokens is the smallest prompt (OpenAI) or cached prefix (Anthropic) the
	// prompt cache serves (see features.go). 0 means DefaultCacheMinTokens; a negative
	// value caches any size.
	CacheMinTokens int
	// Record, when positive, keeps the bodies of the newest Record chat and messages
	// requests for Recorded (tests check what a client sent).
	Record int
}

// Server is the scripted model. It is safe for concurrent use.
type Server struct {
	cfg      Config
	rules    []*compiledRule
	fallback *template.Template
	requests atomic.Int64
	mu       sync.Mutex // serialises rule selection so Times is exact
	cache    promptCache
	recMu    sync.Mutex
	recorded []RecordedRequest
}

// New returns a server for cfg. It panics on a script ParseScript would reject; use
// ParseScript or LoadScript for scripts from outside the program.
func New(cfg Config) *Server {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.ModelName == "" {
		cfg.ModelName = "fathom-mock"
	}
	if cfg.CacheMinTokens == 0 {
		cfg.CacheMinTokens = DefaultCacheMinTokens
	}
	rules, err := compile(cfg.Script)
	if err != nil {
		panic(err)
	}
	fb, err := template.New("default").Funcs(funcs).Parse(cfg.Script.Default)
	if err != nil {
		panic(fmt.Errorf("mock script: default: %w", err))
	}
	return &Server{cfg: cfg, rules: rules, fallback: fb}
}

// Requests is the number of chat completion requests served so far.
func (s *Server) Requests() int { return int(s.requests.Load()) }

// Handler returns the HTTP API.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/models", s.modelsAuth(s.models))
	mux.HandleFunc("GET /v1/models/{id}", s.modelsAuth(s.model))
	mux.HandleFunc("POST /v1/chat/completions", s.auth(s.record(s.chat)))
	mux.HandleFunc("POST /v1/messages", s.anthAuth(s.record(s.messages)))
	mux.HandleFunc("POST /v1/messages/count_tokens", s.anthAuth(s.countTokens))
	mux.HandleFunc("POST /v1/embeddings", s.auth(s.embeddings))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		msg := "unknown endpoint " + r.Method + " " + r.URL.Path
		if isAnthropic(r) {
			writeAnthError(w, http.StatusNotFound, msg, 0)
			return
		}
		writeError(w, http.StatusNotFound, "invalid_request_error", msg, 0)
	})
	return mux
}

func (s *Server) auth(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.cfg.Token != "" && r.Header.Get("Authorization") != "Bearer "+s.cfg.Token {
			writeError(w, http.StatusUnauthorized, "authentication_error", "missing or wrong bearer token", 0)
			return
		}
		h(w, r)
	}
}

// modelsAuth is auth for the model listing, which both APIs' clients call: an Anthropic
// request (see isAnthropic) is checked and answered as the Messages endpoint's.
func (s *Server) modelsAuth(h http.HandlerFunc) http.HandlerFunc {
	openai, anthropic := s.auth(h), s.anthAuth(h)
	return func(w http.ResponseWriter, r *http.Request) {
		if isAnthropic(r) {
			anthropic(w, r)
			return
		}
		openai(w, r)
	}
}

// modelCreated is the creation time the mock reports for every model.
var modelCreated = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// modelObject is model id in the shape of r's API: OpenAI's {"id","object":"model",...}
// or Anthropic's {"type":"model","id","display_name","created_at"}.
func modelObject(r *http.Request, id string) map[string]any {
	if isAnthropic(r) {
		return map[string]any{"type": "model", "id": id, "display_name": id, "created_at": modelCreated.Format(time.RFC3339)}
	}
	return map[string]any{"id": id, "object": "model", "created": modelCreated.Unix(), "owned_by": "fathom"}
}

// models answers GET /v1/models: the configured model, as a list in r's API shape.
func (s *Server) models(w http.ResponseWriter, r *http.Request) {
	m := modelObject(r, s.cfg.ModelName)
	if isAnthropic(r) {
		writeJSON(w, http.StatusOK, map[string]any{"data": []any{m}, "has_more": false, "first_id": s.cfg.ModelName, "last_id": s.cfg.ModelName})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": []any{m}})
}

// knownModels are the ids GET /v1/models/{id} finds besides Config.ModelName: the
// vendors' model families (the mock answers chat requests for any model name).
var knownModels = regexp.MustCompile(`^(gpt-|chatgpt-|o[1-9]|text-embedding-|claude-|fathom-mock)`)

// model answers GET /v1/models/{id}: the model in r's API shape when the mock knows the
// id (Config.ModelName or a name of the vendors' model families, see knownModels), else
// the API's 404 (OpenAI: code model_not_found; Anthropic: not_found_error).
func (s *Server) model(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if id != s.cfg.ModelName && !knownModels.MatchString(id) {
		if isAnthropic(r) {
			writeAnthError(w, http.StatusNotFound, "model: "+id, 0)
			return
		}
		writeInvalid(w, &apiError{status: http.StatusNotFound, code: "model_not_found",
			msg: "The model `" + id + "` does not exist or you do not have access to it."})
		return
	}
	writeJSON(w, http.StatusOK, modelObject(r, id))
}

type chatRequest struct {
	Model           string `json:"model"`
	Stream          bool   `json:"stream"`
	ReasoningEffort string `json:"reasoning_effort"`
	// MaxTokens is the legacy max_tokens, which reasoning models refuse.
	MaxTokens         json.RawMessage `json:"max_tokens"`
	ResponseFormat    *responseFormat `json:"response_format"`
	ToolChoice        json.RawMessage `json:"tool_choice"`
	ParallelToolCalls *bool           `json:"parallel_tool_calls"`
	Tools             []struct {
		Function struct {
			Name       string          `json:"name"`
			Parameters json.RawMessage `json:"parameters"`
		} `json:"function"`
	} `json:"tools"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	Messages []struct {
		Role string `json:"role"`
		// Content is a string, null, or an array of content parts (see chatContent).
		Content json.RawMessage `json:"content"`
		// ToolCallID is the call a tool message answers.
		ToolCallID string `json:"tool_call_id"`
		ToolCalls  []struct {
			ID       string `json:"id"`
			Function struct {
				Name      string `json:"name"`
				Arguments string `json:"arguments"`
			} `json:"function"`
		} `json:"tool_calls"`
	} `json:"messages"`
}

// TemplateData is what a rule's response template sees.
type TemplateData struct {
	// Goal and Step are the user message's "Goal: " and "Step: " lines.
	Goal, Step string
	// User is the last user message; System the system messages (joined by newlines);
	// Tool the last tool message (a tool result) after the last user message.
	User, System, Tool string
	// All is every message's content, joined by newlines (what context_match reads).
	All string
	// Input is the content of every message but the system ones, joined by newlines:
	// what the conversation carries besides the prompt (a demo answer that cites paths
	// reads them here, not from the prompt's examples).
	Input string
	// N is how many times this rule has answered, including this request.
	N int
}

// goalAndStep sets Goal and Step from the first "Goal: " and "Step: " lines of the
// user message, else of the system messages. A step call states its step after the
// history ("Current step: "; Fathom's Anthropic client sends that as user text): that
// line is the step when no "Step: " line is found.
func (d *TemplateData) goalAndStep() {
	var current string
	for _, line := range strings.Split(d.User+"\n"+d.System, "\n") {
		if v, ok := strings.CutPrefix(line, "Goal: "); ok && d.Goal == "" {
			d.Goal = strings.TrimSpace(v)
		}
		if v, ok := strings.CutPrefix(line, "Step: "); ok && d.Step == "" {
			d.Step = strings.TrimSpace(v)
		}
		if v, ok := strings.CutPrefix(line, "Current step: "); ok && current == "" {
			current = strings.TrimSpace(v)
		}
	}
	if d.Step == "" {
		d.Step = current
	}
}

// readBody reads a request body of at most MaxRequestBytes (one byte more tells the
// caller it was too long), in one allocation when the client sent its length.
func readBody(r *http.Request) ([]byte, error) {
	if n := r.ContentLength; n >= 0 && n <= MaxRequestBytes {
		body := make([]byte, n)
		_, err := io.ReadFull(r.Body, body)
		return body, err
	}
	return io.ReadAll(io.LimitReader(r.Body, MaxRequestBytes+1))
}

func (s *Server) chat(w http.ResponseWriter, r *http.Request) {
	body, err := readBody(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "read body: "+err.Error(), 0)
		return
	}
	if len(body) > MaxRequestBytes {
		writeError(w, http.StatusRequestEntityTooLarge, "invalid_request_error", fmt.Sprintf("request body exceeds %d bytes", MaxRequestBytes), 0)
		return
	}
	var req chatRequest
	if err := json.Unmarshal(body, &req); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "request is not valid JSON: "+err.Error(), 0)
		return
	}
	if len(req.Messages) == 0 {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "messages must not be empty", 0)
		return
	}
	if err := req.ResponseFormat.check(); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", err.Error(), 0)
		return
	}
	if e := req.check(); e != nil {
		writeInvalid(w, e)
		return
	}
	var toolNames []string
	for _, t := range req.Tools {
		toolNames = append(toolNames, t.Function.Name)
	}
	forced, callsAllowed, err := openAIToolChoice(req.ToolChoice, toolNames)
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", err.Error(), 0)
		return
	}
	var d TemplateData
	var all, system, input []string
	promptTok := 3 // every reply is primed with a few tokens
	prefix := newPrefixHasher("openai")
	var prefixKeys []string
	var prefixToks []int
	for i, m := range req.Messages {
		content, err := chatContent(m.Content)
		if err != nil {
			writeError(w, http.StatusBadRequest, "invalid_request_error", fmt.Sprintf("messages[%d].content: %v", i, err), 0)
			return
		}
		promptTok += 3 + approxTokens(content)
		prefix.add(m.Role, content)
		for _, tc := range m.ToolCalls {
			promptTok += approxTokens(tc.Function.Name) + approxTokens(tc.Function.Arguments)
			prefix.add(tc.Function.Name, tc.Function.Arguments)
		}
		prefixKeys, prefixToks = append(prefixKeys, prefix.key()), append(prefixToks, promptTok)
		all = append(all, content)
		if m.Role != "system" {
			input = append(input, content)
		}
		switch m.Role {
		case "system":
			system = append(system, content)
		case "user":
			d.User, d.Tool = content, ""
		case "tool":
			d.Tool = content
		}
	}
	s.requests.Add(1)
	d.System, d.All, d.Input = strings.Join(system, "\n"), strings.Join(all, "\n"), strings.Join(input, "\n")
	d.goalAndStep()
	rule := s.pick(&d)
	tmpl := s.fallback
	if rule != nil {
		if rule.DelayMS > 0 {
			select {
			case <-time.After(time.Duration(rule.DelayMS) * time.Millisecond):
			case <-r.Context().Done():
				return
			}
		}
		if rule.Status != 0 && rule.Status != http.StatusOK {
			msg := rule.ErrorMessage
			if msg == "" {
				msg = http.StatusText(rule.Status)
			}
			s.cfg.Logger.Debug("mock-llm error answer", "status", rule.Status)
			writeError(w, rule.Status, "scripted_error", msg, rule.RetryAfterS)
			return
		}
		tmpl = rule.tmpl
	}
	model := req.Model
	if model == "" {
		model = s.cfg.ModelName
	}
	ans := answer{id: fmt.Sprintf("chatcmpl-mock-%d", s.requests.Load()), model: model, finish: "stop"}
	if rule != nil && len(rule.ToolCalls) > 0 && callsAllowed {
		ans.finish = "tool_calls"
		for i, tc := range rule.ToolCalls {
			var args strings.Builder
			if err := rule.args[i].Execute(&args, d); err != nil {
				writeError(w, http.StatusInternalServerError, "server_error", "render scripted tool arguments: "+err.Error(), 0)
				return
			}
			ans.calls = append(ans.calls, toolCall{id: fmt.Sprintf("call_%d_%d", s.requests.Load(), i), name: tc.Name, args: args.String()})
			ans.outTok += approxTokens(args.String()) + 3
		}
	} else {
		var out strings.Builder
		if err := tmpl.Execute(&out, d); err != nil {
			writeError(w, http.StatusInternalServerError, "server_error", "render scripted response: "+err.Error(), 0)
			return
		}
		ans.content = out.String()
		if rule == nil && forced == "" {
			ans.content = req.ResponseFormat.unscripted(ans.content)
		}
		ans.outTok = approxTokens(ans.content)
		if forced != "" { // a forced call answers with the scripted text as its arguments
			args := forcedArgs(ans.content)
			if rule == nil {
				for _, t := range req.Tools {
					if t.Function.Name == forced {
						args = forcedUnscripted(ans.content, t.Function.Parameters)
						break
					}
				}
			}
			ans.calls = []toolCall{{id: fmt.Sprintf("call_%d_0", s.requests.Load()), name: forced, args: args}}
			ans.content = ""
		}
	}
	if req.ParallelToolCalls != nil && !*req.ParallelToolCalls && len(ans.calls) > 1 {
		ans.calls = ans.calls[:1]
	}
	ans.reasoningTok = reasoningTokens(req.ReasoningEffort)
	ans.outTok += ans.reasoningTok
	ans.inTok = promptTok
	ans.cachedTok = s.openAICached(prefixKeys, prefixToks, promptTok)
	if rule != nil {
		ans.cut, ans.malformed, ans.chunkDelay = rule.CutStream, rule.Malformed, time.Duration(rule.ChunkDelayMS)*time.Millisecond
	}
	s.cfg.Logger.Debug("mock-llm answer", "model", model, "bytes", len(ans.content), "tool_calls", len(ans.calls), "stream", req.Stream)
	if req.Stream {
		s.writeStream(w, r, ans, req.StreamOptions != nil && req.StreamOptions.IncludeUsage)
		return
	}
	if ans.malformed {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"choices":[{"message":`))
		return
	}
	msg := map[string]any{"role": "assistant", "content": ans.content}
	if len(ans.calls) > 0 {
		msg["content"] = nil
		calls := make([]map[string]any, len(ans.calls))
		for i, c := range ans.calls {
			calls[i] = map[string]any{"id": c.id, "type": "function", "function": map[string]string{"name": c.name, "arguments": c.args}}
		}
		msg["tool_calls"] = calls
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"id":      ans.id,
		"object":  "chat.completion",
		"created": time.Now().Unix(),
		"model":   model,
		"choices": []map[string]any{{"index": 0, "message": msg, "finish_reason": ans.finish}},
		"usage":   ans.usage(),
	})
}

type toolCall struct{ id, name, args string }

// answer is what a request gets, before it is written as JSON or as a stream.
type answer struct {
	id, model, content, finish string
	calls                      []toolCall
	inTok, outTok              int
	cut, malformed             bool
	chunkDelay                 time.Duration // before each streamed delta
	// cachedTok and reasoningTok are OpenAI's usage details (parts of inTok, outTok).
	cachedTok, reasoningTok int
	// thinking is an Anthropic thinking block's text ("" for none); cacheRead and
	// cacheWrite are the Anthropic cache counts (inTok excludes them).
	thinking              string
	cacheRead, cacheWrite int
}

func (a answer) usage() map[string]any {
	return map[string]any{"prompt_tokens": a.inTok, "completion_tokens": a.outTok, "total_tokens": a.inTok + a.outTok,
		"prompt_tokens_details":     map[string]int{"cached_tokens": a.cachedTok, "audio_tokens": 0},
		"completion_tokens_details": map[string]int{"reasoning_tokens": a.reasoningTok, "audio_tokens": 0, "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0}}
}

// writeStream sends the answer as OpenAI chat.completion.chunk events: a role chunk,
// the text in word-sized deltas (or each tool call as an id+name chunk and two
// argument fragments), a finish chunk, an optional usage chunk, then "data: [DONE]".
// A chunk_delay_ms rule waits before each delta; a cut_stream rule stops after the
// first half of the deltas; a malformed rule sends
// a chunk that is not JSON.
func (s *Server) writeStream(w http.ResponseWriter, r *http.Request, a answer, includeUsage bool) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	send := func(v any) bool {
		b, _ := json.Marshal(v)
		if _, err := fmt.Fprintf(w, "data: %s\n\n", b); err != nil {
			return false
		}
		if flusher != nil {
			flusher.Flush()
		}
		return r.Context().Err() == nil
	}
	chunk := func(delta map[string]any, finish any) map[string]any {
		return map[string]any{"id": a.id, "object": "chat.completion.chunk", "created": time.Now().Unix(), "model": a.model,
			"choices": []map[string]any{{"index": 0, "delta": delta, "finish_reason": finish}}}
	}
	var deltas []map[string]any
	for _, piece := range splitWords(a.content) {
		deltas = append(deltas, map[string]any{"content": piece})
	}
	for i, c := range a.calls {
		half := len(c.args) / 2
		deltas = append(deltas,
			map[string]any{"tool_calls": []map[string]any{{"index": i, "id": c.id, "type": "function", "function": map[string]string{"name": c.name, "arguments": c.args[:half]}}}},
			map[string]any{"tool_calls": []map[string]any{{"index": i, "function": map[string]string{"arguments": c.args[half:]}}}})
	}
	if !send(chunk(map[string]any{"role": "assistant", "content": ""}, nil)) {
		return
	}
	if a.malformed {
		_, _ = fmt.Fprint(w, "data: {\"choices\":[{\"delta\":\n\n")
		return
	}
	for i, d := range deltas {
		if a.cut && i >= (len(deltas)+1)/2 {
			return // the handler returns mid-stream: the client sees the body end without [DONE]
		}
		if !a.pause(r) || !send(chunk(d, nil)) {
			return
		}
	}
	if a.cut {
		return
	}
	if !send(chunk(map[string]any{}, a.finish)) {
		return
	}
	if includeUsage {
		if !send(map[string]any{"id": a.id, "object": "chat.completion.chunk", "model": a.model, "choices": []any{}, "usage": a.usage()}) {
			return
		}
	}
	_, _ = fmt.Fprint(w, "data: [DONE]\n\n")
}

// pause waits the rule's chunk delay before a streamed delta; false when the request
// ended meanwhile.
func (a answer) pause(r *http.Request) bool {
	if a.chunkDelay <= 0 {
		return true
	}
	t := time.NewTimer(a.chunkDelay)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.Context().Done():
		return false
	}
}

// splitWords cuts s into deltas of one word each, keeping the spaces, so the stream
// carries several chunks that concatenate back to s exactly.
func splitWords(s string) []string {
	var out []string
	start := 0
	for i := 1; i < len(s); i++ {
		if s[i] == ' ' {
			out = append(out, s[start:i])
			start = i
		}
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}

// DefaultEmbeddingDims is the embedding size when a request names no dimensions and a
// model the mock does not know (see EmbeddingDims).
const DefaultEmbeddingDims = 256

// embeddings answers POST /v1/embeddings with deterministic local embeddings (see
// Embed): the same text always gets the same unit vector, and texts sharing words get
// close vectors, which is what retrieval tests need.
func (s *Server) embeddings(w http.ResponseWriter, r *http.Request) {
	body, err := readBody(r)
	if err != nil || len(body) > MaxRequestBytes {
		writeError(w, http.StatusRequestEntityTooLarge, "invalid_request_error", fmt.Sprintf("request body exceeds %d bytes", MaxRequestBytes), 0)
		return
	}
	var req struct {
		Model          string          `json:"model"`
		Input          json.RawMessage `json:"input"`
		Dimensions     int             `json:"dimensions"`
		EncodingFormat string          `json:"encoding_format"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "request is not valid JSON: "+err.Error(), 0)
		return
	}
	var inputs []string
	var one string
	if json.Unmarshal(req.Input, &one) == nil {
		inputs = []string{one}
	} else if err := json.Unmarshal(req.Input, &inputs); err != nil || len(inputs) == 0 {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "input must be a string or a non-empty array of strings", 0)
		return
	}
	if req.EncodingFormat != "" && req.EncodingFormat != "float" && req.EncodingFormat != "base64" {
		writeError(w, http.StatusBadRequest, "invalid_request_error", fmt.Sprintf("encoding_format %q: want float or base64", req.EncodingFormat), 0)
		return
	}
	dims, err := embeddingDims(req.Model, req.Dimensions)
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", err.Error(), 0)
		return
	}
	data := make([]map[string]any, len(inputs))
	tokens := 0
	for i, in := range inputs {
		var emb any = Embed(in, dims)
		if req.EncodingFormat == "base64" {
			emb = encodeBase64Floats(emb.([]float32))
		}
		data[i] = map[string]any{"object": "embedding", "index": i, "embedding": emb}
		tokens += approxTokens(in)
	}
	model := req.Model
	if model == "" {
		model = "fathom-mock-embed"
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": data, "model": model,
		"usage": map[string]int{"prompt_tokens": tokens, "total_tokens": tokens}})
}

// encodeBase64Floats is the API's base64 encoding of an embedding: the little-endian
// float32 bytes, standard base64.
func encodeBase64Floats(v []float32) string {
	b := make([]byte, 4*len(v))
	for i, f := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(f))
	}
	return base64.StdEncoding.EncodeToString(b)
}

// Embed is the mock's embedding function: memory/hashembed's feature hashing of the
// lower-cased words of text into dims buckets, normalised to unit length — the same
// vectors Fathom's local embedder makes, so local and mock-served sessions share them.
func Embed(text string, dims int) []float32 { return hashembed.Vector(text, dims) }

func (s *Server) pick(d *TemplateData) *compiledRule {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.rules {
		if r.match != nil && !r.match.MatchString(d.User) {
			continue
		}
		if r.system != nil && !r.system.MatchString(d.System) {
			continue
		}
		if r.tool != nil && (d.Tool == "" || !r.tool.MatchString(d.Tool)) {
			continue
		}
		if r.context != nil && !r.context.MatchString(d.All) {
			continue
		}
		if r.Times > 0 && r.hits.Load() >= int64(r.Times) {
			continue
		}
		d.N = int(r.hits.Add(1))
		return r
	}
	return nil
}

// approxTokens estimates tokens as one per four bytes, at least one per non-empty text.
func approxTokens(s string) int {
	if s == "" {
		return 0
	}
	return len(s)/4 + 1
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// writeError writes an OpenAI error body ({"error":{"message","type","param":null,
// "code":null}}), with a Retry-After header when retryAfter > 0.
func writeError(w http.ResponseWriter, status int, typ, msg string, retryAfter int) {
	if retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(retryAfter))
	}
	writeJSON(w, status, map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": nil}})
}

// apiError is an OpenAI invalid_request_error: HTTP status (0: 400), message, and the
// param and code it names ("": null).
type apiError struct {
	status           int
	msg, param, code string
}

// writeInvalid writes e as the API does.
func writeInvalid(w http.ResponseWriter, e *apiError) {
	orNull := func(s string) any {
		if s == "" {
			return nil
		}
		return s
	}
	status := e.status
	if status == 0 {
		status = http.StatusBadRequest
	}
	writeJSON(w, status, map[string]any{"error": map[string]any{"message": e.msg, "type": "invalid_request_error",
		"param": orNull(e.param), "code": orNull(e.code)}})
}

// ListenAndServe serves on addr until ctx ends, then shuts down gracefully. ready, when
// not nil, is called with the bound address once the listener is open.
func (s *Server) ListenAndServe(ctx context.Context, addr string, ready func(addr string)) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("mock-llm: listen %s: %w", addr, err)
	}
	srv := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	if ready != nil {
		ready(ln.Addr().String())
	}
	select {
	case err := <-errc:
		return fmt.Errorf("mock-llm: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("mock-llm: shutdown: %w", err)
	}
	return ctx.Err()
}

// Run is the `fathom mock-llm` command: it serves a script (the demo script by default)
// until ctx ends.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("mock-llm", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:8089", "address to serve the OpenAI-compatible API on")
	scriptPath := fs.String("script", "", "JSON script of answers (default: the built-in demo script)")
	token := fs.String("token", "", "require this bearer token")
	cacheMin := fs.Int("cache-min-tokens", DefaultCacheMinTokens, "smallest prompt (OpenAI) or cache_control prefix (Anthropic) the prompt cache serves; -1 caches any size")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: fathom mock-llm [--listen ADDR] [--script FILE] [--token T] [--cache-min-tokens N]")
		fmt.Fprintln(stderr, "\nServes a scripted model for tests and demos: the OpenAI API (/v1/models, /v1/models/{id}, /v1/chat/completions,")
		fmt.Fprintln(stderr, "/v1/embeddings) and Anthropic's (/v1/messages, /v1/messages/count_tokens), with prompt-cache and reasoning")
		fmt.Fprintln(stderr, "usage, response_format, tool_choice and Anthropic extended thinking served as the real APIs serve them.")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("mock-llm: unexpected arguments %q", fs.Args())
	}
	script := DemoScript()
	if *scriptPath != "" {
		var err error
		if script, err = LoadScript(*scriptPath); err != nil {
			return err
		}
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	srv := New(Config{Script: script, Token: *token, Logger: log, CacheMinTokens: *cacheMin})
	err := srv.ListenAndServe(ctx, *listen, func(addr string) {
		fmt.Fprintf(stdout, "mock-llm listening on http://%s/v1\n", addr)
	})
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}
