package anthropic

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"
	"github.com/anthropics/anthropic-sdk-go/packages/ssestream"

	"github.com/fathom-agents/fathom/llm"
)

// maxBlocks bounds a streamed content block index, so a broken stream cannot make the
// client allocate without limit.
const maxBlocks = 1024

// streamBlock is a content block being assembled; text goes straight to the content.
type streamBlock struct {
	kind     string // "tool_use", "thinking", "redacted_thinking" or "" (text, other)
	id, name string
	start    string          // the tool input given in content_block_start
	args     strings.Builder // the input_json_delta fragments
	thinking strings.Builder
	sig      string
	data     string
}

// streamState assembles a streamed answer event by event.
type streamState struct {
	out     llm.Response
	content strings.Builder
	blocks  []*streamBlock
	onDelta func(string)
	// in, cacheRead, cacheWrite and output are the usage counts as last reported.
	in, cacheRead, cacheWrite, output int64
}

// stream makes a streamed call, calling onDelta for each text delta in order and
// assembling tool calls from their input_json_delta fragments and thinking blocks from
// their thinking and signature deltas. The stream must end with message_stop; a stream
// that ends earlier is an error wrapping io.ErrUnexpectedEOF (retryable), and an
// "error" event is an *llm.APIError.
//
// The calling goroutine waits for each event with this frame on its stack: the params
// and the events (the SDK's types, kilobytes each) are copied only in functions of their
// own (openStream, streamState.next), never inlined.
func (c *Client) stream(ctx context.Context, p *anthropic.MessageNewParams, onDelta func(string)) (llm.Response, error) {
	s := c.openStream(ctx, p)
	defer s.Close()
	st := &streamState{onDelta: onDelta}
	for s.Next() {
		done, err := st.next(s)
		if err != nil {
			return llm.Response{}, err
		}
		if done {
			return st.result(), nil
		}
	}
	return llm.Response{}, st.failed(s.Err())
}

// openStream starts the streamed call of p: the SDK encodes p (adding "stream":true)
// and decodes the events (see stream).
//
//go:noinline
func (c *Client) openStream(ctx context.Context, p *anthropic.MessageNewParams) *ssestream.Stream[anthropic.MessageStreamEventUnion] {
	return c.msgs.NewStreaming(ctx, *p, option.WithHeader("Accept", "text/event-stream"))
}

// next applies the stream's current event (see stream); done reports message_stop.
//
//go:noinline
func (s *streamState) next(st *ssestream.Stream[anthropic.MessageStreamEventUnion]) (done bool, err error) {
	return s.handle(st.Current())
}

// failed is the error of a stream that ended (with err, the stream's) before
// message_stop.
//
//go:noinline
func (s *streamState) failed(err error) error {
	if err == nil {
		err = io.ErrUnexpectedEOF // ended without message_stop
	} else if malformed(err) {
		return fmt.Errorf("anthropic: malformed stream event: %w", errors.Join(llm.ErrMalformedResponse, err))
	}
	err = callError(err)
	if _, ok := err.(*llm.APIError); ok {
		return fmt.Errorf("anthropic: stream error after %d bytes of text: %w", s.content.Len(), err)
	}
	return fmt.Errorf("anthropic: stream cut after %d bytes of text: %w", s.content.Len(), err)
}

// handle applies one event; done reports message_stop.
func (s *streamState) handle(ev anthropic.MessageStreamEventUnion) (done bool, err error) {
	switch ev.Type {
	case "message_start":
		m := ev.Message
		s.out.Model = string(m.Model)
		s.in, s.cacheRead, s.cacheWrite, s.output = m.Usage.InputTokens, m.Usage.CacheReadInputTokens, m.Usage.CacheCreationInputTokens, m.Usage.OutputTokens
	case "content_block_start":
		b, err := s.block(ev.Index)
		if err != nil {
			return false, err
		}
		switch cb := ev.ContentBlock; cb.Type {
		case "text":
			s.text(cb.Text)
		case "tool_use":
			b.kind, b.id, b.name, b.start = "tool_use", cb.ID, cb.Name, inputText([]byte(cb.JSON.Input.Raw()))
		case "thinking":
			b.kind, b.sig = "thinking", cb.Signature
			b.thinking.WriteString(cb.Thinking)
		case "redacted_thinking":
			b.kind, b.data = "redacted_thinking", cb.Data
		}
	case "content_block_delta":
		return false, s.delta(ev)
	case "message_delta":
		if r := ev.Delta.StopReason; r != "" {
			s.out.FinishReason = finishReason(string(r))
		}
		u := ev.Usage // cumulative; input counts only when given
		s.output = u.OutputTokens
		if u.InputTokens > 0 {
			s.in = u.InputTokens
		}
		if u.CacheReadInputTokens > 0 {
			s.cacheRead = u.CacheReadInputTokens
		}
		if u.CacheCreationInputTokens > 0 {
			s.cacheWrite = u.CacheCreationInputTokens
		}
	case "message_stop":
		return true, nil
	}
	// ping, content_block_stop and event types added later need nothing.
	return false, nil
}

// delta applies a content_block_delta.
func (s *streamState) delta(ev anthropic.MessageStreamEventUnion) error {
	switch ev.Delta.Type {
	case "text_delta":
		s.text(ev.Delta.Text)
		return nil
	case "input_json_delta", "thinking_delta", "signature_delta":
	default:
		return nil
	}
	b, err := s.block(ev.Index)
	if err != nil {
		return err
	}
	switch ev.Delta.Type {
	case "input_json_delta":
		if b.kind != "tool_use" {
			return fmt.Errorf("anthropic: stream input_json_delta for block %d, which is not a tool_use block", ev.Index)
		}
		b.args.WriteString(ev.Delta.PartialJSON)
	case "thinking_delta":
		b.thinking.WriteString(ev.Delta.Thinking)
	case "signature_delta":
		b.sig += ev.Delta.Signature
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
func (s *streamState) block(i int64) (*streamBlock, error) {
	if i < 0 || i >= maxBlocks {
		return nil, fmt.Errorf("anthropic: stream content block index %d out of range", i)
	}
	for int64(len(s.blocks)) <= i {
		s.blocks = append(s.blocks, &streamBlock{})
	}
	return s.blocks[i], nil
}

// result is the assembled answer.
func (s *streamState) result() llm.Response {
	out := s.out
	out.Content = s.content.String()
	out.Usage = usage(s.in, s.cacheRead, s.cacheWrite, s.output)
	for _, b := range s.blocks {
		switch b.kind {
		case "tool_use":
			args := b.args.String()
			if args == "" {
				args = b.start
			}
			out.ToolCalls = append(out.ToolCalls, llm.ToolCall{ID: b.id, Name: b.name, Arguments: args})
		case "thinking":
			out.Thinking = append(out.Thinking, llm.ThinkingBlock{Thinking: b.thinking.String(), Signature: b.sig})
		case "redacted_thinking":
			out.Thinking = append(out.Thinking, llm.ThinkingBlock{RedactedData: b.data})
		}
	}
	return out
}
