package agui

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/fathom-agents/fathom/gateway"
)

// RunAgentInput is the body of POST /v1/agui (AG-UI's RunAgentInput). Fields the
// endpoint does not use are accepted and ignored, as the protocol's objects are open.
type RunAgentInput struct {
	// ThreadID names the conversation: one session per thread (and tenant).
	ThreadID string `json:"threadId"`
	// RunID names this run; posting the same run again replays it.
	RunID string `json:"runId"`
	// ParentRunID is accepted and ignored.
	ParentRunID string `json:"parentRunId,omitempty"`
	// State is the client's state: ignored, the session's own state is authoritative.
	State json.RawMessage `json:"state,omitempty"`
	// Messages are the thread's messages as the client has them; the last one, a user
	// message, is the run's goal (first run) or follow-up (later runs).
	Messages []Message `json:"messages"`
	// Tools are the client's (front-end) tools: accepted and ignored, the session's
	// agents use the node's tools.
	Tools []json.RawMessage `json:"tools,omitempty"`
	// Context is accepted and ignored.
	Context []json.RawMessage `json:"context,omitempty"`
	// ForwardedProps is accepted and ignored.
	ForwardedProps json.RawMessage `json:"forwardedProps,omitempty"`
	// Resume answers the interrupts the previous run ended with, every one of them.
	Resume []ResumeEntry `json:"resume,omitempty"`
}

// Message is one message of RunAgentInput.messages (the fields the endpoint reads).
type Message struct {
	ID   string `json:"id"`
	Role string `json:"role"`
	// Content is a string, or (user and tool messages) an array of content parts.
	Content json.RawMessage `json:"content,omitempty"`
}

// ResumeEntry answers one interrupt.
type ResumeEntry struct {
	// InterruptID is the interrupt's id (the session's request id).
	InterruptID string `json:"interruptId"`
	// Status is "resolved" (Payload is the answer) or "cancelled".
	Status string `json:"status"`
	// Payload is the answer: any JSON value for a question; {"approved": bool,
	// "editedArgs"?: {...}, "message"?: "..."} for an approval.
	Payload json.RawMessage `json:"payload,omitempty"`
	// Metadata is accepted and ignored.
	Metadata json.RawMessage `json:"metadata,omitempty"`
}

// Resume statuses.
const (
	StatusResolved  = "resolved"
	StatusCancelled = "cancelled"
)

var roles = map[string]bool{"developer": true, "system": true, "assistant": true, "user": true, "tool": true, "activity": true, "reasoning": true}

// decodeInput reads and checks a RunAgentInput; its error is the client's 400 message.
func decodeInput(w http.ResponseWriter, r *http.Request) (*RunAgentInput, error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, gateway.MaxBodyBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, fmt.Errorf("the RunAgentInput exceeds %d bytes", gateway.MaxBodyBytes)
		}
		return nil, fmt.Errorf("read the RunAgentInput: %w", err)
	}
	in := &RunAgentInput{}
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(in); err != nil {
		return nil, fmt.Errorf("malformed RunAgentInput: %v", err)
	}
	if dec.More() {
		return nil, errors.New("malformed RunAgentInput: trailing data after the JSON object")
	}
	var raw map[string]json.RawMessage
	_ = json.Unmarshal(body, &raw)
	switch {
	case strings.TrimSpace(in.ThreadID) == "":
		return nil, errors.New("RunAgentInput.threadId is required: a non-empty string naming the thread")
	case strings.TrimSpace(in.RunID) == "":
		return nil, errors.New("RunAgentInput.runId is required: a non-empty string naming the run")
	case len(in.ThreadID) > 200 || len(in.RunID) > 200:
		return nil, errors.New("RunAgentInput.threadId and runId are at most 200 bytes")
	case raw["messages"] == nil || string(raw["messages"]) == "null":
		return nil, errors.New("RunAgentInput.messages is required: an array of messages (it may be empty on a resume)")
	}
	for i, m := range in.Messages {
		if m.ID == "" || !roles[m.Role] {
			return nil, fmt.Errorf("RunAgentInput.messages[%d] needs an id and a role (developer, system, assistant, user, tool, activity or reasoning)", i)
		}
	}
	for i, e := range in.Resume {
		if e.InterruptID == "" || (e.Status != StatusResolved && e.Status != StatusCancelled) {
			return nil, fmt.Errorf(`RunAgentInput.resume[%d] needs an interruptId and a status ("resolved" or "cancelled")`, i)
		}
	}
	if len(in.Resume) == 0 {
		if _, err := lastUserText(in.Messages); err != nil {
			return nil, err
		}
	}
	return in, nil
}

// lastUserText is the text of the last message, which must be a user message: the
// goal or follow-up of a run (a string, or the text parts of its content).
func lastUserText(ms []Message) (string, error) {
	if len(ms) == 0 || ms[len(ms)-1].Role != "user" {
		return "", errors.New("RunAgentInput.messages must end with a user message: its text is the goal of the thread's first run and the follow-up of a later one (or send resume to answer interrupts)")
	}
	c := ms[len(ms)-1].Content
	var s string
	if json.Unmarshal(c, &s) != nil {
		var parts []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		if json.Unmarshal(c, &parts) != nil {
			return "", errors.New("the last user message's content must be a string or an array of content parts")
		}
		var texts []string
		for _, p := range parts {
			if p.Type == "text" && p.Text != "" {
				texts = append(texts, p.Text)
			}
		}
		s = strings.Join(texts, "\n")
	}
	if strings.TrimSpace(s) == "" {
		return "", errors.New("the last user message has no text: it is the run's goal or follow-up")
	}
	return s, nil
}
