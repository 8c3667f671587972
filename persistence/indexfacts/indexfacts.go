// Package indexfacts reads the session index's facts from a batch of a session's event
// records: the user and goal of session_started, the cost and tokens of llm_responded
// and the size of artifact_written. It is the
// persistence.FactsFunc the node gives its journal (bolt.Options.Facts,
// postgres.Options.Facts); the journal packages themselves never decode events.
//
// It runs on every indexed append, so a model call's cost is read straight from the
// record's wire bytes (Event.llm_responded.cost_usd) without decoding the answer's text.
package indexfacts

import (
	"math"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/fathom-agents/fathom/messages"
	"github.com/fathom-agents/fathom/persistence"
)

var _ persistence.FactsFunc = Of

// Field numbers read from the wire (messages/events.proto).
const (
	fieldLlmResponded = 14 // Event.llm_responded
	fieldCostUSD      = 9  // LlmResponded.cost_usd
	fieldUsage        = 4  // LlmResponded.usage
	fieldInputTokens  = 1  // Usage.input_tokens
	fieldOutputTokens = 2  // Usage.output_tokens
	fieldTotalTokens  = 3  // Usage.total_tokens

	fieldArtifactWritten = 42 // Event.artifact_written
	fieldArtifactSize    = 5  // ArtifactWritten.size
)

// Of returns the facts of recs. Records that do not decode add nothing: the journal's
// readers report those.
func Of(recs []persistence.Record) persistence.SessionFacts {
	var f persistence.SessionFacts
	for _, r := range recs {
		switch r.Type {
		case "session_started":
			ev := &messages.Event{}
			if err := proto.Unmarshal(r.Data, ev); err != nil {
				continue
			}
			s := ev.GetSessionStarted()
			f.Started, f.UserID, f.Goal = true, s.GetUserId(), persistence.CutGoal(s.GetGoal())
			f.Tenant, f.Owner = s.GetTenant(), s.GetOwner()
			if f.Tenant == "" {
				f.Tenant = persistence.DefaultTenant
			}
		case "session_forked": // a fork's first batch: its own tenant and owner
			ev := &messages.Event{}
			if err := proto.Unmarshal(r.Data, ev); err != nil {
				continue
			}
			s := ev.GetSessionForked()
			if s.GetTenant() != "" {
				f.Tenant, f.Owner = s.GetTenant(), s.GetOwner()
			}
			f.ForkedFrom = s.GetSourceSessionId()
		case "llm_responded":
			f.CostUSD += costOf(r.Data)
			f.Tokens += tokensOf(r.Data)
		case "artifact_written":
			f.ArtifactBytes += artifactSizeOf(r.Data)
		}
	}
	return f
}

// costOf reads Event.llm_responded.cost_usd from an encoded event (0 when absent or
// malformed).
func costOf(b []byte) float64 {
	msg := field(b, fieldLlmResponded, protowire.BytesType)
	if msg == nil {
		return 0
	}
	v := field(msg, fieldCostUSD, protowire.Fixed64Type)
	if len(v) != 8 {
		return 0
	}
	bits, n := protowire.ConsumeFixed64(v)
	if n < 0 {
		return 0
	}
	return math.Float64frombits(bits)
}

// tokensOf reads the tokens an llm_responded record's usage counts, as the session
// budgets count them: its total, or input + output when that is larger.
func tokensOf(b []byte) uint64 {
	msg := field(b, fieldLlmResponded, protowire.BytesType)
	if msg == nil {
		return 0
	}
	u := field(msg, fieldUsage, protowire.BytesType)
	if u == nil {
		return 0
	}
	varint := func(num protowire.Number) uint64 {
		v := field(u, num, protowire.VarintType)
		if v == nil {
			return 0
		}
		n, l := protowire.ConsumeVarint(v)
		if l < 0 {
			return 0
		}
		return n
	}
	return max(varint(fieldTotalTokens), varint(fieldInputTokens)+varint(fieldOutputTokens))
}

// artifactSizeOf reads Event.artifact_written.size from an encoded event (0 when absent
// or malformed).
func artifactSizeOf(b []byte) uint64 {
	msg := field(b, fieldArtifactWritten, protowire.BytesType)
	if msg == nil {
		return 0
	}
	v := field(msg, fieldArtifactSize, protowire.VarintType)
	if v == nil {
		return 0
	}
	n, l := protowire.ConsumeVarint(v)
	if l < 0 {
		return 0
	}
	return n
}

// field returns the last occurrence of field num of type typ in the message b: the
// payload of a bytes field, or the 8 bytes of a fixed64 one or a varint's bytes; nil when absent or b is
// malformed.
func field(b []byte, num protowire.Number, typ protowire.Type) []byte {
	var out []byte
	for len(b) > 0 {
		n, t, l := protowire.ConsumeTag(b)
		if l < 0 {
			return nil
		}
		b = b[l:]
		vl := protowire.ConsumeFieldValue(n, t, b)
		if vl < 0 {
			return nil
		}
		if n == num && t == typ {
			switch t {
			case protowire.BytesType:
				v, _ := protowire.ConsumeBytes(b[:vl])
				out = v
			default:
				out = b[:vl]
			}
		}
		b = b[vl:]
	}
	return out
}
