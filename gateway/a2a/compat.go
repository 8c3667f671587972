package a2a

import (
	"bytes"
	"encoding/json"
	"strings"
)

// A2A 0.3, accepted where it is cheap: its JSON-RPC methods (message/send, message/stream,
// tasks/get, tasks/cancel, tasks/resubscribe) run the 1.0 methods, their params and
// results translated: `kind` discriminators, lower-case states and roles, results not
// wrapped, and `final` on the status update that ends a stream.

// LegacyProtocolVersion is the A2A 0.3 version the card's second interface names.
const LegacyProtocolVersion = "0.3"

// legacyMethods maps the 0.3 methods to the 1.0 ones.
var legacyMethods = map[string]string{
	"message/send":      "SendMessage",
	"message/stream":    "SendStreamingMessage",
	"tasks/get":         "GetTask",
	"tasks/cancel":      "CancelTask",
	"tasks/resubscribe": "SubscribeToTask",
}

var legacyStates = map[string]string{
	StateSubmitted: "submitted", StateWorking: "working", StateCompleted: "completed", StateFailed: "failed",
	StateCanceled: "canceled", StateInputRequired: "input-required", StateRejected: "rejected",
}

// legacyPart is a 0.3 part.
type legacyPart struct {
	Kind     string          `json:"kind"`
	Text     string          `json:"text,omitempty"`
	Data     json.RawMessage `json:"data,omitempty"`
	File     json.RawMessage `json:"file,omitempty"`
	Metadata map[string]any  `json:"metadata,omitempty"`
}

// legacyMessage is a 0.3 message.
type legacyMessage struct {
	Kind      string         `json:"kind"`
	MessageID string         `json:"messageId"`
	ContextID string         `json:"contextId,omitempty"`
	TaskID    string         `json:"taskId,omitempty"`
	Role      string         `json:"role"`
	Parts     []legacyPart   `json:"parts"`
	Metadata  map[string]any `json:"metadata,omitempty"`
}

// legacySendParams is the params of message/send and message/stream.
type legacySendParams struct {
	Message       *legacyMessage `json:"message"`
	Configuration *struct {
		Blocking      *bool  `json:"blocking,omitempty"`
		HistoryLength *int32 `json:"historyLength,omitempty"`
	} `json:"configuration,omitempty"`
}

// fromLegacySend translates 0.3 send params (blocking defaults to false, as 0.3 says).
func fromLegacySend(raw json.RawMessage) (*SendMessageRequest, *rpcError) {
	var p legacySendParams
	if e := decodeParams(raw, &p); e != nil {
		return nil, e
	}
	if p.Message == nil {
		return nil, rpcErr(CodeInvalidParams, "message is required")
	}
	m := p.Message
	role := RoleUser
	if m.Role != "user" {
		role = m.Role
	}
	out := &SendMessageRequest{Message: &Message{MessageID: m.MessageID, ContextID: m.ContextID, TaskID: m.TaskID, Role: role, Metadata: m.Metadata},
		Configuration: &SendMessageConfiguration{ReturnImmediately: true}}
	for _, part := range m.Parts {
		switch part.Kind {
		case "text":
			out.Message.Parts = append(out.Message.Parts, Part{Text: part.Text})
		case "data":
			data := part.Data
			if wrapped, ok := part.Metadata["data_part_compat"].(bool); ok && wrapped { // a non-object value as {"value": v}
				var w struct {
					Value json.RawMessage `json:"value"`
				}
				if json.Unmarshal(data, &w) == nil && len(w.Value) > 0 {
					data = w.Value
				}
			}
			out.Message.Parts = append(out.Message.Parts, Part{Data: data})
		case "file":
			out.Message.Parts = append(out.Message.Parts, Part{URL: "file"})
		default:
			return nil, rpcErr(CodeInvalidParams, "part kind %q is not text, data or file", truncate(part.Kind, 40))
		}
	}
	if c := p.Configuration; c != nil {
		out.Configuration.HistoryLength = c.HistoryLength
		if c.Blocking != nil {
			out.Configuration.ReturnImmediately = !*c.Blocking
		}
	}
	return out, nil
}

