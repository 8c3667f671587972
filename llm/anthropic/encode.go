package anthropic

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/packages/param"

	"github.com/fathom-agents/fathom/llm/internal/wire"
)

// encodeBody is the request body for p: the SDK's encoding of everything but the
// messages, with the messages appended in front by appendMessages. A long history was
// most of a call's own cost through the SDK's reflective encoder.
func encodeBody(p anthropic.MessageNewParams) ([]byte, error) {
	msgs := p.Messages
	p.Messages = nil // omitted from the SDK's encoding
	rest, err := json.Marshal(p)
	if err != nil || len(rest) < 2 || rest[0] != '{' {
		return nil, fmt.Errorf("anthropic: encode request: %w", errors.Join(err, errors.New("not a JSON object")))
	}
	n := len(rest) + 64
	for _, m := range msgs {
		for _, b := range m.Content {
			n += 96
			if t := b.OfText; t != nil {
				n += len(t.Text)
			} else if r := b.OfToolResult; r != nil && len(r.Content) == 1 && r.Content[0].OfText != nil {
				n += len(r.Content[0].OfText.Text)
			}
		}
	}
	b := make([]byte, 0, n+n/16)
	b = append(b, `{"messages":[`...)
	for i, m := range msgs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"role":`...)
		b = wire.AppendString(b, string(m.Role))
		b = append(b, `,"content":[`...)
		for j, blk := range m.Content {
			if j > 0 {
				b = append(b, ',')
			}
			if b, err = appendBlock(b, blk); err != nil {
				return nil, err
			}
		}
		b = append(b, `]}`...)
	}
	b = append(b, ']')
	if rest[1] != '}' {
		b = append(b, ',')
	}
	return append(b, rest[1:]...), nil
}

// appendBlock appends one content block. The kinds Fathom sends (text, tool_use,
// tool_result with text, thinking, redacted_thinking) are written directly; any other
// block, or one with fields these do not cover, goes through the SDK's encoding.
func appendBlock(b []byte, blk anthropic.ContentBlockParamUnion) ([]byte, error) {
	switch {
	case blk.OfText != nil && len(blk.OfText.Citations) == 0:
		t := blk.OfText
		b = append(b, `{"type":"text","text":`...)
		b = wire.AppendString(b, t.Text)
		return appendCacheControl(b, t.CacheControl), nil
	case blk.OfToolUse != nil && param.IsOmitted(blk.OfToolUse.Caller) && param.IsOmitted(blk.OfToolUse.ToolsetName):
		t := blk.OfToolUse
		input, ok := t.Input.(json.RawMessage)
		if !ok {
			break
		}
		mark := len(b)
		b = append(b, `{"type":"tool_use","id":`...)
		b = wire.AppendString(b, t.ID)
		b = append(b, `,"name":`...)
		b = wire.AppendString(b, t.Name)
		b = append(b, `,"input":`...)
		if b, ok = wire.AppendCompact(b, input); !ok {
			b = b[:mark]
			break
		}
		return appendCacheControl(b, t.CacheControl), nil
	case blk.OfToolResult != nil && param.IsOmitted(blk.OfToolResult.IsError) && param.IsOmitted(blk.OfToolResult.ToolsetName) && textOnly(blk.OfToolResult.Content):
		r := blk.OfToolResult
		b = append(b, `{"type":"tool_result","tool_use_id":`...)
		b = wire.AppendString(b, r.ToolUseID)
		if len(r.Content) > 0 {
			b = append(b, `,"content":[`...)
			for i, c := range r.Content {
				if i > 0 {
					b = append(b, ',')
				}
				b = append(b, `{"type":"text","text":`...)
				b = wire.AppendString(b, c.OfText.Text)
				b = append(b, '}')
			}
			b = append(b, ']')
		}
		return appendCacheControl(b, r.CacheControl), nil
	case blk.OfThinking != nil:
		b = append(b, `{"type":"thinking","thinking":`...)
		b = wire.AppendString(b, blk.OfThinking.Thinking)
		b = append(b, `,"signature":`...)
		b = wire.AppendString(b, blk.OfThinking.Signature)
		return append(b, '}'), nil
	case blk.OfRedactedThinking != nil:
		b = append(b, `{"type":"redacted_thinking","data":`...)
		b = wire.AppendString(b, blk.OfRedactedThinking.Data)
		return append(b, '}'), nil
	}
	enc, err := json.Marshal(blk)
	if err != nil {
		return nil, fmt.Errorf("anthropic: encode content block: %w", err)
	}
	return append(b, enc...), nil
}

// textOnly reports whether a tool result's content is plain text blocks.
func textOnly(cs []anthropic.ToolResultBlockParamContentUnion) bool {
	for _, c := range cs {
		if c.OfText == nil || len(c.OfText.Citations) > 0 || !param.IsOmitted(c.OfText.CacheControl) {
			return false
		}
	}
	return true
}

// appendCacheControl appends the block's cache_control (when set) and closes it.
func appendCacheControl(b []byte, cc anthropic.CacheControlEphemeralParam) []byte {
	if param.IsOmitted(cc) {
		return append(b, '}')
	}
	b = append(b, `,"cache_control":{"type":"ephemeral"`...)
	if cc.TTL != "" {
		b = append(b, `,"ttl":`...)
		b = wire.AppendString(b, string(cc.TTL))
	}
	return append(b, `}}`...)
}
