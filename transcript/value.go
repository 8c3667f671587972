package transcript

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/fathom-agents/fathom/messages"
)

// DefaultMaxValue is the size (bytes) past which a value is cut: 4 KiB.
const DefaultMaxValue = 4 << 10

// Value is a text of the transcript: a model's answer, a tool's arguments or result, a
// question, a hand-off summary.
type Value struct {
	// Text is the value, or its first MaxValue bytes when Cut.
	Text string `json:"text"`
	// HTML is Text rendered from markdown (model text, results, summaries), safe to put
	// in a page (see Markdown); empty for values that are not markdown.
	HTML string `json:"html,omitempty"`
	// JSON is set when Text is a whole JSON value (tool arguments and results usually
	// are): a page may pretty-print it.
	JSON bool `json:"json,omitempty"`
	// Cut is set when Text is only the head of the value; Full names where the whole is.
	Cut bool `json:"cut,omitempty"`
	// Bytes is the whole value's size.
	Bytes int `json:"bytes"`
	// Full, when Cut, is the gateway path that serves the whole value
	// (GET /v1/sessions/{id}/events/{seq}?field=F answers it as a Value).
	Full string `json:"full,omitempty"`
}

// format says how a value reads.
type format int

const (
	plain    format = iota // text as is (JSON flagged when it parses)
	markdown               // model text: rendered to HTML
)

// newValue makes the Value of text, cut at max bytes (0: uncut), with full naming
// where the whole text is served.
func newValue(text string, f format, max int, full string) *Value {
	v := &Value{Text: text, Bytes: len(text)}
	if max > 0 && len(text) > max {
		cut := max
		for cut > 0 && !utf8.RuneStart(text[cut]) {
			cut--
		}
		v.Text, v.Cut, v.Full = text[:cut], true, full
	}
	switch f {
	case markdown:
		v.HTML = Markdown(v.Text)
	default:
		if !v.Cut && looksJSON(v.Text) {
			v.JSON = true
		}
	}
	return v
}

// looksJSON reports whether s is a JSON object or array.
func looksJSON(s string) bool {
	s = strings.TrimSpace(s)
	if s == "" || (s[0] != '{' && s[0] != '[') {
		return false
	}
	return json.Valid([]byte(s))
}

// FullPath is the gateway path of field's whole value in event seq of session.
func FullPath(session string, seq uint64, field string) string {
	return "/v1/sessions/" + url.PathEscape(session) + "/events/" + strconv.FormatUint(seq, 10) + "?field=" + url.QueryEscape(field)
}

// ErrNoField is returned by FullValue for a field the event does not have as a
// transcript value.
var ErrNoField = fmt.Errorf("no such transcript field")

// FullValue returns the whole value of an event's field, uncut, as the transcript shows
// it (markdown rendered). Fields are those the transcript cuts: content and thinking
// (llm_responded), args (tool_called, hitl_requested), result (tool_result,
// session_completed), task (subagent_started), summary (subagent_completed), question
// (hitl_requested), input (hitl_received), output (step_completed), goal
// (session_started), error (session_failed, step_failed) and content (message_received).
// Other fields answer an error wrapping ErrNoField.
func FullValue(ev *messages.Event, field string) (*Value, error) {
	text, f, ok := fieldOf(ev, field)
	if !ok {
		return nil, fmt.Errorf("read %s of a %s event: %w", field, ev.Type(), ErrNoField)
	}
	return newValue(text, f, 0, ""), nil
}

// fieldOf returns an event's transcript field and how it reads.
func fieldOf(ev *messages.Event, field string) (string, format, bool) {
	switch p := ev.GetPayload().(type) {
	case *messages.Event_SessionStarted:
		if field == "goal" {
			return p.SessionStarted.GetGoal(), markdown, true
		}
	case *messages.Event_LlmResponded:
		switch field {
		case "content":
			return p.LlmResponded.GetContent(), markdown, true
		case "thinking":
			return thinkingText(p.LlmResponded), markdown, true
		}
	case *messages.Event_ToolCalled:
		if field == "args" {
			return p.ToolCalled.GetArgs(), plain, true
		}
	case *messages.Event_ToolResult:
		if field == "result" {
			return p.ToolResult.GetResult(), plain, true
		}
	case *messages.Event_SessionCompleted:
		if field == "result" {
			return p.SessionCompleted.GetResult(), markdown, true
		}
	case *messages.Event_SubagentStarted:
		if field == "task" {
			return p.SubagentStarted.GetTask(), markdown, true
		}
	case *messages.Event_SubagentCompleted:
		if field == "summary" {
			return p.SubagentCompleted.GetResult().GetSummary(), markdown, true
		}
	case *messages.Event_HitlRequested:
		switch field {
		case "question":
			return p.HitlRequested.GetQuestion(), markdown, true
		case "args":
			return p.HitlRequested.GetArgs(), plain, true
		}
	case *messages.Event_HitlReceived:
		switch field {
		case "input":
			return p.HitlReceived.GetInput(), plain, true
		case "args":
			return p.HitlReceived.GetArgs(), plain, true
		}
	case *messages.Event_StepCompleted:
		if field == "output" {
			return p.StepCompleted.GetOutput(), markdown, true
		}
	case *messages.Event_StepFailed:
		if field == "error" {
			return p.StepFailed.GetError(), plain, true
		}
	case *messages.Event_SessionFailed:
		if field == "error" {
			return p.SessionFailed.GetError(), plain, true
		}
	case *messages.Event_MessageReceived:
		if field == "content" {
			return p.MessageReceived.GetContent(), markdown, true
		}
	case *messages.Event_PlanFailed:
		if field == "error" {
			return p.PlanFailed.GetError(), plain, true
		}
	}
	return "", plain, false
}

// thinkingText joins an answer's readable reasoning blocks (redacted ones have none).
func thinkingText(r *messages.LlmResponded) string {
	var parts []string
	for _, b := range r.GetThinking() {
		if b.GetThinking() != "" {
			parts = append(parts, b.GetThinking())
		}
	}
	return strings.Join(parts, "\n\n")
}
