package anthropic

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/fathom-agents/fathom/llm"
	"github.com/fathom-agents/fathom/llm/sse"
)

// maxBlocks bounds a streamed content block index, so a broken stream cannot make the
// client allocate without limit.
const maxBlocks = 1024

// streamEvent is the data of one streamed event; which fields are set depends on Type.
type streamEvent struct {
	Type    string `json:"type"`
	Message *struct {
		Model string    `json:"model"`
		Usage wireUsage `json:"usage"`
	} `json:"message"`
	Index        int    `json:"index"`
	ContentBlock *block `json:"content_block"`
	Delta        *struct {
		Type        string `json:"type"`
		Text        string `json:"text"`
		PartialJSON string `json:"partial_json"`
		StopReason  string `json:"stop_reason"`
	} `json:"delta"`
	Usage *wireUsage `json:"usage"`
	Error *wireError `json:"error"`
}

// streamBlock is a content block being assembled; only tool_use blocks are kept (text
// goes straight to the content).
type streamBlock struct {
	tool     bool
	id, name string
	start    json.RawMessage // the input given in content_block_start
	args     strings.Builder // the input_json_delta fragments
}

// streamState assembles a streamed answer event by event.
type streamState struct {
	out     llm.Response
	content strings.Builder
	blocks  []*streamBlock
	onDelta func(string)
}

// stream makes a streamed call, calling onDelta for each text delta in order and
// assembling tool calls from their input_json_delta fragments. The stream must end with
// message_stop; a stream that ends earlier is an error wrapping io.ErrUnexpectedEOF
// (retryable), and an "error" event is an *llm.APIError.
func (c *Client) stream(ctx context.Context, body []byte, onDelta func(string)) (llm.Response, error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	resp, err := c.send(ctx, body, "text/event-stream")
	if err != nil {
		return llm.Response{}, err
	}
	defer resp.Body.Close()
	r := sse.NewReader(resp.Body)
	r.MaxEventBytes = int(min(c.cfg.MaxResponseBytes, 1<<30))
	st := &streamState{onDelta: onDelta}
	var total int64
	for {
		ev, err := r.Next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF // ended without message_stop
			}
			return llm.Response{}, fmt.Errorf("anthropic: stream cut after %d bytes of text: %w", st.content.Len(), err)
		}
		if total += int64(len(ev.Data)); total > c.cfg.MaxResponseBytes {
			return llm.Response{}, fmt.Errorf("anthropic: stream exceeds %d bytes", c.cfg.MaxResponseBytes)
		}
		var data streamEvent
		if err := json.Unmarshal([]byte(ev.Data), &data); err != nil {
			return llm.Response{}, fmt.Errorf("anthropic: malformed stream event %q: %w", ev.Type, err)
		}
		if data.Type == "" {
			data.Type = ev.Type
		}
		done, err := st.handle(data)
		if err != nil {
			return llm.Response{}, err
		}
		if done {
			return st.result(), nil
		}
	}
}

// handle applies one event; done reports message_stop.
func (s *streamState) handle(ev streamEvent) (done bool, err error) {
	switch ev.Type {
	case "message_start":
		if m := ev.Message; m != nil {
			s.out.Model = m.Model
			s.out.Usage.InputTokens, s.out.Usage.OutputTokens = m.Usage.InputTokens, m.Usage.OutputTokens
		}
	case "content_block_start":
		if ev.ContentBlock == nil {
			return false, fmt.Errorf("anthropic: stream content_block_start %d has no content_block", ev.Index)
		}
		b, err := s.block(ev.Index)
		if err != nil {
			return false, err
		}
		switch cb := ev.ContentBlock; cb.Type {
		case "text":
			s.text(cb.Text)
		case "tool_use":
			b.tool, b.id, b.name, b.start = true, cb.ID, cb.Name, cb.Input
		}
	case "content_block_delta":
		return false, s.delta(ev)
	case "message_delta":
		if ev.Delta != nil && ev.Delta.StopReason != "" {
			s.out.FinishReason = finishReason(ev.Delta.StopReason)
		}
		if u := ev.Usage; u != nil {
			s.out.Usage.OutputTokens = u.OutputTokens // cumulative
			if u.InputTokens > 0 {
				s.out.Usage.InputTokens = u.InputTokens
			}
		}
	case "message_stop":
		return true, nil
	case "error":
		e := &llm.APIError{StatusCode: http.StatusInternalServerError, Message: "error event without details"}
		if ev.Error != nil {
			e.StatusCode, e.Type, e.Message = statusOfErrorType(ev.Error.Type), ev.Error.Type, ev.Error.Message
		}
		return false, fmt.Errorf("anthropic: stream error after %d bytes of text: %w", s.content.Len(), e)
	}
	// ping, content_block_stop and event types added later need nothing.
	return false, nil
}

// delta applies a content_block_delta.
func (s *streamState) delta(ev streamEvent) error {
	if ev.Delta == nil {
		return fmt.Errorf("anthropic: stream content_block_delta %d has no delta", ev.Index)
	}
	switch ev.Delta.Type {
	case "text_delta":
		s.text(ev.Delta.Text)
	case "input_json_delta":
		b, err := s.block(ev.Index)
		if err != nil {
			return err
		}
		if !b.tool {
			return fmt.Errorf("anthropic: stream input_json_delta for block %d, which is not a tool_use block", ev.Index)
		}
		b.args.WriteString(ev.Delta.PartialJSON)
	}
	return nil
}

func (s *streamState) text(t string) {
	if t == "" {
		return
	}
	s.content.WriteString(t)
	s.onDelta(t)
}

// block returns the block at index i, creating it (and any before it) if needed.
func (s *streamState) block(i int) (*streamBlock, error) {
	if i < 0 || i >= maxBlocks {
		return nil, fmt.Errorf("anthropic: stream content block index %d out of range", i)
	}
	for len(s.blocks) <= i {
		s.blocks = append(s.blocks, &streamBlock{})
	}
	return s.blocks[i], nil
}

// result is the assembled answer.
func (s *streamState) result() llm.Response {
	out := s.out
	out.Content = s.content.String()
	out.Usage.TotalTokens = out.Usage.InputTokens + out.Usage.OutputTokens
	for _, b := range s.blocks {
		if !b.tool {
			continue
		}
		args := b.args.String()
		if args == "" {
			args = inputText(b.start)
		}
		out.ToolCalls = append(out.ToolCalls, llm.ToolCall{ID: b.id, Name: b.name, Arguments: args})
	}
	return out
}
