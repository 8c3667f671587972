package fsp

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

var ts0 = time.Date(2025, 12, 27, 11, 30, 0, 0, time.UTC)

func ptr[T any](v T) *T { return &v }

// The spec's own examples decode to the expected messages.
func TestDecodeSpecExamples(t *testing.T) {
	cases := []struct {
		name  string
		frame string
		want  Message
	}{
		{"execute", `{"v":1,"type":"execute","id":"exec_a1b2c3d4","ts":"2025-12-27T11:30:00.000Z","language":"python","code":"print('hello world')","stdin":null,"env":{"API_KEY":"..."},"limits":{"timeout_ms":30000,"memory_mb":256,"cpu_shares":512,"max_output_bytes":1048576}}`,
			&Execute{Header: NewHeader(TypeExecute, "exec_a1b2c3d4", ts0), Language: LangPython, Code: "print('hello world')", Env: map[string]string{"API_KEY": "..."}, Limits: Limits{TimeoutMS: 30000, MemoryMB: 256, CPUShares: 512, MaxOutputBytes: 1048576}}},
		{"cancel", `{"v":1,"type":"cancel","id":"exec_a1b2c3d4","ts":"2025-12-27T11:30:00.000Z"}`,
			&Cancel{Header: NewHeader(TypeCancel, "exec_a1b2c3d4", ts0)}},
		{"ping", `{"v":1,"type":"ping","ts":"2025-12-27T11:30:00.000Z"}`, &Ping{Header: NewHeader(TypePing, "", ts0)}},
		{"ack", `{"v":1,"type":"ack","id":"e","ts":"2025-12-27T11:30:00Z"}`, &Ack{Header: NewHeader(TypeAck, "e", ts0)}},
		{"status", `{"v":1,"type":"status","id":"e","ts":"2025-12-27T11:30:00.000Z","status":"running"}`,
			&StatusUpdate{Header: NewHeader(TypeStatus, "e", ts0), Status: StatusRunning}},
		{"stdout", `{"v":1,"type":"stdout","id":"e","ts":"2025-12-27T11:30:00.000Z","data":"hello world\n"}`,
			&Output{Header: NewHeader(TypeStdout, "e", ts0), Data: "hello world\n"}},
		{"stderr empty", `{"v":1,"type":"stderr","id":"e","ts":"2025-12-27T11:30:00.000Z","data":""}`,
			&Output{Header: NewHeader(TypeStderr, "e", ts0)}},
		{"result", `{"v":1,"type":"result","id":"e","ts":"2025-12-27T11:30:00.000Z","exit_code":0,"duration_ms":1500,"resource_usage":{"peak_memory_mb":45,"cpu_time_ms":120}}`,
			&Result{Header: NewHeader(TypeResult, "e", ts0), ExitCode: ptr(0), DurationMS: 1500, ResourceUsage: &ResourceUsage{PeakMemoryMB: 45, CPUTimeMS: 120}}},
		{"result signal", `{"v":1,"type":"result","id":"e","ts":"2025-12-27T11:30:00.000Z","exit_code":null,"duration_ms":3}`,
			&Result{Header: NewHeader(TypeResult, "e", ts0), DurationMS: 3}},
		{"error", `{"v":1,"type":"error","id":"e","ts":"2025-12-27T11:30:00.000Z","code":"LANGUAGE_NOT_SUPPORTED","message":"Language 'rust' is not available in this sandbox","retryable":false}`,
			&Error{Header: NewHeader(TypeError, "e", ts0), Code: CodeLanguageNotSupported, Message: "Language 'rust' is not available in this sandbox"}},
		{"error no id", `{"v":1,"type":"error","ts":"2025-12-27T11:30:00.000Z","code":"INVALID_REQUEST","message":"x","retryable":false}`,
			&Error{Header: NewHeader(TypeError, "", ts0), Code: CodeInvalidRequest, Message: "x"}},
		{"pong", `{"v":1,"type":"pong","ts":"2025-12-27T11:30:00.000Z","load":{"active_executions":3,"queue_depth":0}}`,
			&Pong{Header: NewHeader(TypePong, "", ts0), Load: &Load{ActiveExecutions: 3}}},
		{"pong no load", `{"v":1,"type":"pong","ts":"2025-12-27T11:30:00.000Z"}`, &Pong{Header: NewHeader(TypePong, "", ts0)}},
		{"unknown field ignored", `{"v":1,"type":"ping","ts":"2025-12-27T11:30:00.000Z","extra":[1,2]}`, &Ping{Header: NewHeader(TypePing, "", ts0)}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := Decode([]byte(c.frame))
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			got.MessageHeader().TS.Time = got.MessageHeader().TS.UTC()
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("Decode = %#v\nwant %#v", got, c.want)
			}
		})
	}
}