func legacyParts(parts []Part) []legacyPart {
	out := make([]legacyPart, 0, len(parts))
	for _, p := range parts {
		if len(p.Data) > 0 {
			data, meta := p.Data, p.Metadata
			if t := bytes.TrimSpace(data); len(t) > 0 && t[0] != '{' { // 0.3 data is an object
				data, _ = json.Marshal(map[string]json.RawMessage{"value": p.Data})
				meta = map[string]any{"data_part_compat": true}
			}
			out = append(out, legacyPart{Kind: "data", Data: data, Metadata: meta})
			continue
		}
		out = append(out, legacyPart{Kind: "text", Text: p.Text, Metadata: p.Metadata})
	}
	return out
}

func legacyMsg(m *Message) *legacyMessage {
	if m == nil {
		return nil
	}
	role := "agent"
	if m.Role == RoleUser {
		role = "user"
	}
	return &legacyMessage{Kind: "message", MessageID: m.MessageID, ContextID: m.ContextID, TaskID: m.TaskID, Role: role,
		Parts: legacyParts(m.Parts), Metadata: m.Metadata}
}

func legacyStatus(s TaskStatus) map[string]any {
	out := map[string]any{"state": legacyStates[s.State]}
	if s.Message != nil {
		out["message"] = legacyMsg(s.Message)
	}
	if s.Timestamp != "" {
		out["timestamp"] = s.Timestamp
	}
	return out
}

func legacyArtifact(a Artifact) map[string]any {
	out := map[string]any{"artifactId": a.ArtifactID, "parts": legacyParts(a.Parts)}
	if a.Name != "" {
		out["name"] = a.Name
	}
	if a.Description != "" {
		out["description"] = a.Description
	}
	return out
}

func legacyTask(t *Task) map[string]any {
	if t == nil {
		return nil
	}
	out := map[string]any{"kind": "task", "id": t.ID, "contextId": t.ContextID, "status": legacyStatus(t.Status)}
	if len(t.Artifacts) > 0 {
		arts := make([]map[string]any, 0, len(t.Artifacts))
		for _, a := range t.Artifacts {
			arts = append(arts, legacyArtifact(a))
		}
		out["artifacts"] = arts
	}
	if len(t.History) > 0 {
		hist := make([]*legacyMessage, 0, len(t.History))
		for i := range t.History {
			hist = append(hist, legacyMsg(&t.History[i]))
		}
		out["history"] = hist
	}
	if t.Metadata != nil {
		out["metadata"] = t.Metadata
	}
	return out
}

// legacyStream is a stream response as 0.3 sends it; final marks the status update that
// ends the stream.
func legacyStream(r StreamResponse, final bool) any {
	switch {
	case r.Task != nil:
		return legacyTask(r.Task)
	case r.StatusUpdate != nil:
		u := r.StatusUpdate
		return map[string]any{"kind": "status-update", "taskId": u.TaskID, "contextId": u.ContextID,
			"status": legacyStatus(u.Status), "final": final, "metadata": u.Metadata}
	case r.ArtifactUpdate != nil:
		u := r.ArtifactUpdate
		return map[string]any{"kind": "artifact-update", "taskId": u.TaskID, "contextId": u.ContextID,
			"artifact": legacyArtifact(u.Artifact), "lastChunk": u.LastChunk, "metadata": u.Metadata}
	case r.Message != nil:
		return legacyMsg(r.Message)
	}
	return nil
}

// isLegacyVersion reports whether v (an A2A-Version, major.minor) is 0.3; empty counts
// as 0.3, as the specification says.
func isLegacyVersion(v string) bool {
	return v == "" || v == LegacyProtocolVersion || strings.HasPrefix(v, "0.3.")
}
