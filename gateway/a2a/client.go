package a2a

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/fathom-agents/fathom/messages"
)

// Client calls a remote A2A 1.0 agent over its JSON-RPC binding: Fathom delegating a
// plan step to another agent (config a2a_agents).
type Client struct {
	// URL is the agent's base URL: its card is URL/.well-known/agent-card.json (or URL
	// itself when it ends in .json).
	URL string
	// Token, when set, is sent as "Authorization: Bearer <token>".
	Token string
	// HTTP is the client used (default: one with Timeout).
	HTTP *http.Client
	// Timeout bounds one call, a blocking SendMessage included (default 10 minutes).
	Timeout time.Duration
}

// ErrRemoteTask is a remote task that did not complete (failed, canceled, rejected, or
// waiting for input or authentication).
var ErrRemoteTask = errors.New("the remote A2A task did not complete")

func (c *Client) http() *http.Client {
	if c.HTTP != nil {
		return c.HTTP
	}
	return &http.Client{Timeout: c.timeout()}
}

func (c *Client) timeout() time.Duration {
	if c.Timeout > 0 {
		return c.Timeout
	}
	return 10 * time.Minute
}

// Card fetches the remote agent's card.
func (c *Client) Card(ctx context.Context) (*AgentCard, error) {
	url := c.URL
	if !strings.HasSuffix(url, ".json") {
		url = strings.TrimSuffix(url, "/") + CardPath
	}
	ctx, cancel := context.WithTimeout(ctx, min(c.timeout(), 30*time.Second))
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("fetch the agent card %s: %w", url, err)
	}
	resp, err := c.http().Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetch the agent card %s: %w", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil || resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("fetch the agent card %s: status %d: %v", url, resp.StatusCode, err)
	}
	var card AgentCard
	if err := json.Unmarshal(body, &card); err != nil {
		return nil, fmt.Errorf("decode the agent card %s: %w", url, err)
	}
	return &card, nil
}

// endpoint is the card's JSON-RPC 1.0 interface URL.
func endpoint(card *AgentCard) (string, error) {
	for _, i := range card.SupportedInterfaces {
		if strings.EqualFold(i.ProtocolBinding, "JSONRPC") && (i.ProtocolVersion == ProtocolVersion || i.ProtocolVersion == "1") {
			return i.URL, nil
		}
	}
	return "", fmt.Errorf("agent %q has no JSON-RPC %s interface", card.Name, ProtocolVersion)
}

// Send sends text as a new task and waits for it (a blocking SendMessage); the answer is
// the task. messageID makes a retry the same message ("" : one is made).
func (c *Client) Send(ctx context.Context, messageID, text string) (*Task, error) {
	card, err := c.Card(ctx)
	if err != nil {
		return nil, err
	}
	url, err := endpoint(card)
	if err != nil {
		return nil, err
	}
	if messageID == "" {
		messageID = fmt.Sprintf("fathom-%d", time.Now().UnixNano())
	}
	params := SendMessageRequest{Message: &Message{MessageID: messageID, Role: RoleUser, Parts: []Part{{Text: text}}}}
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": params})
	if err != nil {
		return nil, fmt.Errorf("encode SendMessage: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("SendMessage to %s: %w", url, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(VersionHeader, ProtocolVersion)
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	resp, err := c.http().Do(req)
	if err != nil {
		return nil, fmt.Errorf("SendMessage to %s: %w", url, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, fmt.Errorf("SendMessage to %s: read the answer: %w", url, err)
	}
	var out struct {
		Result *struct {
			Task *Task `json:"task"`
		} `json:"result"`
		Error *rpcError `json:"error"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, fmt.Errorf("SendMessage to %s: status %d: %.200s", url, resp.StatusCode, raw)
	}
	if out.Error != nil {
		return nil, fmt.Errorf("SendMessage to %s: %w", url, out.Error)
	}
	if out.Result == nil || out.Result.Task == nil {
		return nil, fmt.Errorf("SendMessage to %s: the answer has no task: %.200s", url, raw)
	}
	return out.Result.Task, nil
}

// Handoff runs brief as a task of the remote agent and makes its answer a hand-off: the
// result artifact's text as the summary (status completed), or the state and status
// message of a task that did not complete (status failed, wrapping ErrRemoteTask).
// messageID makes a retry the same message.
func (c *Client) Handoff(ctx context.Context, messageID, brief string) (*messages.SubagentResult, error) {
	start := time.Now()
	task, err := c.Send(ctx, messageID, brief)
	if err != nil {
		return nil, err
	}
	var texts []string
	for _, a := range task.Artifacts {
		for _, p := range a.Parts {
			if p.Text != "" {
				texts = append(texts, p.Text)
			}
		}
	}
	if task.Status.State != StateCompleted {
		why := task.Status.State
		if m := task.Status.Message; m != nil && len(m.Parts) > 0 && m.Parts[0].Text != "" {
			why += ": " + m.Parts[0].Text
		}
		return nil, fmt.Errorf("%w: task %s is %s", ErrRemoteTask, task.ID, why)
	}
	summary := strings.Join(texts, "\n\n")
	if summary == "" {
		summary = "the remote agent completed task " + task.ID + " without a text artifact"
	}
	return &messages.SubagentResult{Status: "completed", Summary: summary, Confidence: 1,
		DurationMs: time.Since(start).Milliseconds()}, nil
}