// Malformed frames fail with the right sentinel, field and (when readable) id.
func TestDecodeErrors(t *testing.T) {
	const ts = `"ts":"2025-12-27T11:30:00.000Z"`
	cases := []struct {
		name, frame string
		want        error
		field, id   string
	}{
		{"not json", `{"v":1,`, ErrMalformed, "", ""},
		{"array", `[1]`, ErrMalformed, "", ""},
		{"null", `null`, ErrMalformed, "", ""},
		{"string", `"x"`, ErrMalformed, "", ""},
		{"empty", ``, ErrMalformed, "", ""},
		{"no v", `{"type":"ping",` + ts + `}`, ErrMissingField, "v", ""},
		{"v string", `{"v":"1","type":"ping",` + ts + `}`, ErrInvalidField, "v", ""},
		{"v float", `{"v":1.5,"type":"ping",` + ts + `}`, ErrInvalidField, "v", ""},
		{"v 2", `{"v":2,"type":"cancel","id":"e",` + ts + `}`, ErrUnsupportedVersion, "v", "e"},
		{"no type", `{"v":1,` + ts + `}`, ErrMissingField, "type", ""},
		{"unknown type", `{"v":1,"type":"exec","id":"e",` + ts + `}`, ErrUnknownType, "type", "e"},
		{"no ts", `{"v":1,"type":"ping"}`, ErrMissingField, "ts", ""},
		{"bad ts", `{"v":1,"type":"ping","ts":"yesterday"}`, ErrInvalidField, "ts", ""},
		{"ts number", `{"v":1,"type":"ping","ts":5}`, ErrInvalidField, "ts", ""},
		{"id number", `{"v":1,"type":"cancel","id":5,` + ts + `}`, ErrInvalidField, "id", ""},
		{"cancel no id", `{"v":1,"type":"cancel",` + ts + `}`, ErrMissingField, "id", ""},
		{"cancel empty id", `{"v":1,"type":"cancel","id":"",` + ts + `}`, ErrMissingField, "id", ""},
		{"execute no code", `{"v":1,"type":"execute","id":"e",` + ts + `,"language":"python","limits":{"timeout_ms":1,"memory_mb":1}}`, ErrMissingField, "code", "e"},
		{"execute null code", `{"v":1,"type":"execute","id":"e",` + ts + `,"language":"python","code":null,"limits":{"timeout_ms":1,"memory_mb":1}}`, ErrMissingField, "code", "e"},
		{"execute no limits", `{"v":1,"type":"execute","id":"e",` + ts + `,"language":"python","code":""}`, ErrMissingField, "limits", "e"},
		{"execute limits array", `{"v":1,"type":"execute","id":"e",` + ts + `,"language":"python","code":"","limits":[]}`, ErrInvalidField, "limits", "e"},
		{"execute no timeout", `{"v":1,"type":"execute","id":"e",` + ts + `,"language":"python","code":"","limits":{"memory_mb":1}}`, ErrMissingField, "limits.timeout_ms", "e"},
		{"execute no memory", `{"v":1,"type":"execute","id":"e",` + ts + `,"language":"python","code":"","limits":{"timeout_ms":1}}`, ErrMissingField, "limits.memory_mb", "e"},
		{"execute zero timeout", `{"v":1,"type":"execute","id":"e",` + ts + `,"language":"python","code":"","limits":{"timeout_ms":0,"memory_mb":1}}`, ErrInvalidField, "limits.timeout_ms", "e"},
		{"execute negative output", `{"v":1,"type":"execute","id":"e",` + ts + `,"language":"python","code":"","limits":{"timeout_ms":1,"memory_mb":1,"max_output_bytes":-1}}`, ErrInvalidField, "limits.max_output_bytes", "e"},
		{"execute string timeout", `{"v":1,"type":"execute","id":"e",` + ts + `,"language":"python","code":"","limits":{"timeout_ms":"1","memory_mb":1}}`, ErrInvalidField, "limits.timeout_ms", "e"},
		{"execute code number", `{"v":1,"type":"execute","id":"e",` + ts + `,"language":"python","code":1,"limits":{"timeout_ms":1,"memory_mb":1}}`, ErrInvalidField, "code", "e"},
		{"execute env number", `{"v":1,"type":"execute","id":"e",` + ts + `,"language":"python","code":"","env":{"A":1},"limits":{"timeout_ms":1,"memory_mb":1}}`, ErrInvalidField, "env", "e"},
		{"execute env key =", `{"v":1,"type":"execute","id":"e",` + ts + `,"language":"python","code":"","env":{"A=B":"1"},"limits":{"timeout_ms":1,"memory_mb":1}}`, ErrInvalidField, "env", "e"},
		{"execute stdin number", `{"v":1,"type":"execute","id":"e",` + ts + `,"language":"python","code":"","stdin":3,"limits":{"timeout_ms":1,"memory_mb":1}}`, ErrInvalidField, "stdin", "e"},
		{"status unknown", `{"v":1,"type":"status","id":"e",` + ts + `,"status":"done"}`, ErrInvalidField, "status", "e"},
		{"status missing", `{"v":1,"type":"status","id":"e",` + ts + `}`, ErrMissingField, "status", "e"},
		{"stdout no data", `{"v":1,"type":"stdout","id":"e",` + ts + `}`, ErrMissingField, "data", "e"},
		{"result no exit_code", `{"v":1,"type":"result","id":"e",` + ts + `,"duration_ms":1}`, ErrMissingField, "exit_code", "e"},
		{"result no duration", `{"v":1,"type":"result","id":"e",` + ts + `,"exit_code":0}`, ErrMissingField, "duration_ms", "e"},
		{"result negative duration", `{"v":1,"type":"result","id":"e",` + ts + `,"exit_code":0,"duration_ms":-1}`, ErrInvalidField, "duration_ms", "e"},
		{"error no retryable", `{"v":1,"type":"error","id":"e",` + ts + `,"code":"OOM","message":"m"}`, ErrMissingField, "retryable", "e"},
		{"error empty code", `{"v":1,"type":"error","id":"e",` + ts + `,"code":"","message":"m","retryable":false}`, ErrMissingField, "code", "e"},
		{"pong negative load", `{"v":1,"type":"pong",` + ts + `,"load":{"active_executions":-1,"queue_depth":0}}`, ErrInvalidField, "load", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, err := Decode([]byte(c.frame))
			if err == nil {
				t.Fatalf("Decode = %#v, want error %v", m, c.want)
			}
			var fe *FrameError
			if !errors.As(err, &fe) {
				t.Fatalf("error %T %v is not a *FrameError", err, err)
			}
			if !errors.Is(err, c.want) || fe.Field != c.field || fe.ID != c.id || fe.Op != "decode" {
				t.Fatalf("error %q: sentinel/field/id = %v/%q/%q, want %v/%q/%q", err, fe.Err, fe.Field, fe.ID, c.want, c.field, c.id)
			}
		})
	}
}

