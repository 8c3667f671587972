package agui

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fathom-agents/fathom/live"
	"github.com/fathom-agents/fathom/messages"
)

// tricky are strings json.Marshal escapes, each its own way.
var tricky = []string{"", "plain", `quote " and \ backslash`, "<b>a & b</b>", "tab\tnew\nline\r\x00\x01\x1f\x7f",
	"\b\f", "é ü 漢字 🙂", "line\u2028sep\u2029", "bad \xff\xfe utf8 \xc3", "\ufffd"}

// TestStreamEventsAreAsMarshalled: a run folded from a session (a plan, a step whose
// answer streams in deltas, a tool call, a question, the end) writes SSE events whose
// data is json.Marshal's rendering of the event (keys sorted, its escaping) and whose
// ids are positions, and a delta costs no encoding allocation.
func TestStreamEventsAreAsMarshalled(t *testing.T) {
	rec := httptest.NewRecorder()
	s := newStream(deadlineRecorder{rec}, &RunAgentInput{ThreadID: "t<1>", RunID: "r&1"}, "sess", nil)
	s.start()
	seq := uint64(0)
	ev := func(p any) live.Update {
		seq++
		e := &messages.Event{Seq: seq, SessionId: "sess"}
		switch p := p.(type) {
		case *messages.PlanCreated:
			e.Payload = &messages.Event_PlanCreated{PlanCreated: p}
		case *messages.StepStarted:
			e.Payload = &messages.Event_StepStarted{StepStarted: p}
		case *messages.LlmRequested:
			e.Payload = &messages.Event_LlmRequested{LlmRequested: p}
		case *messages.LlmResponded:
			e.Payload = &messages.Event_LlmResponded{LlmResponded: p}
		case *messages.ToolCalled:
			e.Payload = &messages.Event_ToolCalled{ToolCalled: p}
		case *messages.ToolResult:
			e.Payload = &messages.Event_ToolResult{ToolResult: p}
		case *messages.StepCompleted:
			e.Payload = &messages.Event_StepCompleted{StepCompleted: p}
		case *messages.SessionCompleted:
			e.Payload = &messages.Event_SessionCompleted{SessionCompleted: p}
		}
		return live.Update{Event: e}
	}
	s.update(ev(&messages.PlanCreated{PlanId: "p", Steps: []*messages.PlanStep{{Id: "s1", Type: "custom", Description: tricky[3]},
		{Id: "s2", Type: "custom", Description: tricky[6]}}}))
	s.update(ev(&messages.StepStarted{StepId: "s1"}))
	s.update(ev(&messages.LlmRequested{CallId: "c1", StepId: "s1", Purpose: "step"}))
	answer := ""
	for i, text := range tricky {
		answer += text
		s.update(live.Update{IsDelta: true, Delta: live.Delta{CallID: "c1", Index: uint32(i + 1), Attempt: 1, AfterSeq: seq, Text: text}})
	}
	// Deltas of a call being streamed: what each costs to fold and write, past its text.
	delta := live.Delta{CallID: "c1", Attempt: 1, AfterSeq: seq, Text: "word "}
	allocs := testing.AllocsPerRun(100, func() {
		delta.Index = s.calls["c1"].last + 1
		s.update(live.Update{IsDelta: true, Delta: delta})
	})
	answer += strings.Repeat(delta.Text, 101) // AllocsPerRun's runs and its warm-up
	s.update(ev(&messages.LlmResponded{CallId: "c1", StepId: "s1", Content: answer + " The end."}))
	s.update(ev(&messages.ToolCalled{StepId: "s1", Tool: "look<up>", Args: `{"q":"a & b"}`, IdempotencyKey: "k1"}))
	s.update(ev(&messages.ToolResult{StepId: "s1", IdempotencyKey: "k1", Result: tricky[8]}))
	s.update(ev(&messages.StepCompleted{StepId: "s1"}))
	s.update(ev(&messages.SessionCompleted{Result: tricky[7]}))
	if s.err != nil || !s.done {
		t.Fatalf("the run did not finish: %v", s.err)
	}

	types := map[string]int{}
	sc := bufio.NewScanner(bytes.NewReader(rec.Body.Bytes()))
	sc.Buffer(nil, 1<<20)
	var id string
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "id: "); ok {
			id = v
			if _, err := ParsePosition(id); err != nil {
				t.Fatal(err)
			}
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		// The members in json.Marshal's order, each value as json.Marshal renders it
		// (a snapshot's state as json.Marshal renders a State: its struct order).
		var members map[string]json.RawMessage
		if err := json.Unmarshal([]byte(data), &members); err != nil {
			t.Fatalf("event %s: %v", id, err)
		}
		for k, raw := range members {
			var v any
			if k == "snapshot" {
				v = new(State)
			}
			if err := json.Unmarshal(raw, &v); err != nil {
				t.Fatalf("event %s: %v", id, err)
			}
			members[k], _ = json.Marshal(v)
		}
		// (Invalid UTF-8 is written as escaped U+FFFD, which decodes to the rune itself.)
		if want, _ := json.Marshal(members); strings.ReplaceAll(data, `\ufffd`, "\ufffd") != string(want) {
			t.Fatalf("event %s:\n got %s\nwant %s", id, data, want)
		}
		var typ string
		_ = json.Unmarshal(members["type"], &typ)
		types[typ]++
	}
	for _, typ := range []string{evRunStarted, evStateSnapshot, evStateDelta, evStepStarted, evTextStart, evTextContent, evTextEnd,
		evToolStart, evToolArgs, evToolEnd, evToolResult, evStepFinished, evRunFinished} {
		if types[typ] == 0 {
			t.Errorf("no %s event in %v", typ, types)
		}
	}
	t.Logf("%.2f allocations per streamed delta", allocs)
	// The text keeps the delta (a strings.Builder growing now and then); the event is
	// encoded by encoding/json into the stream's reused buffer and framed in another.
	if allocs > 0.5 && !raceDetector {
		t.Errorf("%.2f allocations per streamed delta, want at most the text's growth", allocs)
	}
}

