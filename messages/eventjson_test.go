package messages

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

func TestMarshalEventJSONIsFlat(t *testing.T) {
	at := time.Date(2026, 11, 22, 10, 0, 0, 123, time.UTC)
	ev := &Event{Seq: 7, SessionId: "s1", AtUnixNano: at.UnixNano(), CommandId: "c1",
		Payload: &Event_LlmResponded{LlmResponded: &LlmResponded{CallId: "plan-1", Content: "hi",
			Usage: &Usage{InputTokens: 10, OutputTokens: 3, TotalTokens: 13}, DurationMs: 42}}}
	b, err := MarshalEventJSON(ev)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	want := map[string]any{"type": "llm_responded", "seq": 7.0, "session_id": "s1", "at": "2026-11-22T10:00:00.000000123Z",
		"command_id": "c1", "call_id": "plan-1", "content": "hi", "duration_ms": 42.0, "step_id": "", "model": "", "finish_reason": ""}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %#v, want %#v (in %s)", k, got[k], v, b)
		}
	}
	usage, _ := got["usage"].(map[string]any)
	if usage["input_tokens"] != 10.0 || usage["total_tokens"] != 13.0 {
		t.Errorf("usage = %#v, want numbers", got["usage"])
	}
}

func TestMarshalEventJSONWithoutPayload(t *testing.T) {
	if _, err := MarshalEventJSON(&Event{Seq: 1}); err != ErrNoPayload {
		t.Fatalf("err = %v, want ErrNoPayload", err)
	}
}

// TestPayloadFieldsDoNotShadowTheEnvelope keeps the flat JSON unambiguous: no event may
// have a field named like an envelope key.
func TestPayloadFieldsDoNotShadowTheEnvelope(t *testing.T) {
	envelope := map[string]bool{"type": true, "seq": true, "session_id": true, "at": true, "command_id": true, "op": true}
	oneof := (&Event{}).ProtoReflect().Descriptor().Oneofs().ByName("payload")
	for i := 0; i < oneof.Fields().Len(); i++ {
		fd := oneof.Fields().Get(i)
		fields := fd.Message().Fields()
		for j := 0; j < fields.Len(); j++ {
			if name := string(fields.Get(j).Name()); envelope[name] {
				t.Errorf("event %s has field %q, which the flat JSON uses for the envelope", fd.Name(), name)
			}
		}
		if fd.Kind() != protoreflect.MessageKind {
			t.Errorf("payload %s is not a message", fd.Name())
		}
	}
}

// TestUnmarshalEventJSONRoundTrips: every event of a full session survives
// MarshalEventJSON → UnmarshalEventJSON unchanged, also wrapped in a gateway frame.
func TestUnmarshalEventJSONRoundTrips(t *testing.T) {
	evs := []*Event{
		{Seq: 1, SessionId: "s", AtUnixNano: 1700000000123456789, CommandId: "c1", Payload: &Event_SessionStarted{SessionStarted: &SessionStarted{Goal: "g", Config: &SessionConfig{Model: "m", MaxIterations: 9}}}},
		{Seq: 2, SessionId: "s", AtUnixNano: 1700000000223456789, Payload: &Event_LlmResponded{LlmResponded: &LlmResponded{CallId: "c", Content: "hi", Usage: &Usage{InputTokens: 1 << 40, OutputTokens: 7}, CostUsd: 0.5,
			ToolCalls: []*ToolCallRequest{{Id: "t", Name: "x", Arguments: `{"a":1}`}}}}},
		{Seq: 3, SessionId: "s", AtUnixNano: 1700000000323456789, Payload: &Event_ToolResult{ToolResult: &ToolResult{CallId: "t", Error: &ToolFailure{ErrorType: "timeout", Retryable: true}}}},
	}
	for _, ev := range evs {
		b, err := MarshalEventJSON(ev)
		if err != nil {
			t.Fatal(err)
		}
		for _, in := range [][]byte{b, append([]byte(`{"op":"event",`), b[1:]...)} {
			got, err := UnmarshalEventJSON(in)
			if err != nil {
				t.Fatalf("%s: %v", in, err)
			}
			if !proto.Equal(got, ev) {
				t.Fatalf("round trip of %s:\n got %v\nwant %v", in, got, ev)
			}
		}
	}
	for _, bad := range []string{`{`, `{"type":"nope","seq":1}`, `{"type":"session_started","seq":1,"bogus":2}`} {
		if _, err := UnmarshalEventJSON([]byte(bad)); err == nil {
			t.Errorf("UnmarshalEventJSON(%s): no error", bad)
		}
	}
}