func TestDecodeFrameTooLarge(t *testing.T) {
	frame := []byte(`{"v":1,"type":"ping","ts":"2025-12-27T11:30:00.000Z","pad":"` + strings.Repeat("x", 100) + `"}`)
	if _, err := (Decoder{MaxFrameBytes: 50}).Decode(frame); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("Decode = %v, want ErrFrameTooLarge", err)
	}
	if _, err := (Decoder{MaxFrameBytes: len(frame)}).Decode(frame); err != nil {
		t.Fatalf("Decode at the bound: %v", err)
	}
}

func TestEncodeRoundTrip(t *testing.T) {
	msgs := []Message{
		&Execute{Header: Header{ID: "e", TS: Timestamp{ts0}}, Language: LangShell, Code: "echo hi", Stdin: ptr("in"), Env: map[string]string{"A": "b"}, Limits: Limits{TimeoutMS: 1000, MemoryMB: 64}},
		&Cancel{Header: Header{ID: "e", TS: Timestamp{ts0}}},
		&Ping{Header: Header{TS: Timestamp{ts0}}},
		&Ack{Header: Header{ID: "e", TS: Timestamp{ts0}}},
		&StatusUpdate{Header: Header{ID: "e", TS: Timestamp{ts0}}, Status: StatusOOM},
		&Output{Header: NewHeader(TypeStderr, "e", ts0), Data: "oops"},
		&Result{Header: Header{ID: "e", TS: Timestamp{ts0}}, ExitCode: ptr(3), DurationMS: 5, ResourceUsage: &ResourceUsage{PeakMemoryMB: 1, CPUTimeMS: 2}},
		NewError("e", CodeSandboxOverloaded, "busy", ts0),
		&Pong{Header: Header{TS: Timestamp{ts0}}, Load: &Load{ActiveExecutions: 1, QueueDepth: 2}},
	}
	for _, m := range msgs {
		b, err := Encode(m)
		if err != nil {
			t.Fatalf("Encode(%T): %v", m, err)
		}
		if !bytes.Contains(b, []byte(`"v":1`)) || !bytes.Contains(b, []byte(`"ts":"2025-12-27T11:30:00.000Z"`)) {
			t.Fatalf("Encode(%T) = %s: want v and a millisecond ts", m, b)
		}
		got, err := Decode(b)
		if err != nil {
			t.Fatalf("Decode(Encode(%T)) %s: %v", m, b, err)
		}
		got.MessageHeader().TS.Time = got.MessageHeader().TS.UTC()
		if !reflect.DeepEqual(got, m) {
			t.Fatalf("round trip of %s:\n got %#v\nwant %#v", b, got, m)
		}
	}
}