// deadlineRecorder is a recorder that takes write deadlines, as a server's response does
// (a recorder's refusal allocates an error).
type deadlineRecorder struct{ *httptest.ResponseRecorder }

func (deadlineRecorder) SetWriteDeadline(time.Time) error { return nil }

// discardWriter is a server's response that forgets what is written to it.
type discardWriter struct{ h http.Header }

func (w *discardWriter) Header() http.Header              { return w.h }
func (w *discardWriter) Write(b []byte) (int, error)      { return len(b), nil }
func (w *discardWriter) WriteHeader(int)                  {}
func (w *discardWriter) Flush()                           {}
func (w *discardWriter) SetWriteDeadline(time.Time) error { return nil }

// streamSteps is the plan of BenchmarkStreamStep's runs.
const streamSteps = 20

// BenchmarkStreamStep folds one plan step of a streamed run into one subscriber's AG-UI
// events: its start, its model call with 11 word deltas and the answer, its end (what
// every subscriber of a run does for each step, as in the gateway's
// BenchmarkStreamSubscribers); a run of streamSteps steps is started (RUN_STARTED, the
// plan's snapshot) every streamSteps steps.
func BenchmarkStreamStep(b *testing.B) {
	const steps = streamSteps
	plan := &messages.PlanCreated{PlanId: "p"}
	for i := range steps {
		id := "s" + strconv.Itoa(i)
		plan.Steps = append(plan.Steps, &messages.PlanStep{Id: id, Type: "custom", Description: "part " + id})
	}
	words := strings.SplitAfter("Part 1 is written: the journal keeps every word of it.", " ")
	var s *stream
	seq := uint64(0)
	ev := func(e *messages.Event) live.Update {
		seq++
		e.Seq, e.SessionId = seq, "sess"
		return live.Update{Event: e}
	}
	b.ReportAllocs()
	for i := range b.N {
		if i%steps == 0 {
			s = newStream(&discardWriter{h: http.Header{}}, &RunAgentInput{ThreadID: "t", RunID: "r"}, "sess", nil)
			s.start()
			seq = 0
			s.update(ev(&messages.Event{Payload: &messages.Event_PlanCreated{PlanCreated: plan}}))
		}
		id, call := "s"+strconv.Itoa(i%steps), "c"+strconv.Itoa(i%steps)
		s.update(ev(&messages.Event{Payload: &messages.Event_StepStarted{StepStarted: &messages.StepStarted{StepId: id}}}))
		s.update(ev(&messages.Event{Payload: &messages.Event_LlmRequested{LlmRequested: &messages.LlmRequested{CallId: call, StepId: id, Purpose: "step"}}}))
		for j, w := range words {
			s.update(live.Update{IsDelta: true, Delta: live.Delta{CallID: call, Index: uint32(j + 1), Attempt: 1, AfterSeq: seq, Text: w}})
		}
		s.update(ev(&messages.Event{Payload: &messages.Event_LlmResponded{LlmResponded: &messages.LlmResponded{CallId: call, StepId: id,
			Content: strings.Join(words, "")}}}))
		s.update(ev(&messages.Event{Payload: &messages.Event_StepCompleted{StepCompleted: &messages.StepCompleted{StepId: id}}}))
		if s.err != nil {
			b.Fatal(s.err)
		}
	}
}
