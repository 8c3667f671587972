package mock

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"
)

// plainString reports whether raw, a JSON string that the request's decoding already
// checked, decodes to its bytes between the quotes: no escapes, valid UTF-8 (which
// encoding/json would otherwise replace). Most contents are; they skip a second decode.
func plainString(raw []byte) bool {
	return len(raw) >= 2 && raw[len(raw)-1] == '"' && bytes.IndexByte(raw[1:len(raw)-1], '\\') < 0 && utf8.Valid(raw)
}

// chatContent decodes a chat message's content the way the real API takes it: a
// string, null (an assistant turn with tool calls), or an array of content parts, which
// is what LangChain, LiteLLM and the Vercel AI SDK send. The text of "text" parts (and
// of an assistant's "refusal" parts) is concatenated in order; "image_url",
// "input_audio" and "file" parts are skipped, since the mock reads text only. Any other
// part, or a part without its fields, is an error naming it.
func chatContent(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	switch raw[0] {
	case '"':
		if plainString(raw) {
			return string(raw[1 : len(raw)-1]), nil
		}
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", err
		}
		return s, nil
	case '[':
	default:
		return "", fmt.Errorf("must be a string or an array of content parts, got %s", firstBytes(raw))
	}
	var parts []struct {
		Type    string  `json:"type"`
		Text    *string `json:"text"`
		Refusal *string `json:"refusal"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", fmt.Errorf("content parts: %w", err)
	}
	var b strings.Builder
	for i, p := range parts {
		switch p.Type {
		case "text":
			if p.Text == nil {
				return "", fmt.Errorf("part %d: a text part needs \"text\"", i)
			}
			b.WriteString(*p.Text)
		case "refusal":
			if p.Refusal == nil {
				return "", fmt.Errorf("part %d: a refusal part needs \"refusal\"", i)
			}
			b.WriteString(*p.Refusal)
		case "image_url", "input_audio", "file":
			// Accepted and ignored: the scripted model sees text only.
		default:
			return "", fmt.Errorf("part %d: unknown content part type %q (want text, image_url, input_audio, file or refusal)", i, p.Type)
		}
	}
	return b.String(), nil
}

// firstBytes quotes the start of raw for an error message.
func firstBytes(raw []byte) string {
	if len(raw) > 20 {
		raw = raw[:20]
	}
	return fmt.Sprintf("%q", raw)
}

// embeddingModels are the native dimensions of the OpenAI embedding models the mock
// knows, and whether each takes the request's "dimensions" (shortening).
var embeddingModels = map[string]struct {
	dims       int
	shortening bool
}{
	"text-embedding-3-small": {1536, true},
	"text-embedding-3-large": {3072, true},
	"text-embedding-ada-002": {1536, false},
}

// MaxEmbeddingDims bounds the dimensions a request may ask of a model the mock does not
// know.
const MaxEmbeddingDims = 4096

// EmbeddingDims is the length of model's embeddings when a request names no
// dimensions: the real model's for OpenAI's embedding models (text-embedding-3-small
// and ada-002 1536, text-embedding-3-large 3072), DefaultEmbeddingDims for any other.
func EmbeddingDims(model string) int {
	if m, ok := embeddingModels[model]; ok {
		return m.dims
	}
	return DefaultEmbeddingDims
}

// embeddingDims is the length a request gets, or the invalid_request_error message: as
// the real API, "dimensions" shortens text-embedding-3 vectors (1..native), is refused
// by ada-002, and other models take 1..MaxEmbeddingDims.
func embeddingDims(model string, requested int) (int, error) {
	if requested == 0 {
		return EmbeddingDims(model), nil
	}
	limit := MaxEmbeddingDims
	if m, ok := embeddingModels[model]; ok {
		if !m.shortening {
			return 0, fmt.Errorf("model %s does not support specifying dimensions", model)
		}
		limit = m.dims
	}
	if requested < 1 || requested > limit {
		return 0, fmt.Errorf("dimensions must be between 1 and %d for model %q, got %d", limit, model, requested)
	}
	return requested, nil
}