// TestMarshalJSONRendersIntegersAsNumbers: grain answers render 64-bit integers as JSON
// numbers, at the top and nested (repeated messages), as event frames do; other fields
// keep their proto3 JSON form.
func TestMarshalJSONRendersIntegersAsNumbers(t *testing.T) {
	tl := &TimelineResponse{SessionId: "s1", Seq: 12, PlanSeq: 3, Entries: []*TimelineEntry{
		{StepId: "step-1", StartedSeq: 4, EndedSeq: 9, StartedAtUnixNano: 1764000000000000000, Status: StepStatus_STEP_STATUS_COMPLETED},
	}}
	b, err := MarshalJSON(tl)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	entry := got["entries"].([]any)[0].(map[string]any)
	for k, v := range map[string]any{"seq": got["seq"], "plan_seq": got["plan_seq"], "started_seq": entry["started_seq"],
		"ended_seq": entry["ended_seq"], "started_at_unix_nano": entry["started_at_unix_nano"], "ended_at_unix_nano": entry["ended_at_unix_nano"]} {
		if _, ok := v.(float64); !ok {
			t.Errorf("%s = %#v, want a JSON number (%s)", k, v, b)
		}
	}
	if got["session_id"] != "s1" || entry["status"] != "STEP_STATUS_COMPLETED" || !strings.Contains(string(b), `"started_at_unix_nano":1764000000000000000`) {
		t.Fatalf("rendering changed more than the integers: %s", b)
	}
}

// TestEventRecordCodec: DecodeEvent inverts EncodeEvent, and refuses bytes that are not
// an event or hold another seq than the record's, with ErrBadRecord.
func TestEventRecordCodec(t *testing.T) {
	ev := &Event{Seq: 3, SessionId: "s1", AtUnixNano: 42, Payload: &Event_SessionStarted{SessionStarted: &SessionStarted{Goal: "g"}}}
	b, err := EncodeEvent(ev)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeEvent(3, b)
	if err != nil || !proto.Equal(got, ev) {
		t.Fatalf("DecodeEvent = %v, %v; want %v", got, err, ev)
	}
	for name, tc := range map[string]struct {
		seq  uint64
		data []byte
	}{"another seq": {4, b}, "not an event": {3, []byte{0xff, 0xff}}} {
		if _, err := DecodeEvent(tc.seq, tc.data); !errors.Is(err, ErrBadRecord) {
			t.Errorf("%s: err = %v, want ErrBadRecord", name, err)
		}
	}
}

// TestMarshalEventJSONEncodesOnce: rendering an event costs what protojson's one encoding
// of its payload costs, plus the output buffer: no decoding into maps, no second
// encoding of its fields.
func TestMarshalEventJSONEncodesOnce(t *testing.T) {
	for _, ev := range benchEvents() {
		payload := ev.PayloadMessage()
		once := testing.AllocsPerRun(50, func() {
			if _, err := payloadJSON.Marshal(payload); err != nil {
				t.Fatal(err)
			}
		})
		got := testing.AllocsPerRun(50, func() {
			if _, err := MarshalEventJSON(ev); err != nil {
				t.Fatal(err)
			}
		})
		if got > once+1 {
			t.Errorf("%s: %.0f allocations per event, want at most protojson's %.0f + 1 (the buffer)", ev.Type(), got, once)
		}
	}
}