func TestEncodeFixedFields(t *testing.T) {
	// exit_code null is present; stdin null is present.
	b, err := Encode(&Result{Header: Header{ID: "e", TS: Timestamp{ts0}}})
	if err != nil || !bytes.Contains(b, []byte(`"exit_code":null`)) {
		t.Fatalf("Encode(result) = %s, %v: want exit_code null", b, err)
	}
	b, err = Encode(&Execute{Header: Header{ID: "e", TS: Timestamp{ts0}}, Language: LangPython, Limits: Limits{TimeoutMS: 1, MemoryMB: 1}})
	if err != nil || !bytes.Contains(b, []byte(`"stdin":null`)) || !bytes.Contains(b, []byte(`"code":""`)) {
		t.Fatalf("Encode(execute) = %s, %v", b, err)
	}
}

func TestEncodeRejectsInvalid(t *testing.T) {
	cases := []struct {
		m    Message
		want error
	}{
		{&Ack{Header: Header{TS: Timestamp{ts0}}}, ErrMissingField},
		{&Ack{Header: Header{ID: "e"}}, ErrMissingField},
		{&Ack{Header: Header{V: 2, ID: "e", TS: Timestamp{ts0}}}, ErrUnsupportedVersion},
		{&Ack{Header: Header{Type: TypeCancel, ID: "e", TS: Timestamp{ts0}}}, ErrUnknownType},
		{&Output{Header: NewHeader(TypeResult, "e", ts0)}, ErrUnknownType},
		{&StatusUpdate{Header: Header{ID: "e", TS: Timestamp{ts0}}, Status: "sleeping"}, ErrInvalidField},
		{&Execute{Header: Header{ID: "e", TS: Timestamp{ts0}}, Language: LangPython}, ErrInvalidField},
	}
	for _, c := range cases {
		if b, err := Encode(c.m); !errors.Is(err, c.want) {
			t.Errorf("Encode(%#v) = %s, %v; want %v", c.m, b, err, c.want)
		}
	}
}

func TestCodes(t *testing.T) {
	retryable := map[Code]bool{CodeSandboxOverloaded: true, CodeInternalError: true, CodeNetworkError: true}
	for _, c := range Codes {
		if !c.Known() || c.Retryable() != retryable[c] {
			t.Errorf("%s: known %v retryable %v", c, c.Known(), c.Retryable())
		}
	}
	if Code("NOPE").Known() || Code("NOPE").Retryable() {
		t.Error("unknown code is known or retryable")
	}
	if e := NewError("x", CodeInternalError, "m", ts0); !e.Retryable || !strings.Contains(e.Error(), "INTERNAL_ERROR") {
		t.Errorf("NewError = %#v (%v)", e, e)
	}
}

func TestStatuses(t *testing.T) {
	for _, s := range []Status{StatusCompleted, StatusFailed, StatusCancelled, StatusTimeout, StatusOOM} {
		if !s.Terminal() || !s.Known() {
			t.Errorf("%s not terminal", s)
		}
	}
	if StatusRunning.Terminal() || !StatusRunning.Known() || Status("x").Known() {
		t.Error("running/unknown status misclassified")
	}
}

func TestBearerToken(t *testing.T) {
	for in, want := range map[string]string{"Bearer abc": "abc", "bearer  abc ": "abc", "Basic abc": "", "Bearer ": "", "": ""} {
		got, ok := BearerToken(in)
		if got != want || ok != (want != "") {
			t.Errorf("BearerToken(%q) = %q, %v", in, got, ok)
		}
	}
}

func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"v":1,"type":"ping","ts":"2025-12-27T11:30:00.000Z"}`))
	f.Fuzz(func(t *testing.T, frame []byte) {
		m, err := Decode(frame)
		if err != nil {
			var fe *FrameError
			if !errors.As(err, &fe) || fe.Err == nil {
				t.Fatalf("Decode error %T %v is not a *FrameError with a sentinel", err, err)
			}
			return
		}
		// Whatever decodes re-encodes, and the encoding is a fixed point.
		b1, err := Encode(m)
		if err != nil {
			t.Fatalf("Encode(Decode(%q)): %v", frame, err)
		}
		m2, err := Decode(b1)
		if err != nil {
			t.Fatalf("Decode(Encode(Decode(%q))) of %s: %v", frame, b1, err)
		}
		b2, err := Encode(m2)
		if err != nil || !bytes.Equal(b1, b2) {
			t.Fatalf("re-encoding differs: %s vs %s (%v)", b1, b2, err)
		}
	})
}
