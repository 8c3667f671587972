package agui

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/fathom-agents/fathom/live"
	"github.com/fathom-agents/fathom/messages"
)

// AG-UI event types the endpoint sends.
const (
	evRunStarted    = "RUN_STARTED"
	evRunFinished   = "RUN_FINISHED"
	evRunError      = "RUN_ERROR"
	evStepStarted   = "STEP_STARTED"
	evStepFinished  = "STEP_FINISHED"
	evTextStart     = "TEXT_MESSAGE_START"
	evTextContent   = "TEXT_MESSAGE_CONTENT"
	evTextEnd       = "TEXT_MESSAGE_END"
	evToolStart     = "TOOL_CALL_START"
	evToolArgs      = "TOOL_CALL_ARGS"
	evToolEnd       = "TOOL_CALL_END"
	evToolResult    = "TOOL_CALL_RESULT"
	evStateSnapshot = "STATE_SNAPSHOT"
	evStateDelta    = "STATE_DELTA"
)

// State is the agent state a run's STATE_SNAPSHOT carries and its STATE_DELTAs patch:
// the session's status and its current turn's plan.
type State struct {
	SessionID string `json:"session_id"`
	// Status is the session's: planning, executing, awaiting_human, interrupted,
	// completed, failed or cancelled.
	Status string `json:"status"`
	Plan   Plan   `json:"plan"`
}

// Plan is the current turn's plan (no steps while planning, or for a turn answered
// directly).
type Plan struct {
	ID    string `json:"id"`
	Steps []Step `json:"steps"`
}

// Step is a plan step; Status is pending, in_progress, completed or failed.
type Step struct {
	ID          string `json:"id"`
	Type        string `json:"type"`
	Description string `json:"description"`
	Status      string `json:"status"`
}

// call is an LLM call of the session seen on the stream.
type call struct {
	purpose string
	msgID   string // its text message's id (opened on the first delta)
	open    bool
	attempt uint32
	text    strings.Builder
	// sent is how much of the text the client has (bytes); resumed is set when the
	// deltas to come do not continue it (a resumed stream, a lost delta): they are not
	// streamed, the rest of the text comes with the answer.
	sent    int
	resumed bool
	last    uint32 // the index of the last delta streamed
}

// end says how an update left the run.
type end int

const (
	going end = iota
	interrupted
	finished
)

// stream writes one run's AG-UI events as server-sent events, folding the session's
// events into them.
type stream struct {
	w   http.ResponseWriter
	rc  *http.ResponseController
	in  *RunAgentInput
	sid string
	err error // the first write error: the client is gone

	state    State
	awaiting []*messages.HitlRequested
	calls    map[string]*call  // by call id
	parent   map[string]string // text message id of the last answer, by step and sub-agent
	steps    []string          // STEP_STARTED and not yet finished, in order
	lastText string            // the last text message's content
	done     bool

	// pos is the position of the event being written: the seq of the session event it
	// comes from (0 before the first) and its place among that event's AG-UI events.
	// Each SSE event's id is its position with the text of the messages still open
	// (see Position): a stream posted again with it as Last-Event-ID resumes after it.
	pos    position
	delta  bool      // the update being folded is a token delta
	resume *Position // where a resumed stream starts (nil: from the run's start)

	// hold makes send leave its events unflushed (unflushed) until flush: the updates
	// ready at once go out with one flush.
	hold, unflushed bool
	held            int    // updates taken since the last flush (Handler.next)
	buf             []byte // the SSE event being written (emit), reused
	// enc encodes events into jbuf (appendJSON), both reused; textEv, markEv, stepEv and
	// patchEv are the events of sendText, sendMark, sendStep and patch.
	enc     *json.Encoder
	jbuf    bytes.Buffer
	textEv  textContent
	markEv  textMark
	stepEv  stepEvent
	patchEv stateDelta
}

func newStream(w http.ResponseWriter, in *RunAgentInput, sid string, resume *Position) *stream {
	return &stream{w: w, rc: http.NewResponseController(w), in: in, sid: sid, resume: resume,
		state: State{SessionID: sid, Plan: Plan{Steps: []Step{}}}, calls: map[string]*call{}, parent: map[string]string{}}
}

// start answers 200 with the SSE headers and RUN_STARTED.
func (s *stream) start() {
	h := s.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	s.w.WriteHeader(http.StatusOK)
	s.send(map[string]any{"type": evRunStarted, "threadId": s.in.ThreadID, "runId": s.in.RunID,
		"metadata": map[string]any{"fathom": map[string]any{"session_id": s.sid}}})
}

// send sends AG-UI event ev (emit).
func (s *stream) send(ev map[string]any) { s.emit(ev["type"], ev) }

// emit sends event v of type typ, unless the stream failed or ended or the resuming
// client has it already (a delta keeps the position of the event before it).
func (s *stream) emit(typ, v any) {
	if !s.advance() {
		return
	}
	b, err := s.appendJSON(s.head(), v)
	s.end(typ, b, err)
}

// appendJSON appends v as json.Marshal renders it (encoding/json, HTML escaping on),
// through the stream's encoder and its reused buffer: every subscriber of a run renders
// each of its events.
func (s *stream) appendJSON(dst []byte, v any) ([]byte, error) {
	if s.enc == nil {
		s.enc = json.NewEncoder(&s.jbuf)
	}
	s.jbuf.Reset()
	if err := s.enc.Encode(v); err != nil {
		return dst, err
	}
	out := append(dst, bytes.TrimSuffix(s.jbuf.Bytes(), []byte{'\n'})...)
	if s.jbuf.Cap() > maxEventBuffer {
		s.jbuf = bytes.Buffer{} // a large event's buffer is not kept
	}
	return out, nil
}

// sendText sends TEXT_MESSAGE_CONTENT: the bytes of send's map {"type", "messageId",
// "delta"} (the one event sent per token delta), without the map.
func (s *stream) sendText(msgID, delta string) {
	if !s.advance() {
		return
	}
	s.textEv = textContent{Delta: delta, MessageID: msgID, Type: evTextContent}
	b, err := s.appendJSON(s.head(), &s.textEv)
	s.end(evTextContent, b, err)
}

// textContent is TEXT_MESSAGE_CONTENT as json.Marshal renders its map (keys sorted),
// without a map: the one event sent per token delta.
type textContent struct {
	Delta     string `json:"delta"`
	MessageID string `json:"messageId"`
	Type      string `json:"type"`
}

// The events sent for every step and every answer, as json.Marshal renders their maps
// {"type", ...} (keys sorted), without a map: the same bytes, without building and
// sorting a map for each subscriber of a run.
type (
	// textMark is TEXT_MESSAGE_START (role "assistant") or TEXT_MESSAGE_END (no role).
	textMark struct {
		MessageID string `json:"messageId"`
		Role      string `json:"role,omitempty"`
		Type      string `json:"type"`
	}
	// stepEvent is STEP_STARTED or STEP_FINISHED.
	stepEvent struct {
		StepName string `json:"stepName"`
		Type     string `json:"type"`
	}
	// stateDelta is STATE_DELTA with its one operation, a replace.
	stateDelta struct {
		Delta [1]replaceOp `json:"delta"`
		Type  string       `json:"type"`
	}
	replaceOp struct {
		Op    string `json:"op"`
		Path  string `json:"path"`
		Value string `json:"value"`
	}
)

// sendMark sends TEXT_MESSAGE_START (start) or TEXT_MESSAGE_END of message msgID.
func (s *stream) sendMark(msgID string, start bool) {
	s.markEv = textMark{MessageID: msgID, Type: evTextEnd}
	if start {
		s.markEv.Role, s.markEv.Type = "assistant", evTextStart
	}
	s.emit(s.markEv.Type, &s.markEv)
}

// sendStep sends STEP_STARTED or STEP_FINISHED (typ) of step id.
func (s *stream) sendStep(typ, id string) {
	s.stepEv = stepEvent{StepName: id, Type: typ}
	s.emit(typ, &s.stepEv)
}

// advance moves to the place of the next event and reports whether to write it: not
// once the stream failed or ended, nor when the resuming client has it already (a delta
// keeps the position of the event before it).
func (s *stream) advance() bool {
	if s.err != nil || s.done {
		return false
	}
	if !s.delta {
		s.pos.k++
	}
	r := s.resume
	return r == nil || s.delta || r.before(s.pos)
}

// head starts the SSE event in the stream's buffer: its id, then the data's prefix.
func (s *stream) head() []byte {
	return append(s.appendID(append(s.buf[:0], "id: "...)), "\ndata: "...)
}

// end writes the event b (head and data) of type typ, or fails the stream with err.
func (s *stream) end(typ any, b []byte, err error) {
	if err != nil {
		s.err = fmt.Errorf("encode %v: %w", typ, err)
		return
	}
	s.buf = append(b, "\n\n"...)
	s.write(s.buf)
	if cap(s.buf) > maxEventBuffer {
		s.buf = nil // a large event's buffer is not kept
	}
}

// maxEventBuffer is the largest event buffer a stream keeps for the next event.
const maxEventBuffer = 16 << 10

// write writes SSE event b ("id: ...\ndata: ...\n\n") and flushes it, unless the stream
// holds its flushes (hold): then flush sends it with the events after it.
func (s *stream) write(b []byte) {
	if !s.unflushed {
		_ = s.rc.SetWriteDeadline(time.Now().Add(writeTimeout))
	}
	if _, err := s.w.Write(b); err != nil {
		s.err = err
		return
	}
	s.unflushed = true
	if !s.hold {
		s.flush()
	}
}

// flush sends the events written since the last flush.
func (s *stream) flush() {
	if s.err != nil || !s.unflushed {
		return
	}
	s.unflushed = false
	s.err = s.rc.Flush()
}

// slot places the next event of the current session event at k: an answer's START,
// CONTENT and END keep their places whether or not deltas came before.
func (s *stream) slot(k int) {
	if !s.delta {
		s.pos.k = k - 1
	}
}

// appendID appends the SSE id of the event being written: Position.String's text,
// without its map (written for every event sent).
func (s *stream) appendID(b []byte) []byte {
	b = append(strconv.AppendUint(b, s.pos.seq, 10), '.')
	b = strconv.AppendInt(b, int64(s.pos.k), 10)
	var arr [4]*call
	open := arr[:0]
	for _, c := range s.calls {
		if c.open {
			open = append(open, c)
		}
	}
	if len(open) > 1 {
		slices.SortFunc(open, func(a, b *call) int { return strings.Compare(a.msgID, b.msgID) })
	}
	for i, c := range open {
		if i > 0 && c.msgID == open[i-1].msgID {
			continue // one entry per message, as in Position.Sent
		}
		b = strconv.AppendInt(append(append(append(b, '|'), c.msgID...), '='), int64(c.sent), 10)
	}
	return b
}

func (s *stream) comment() {
	if s.err != nil {
		return
	}
	_ = s.rc.SetWriteDeadline(time.Now().Add(writeTimeout))
	if _, err := fmt.Fprint(s.w, ": keepalive\n\n"); err != nil {
		s.err = err
		return
	}
	s.unflushed = false
	s.err = s.rc.Flush()
}

// runError ends the run with RUN_ERROR.
func (s *stream) runError(code, msg string) {
	s.delta, s.resume = false, nil // an error is news wherever the stream resumed
	s.send(map[string]any{"type": evRunError, "message": msg, "code": code})
	s.done = true
}

// snapshot sets the run's state from the session's (nil: none yet) and sends it, with
// STEP_STARTED for the steps running (they go on in this run).
func (s *stream) snapshot(st *messages.SessionState) {
	s.delta = false
	s.state = State{SessionID: s.sid, Status: "planning", Plan: Plan{Steps: []Step{}}}
	s.awaiting = nil
	if st != nil {
		s.state.Status = sessionStatus(st.GetStatus())
		s.state.Plan.ID = st.GetPlanId()
		for _, ss := range st.GetSteps() {
			s.state.Plan.Steps = append(s.state.Plan.Steps, Step{ID: ss.GetStep().GetId(), Type: ss.GetStep().GetType(),
				Description: ss.GetStep().GetDescription(), Status: stepStatus(ss.GetStatus())})
		}
		s.awaiting = append(s.awaiting, st.GetAwaiting()...)
	}
	s.sendSnapshot()
	for _, st := range s.state.Plan.Steps {
		if st.Status == "in_progress" {
			s.stepStarted(st.ID)
		}
	}
}

func (s *stream) sendSnapshot() {
	b, _ := json.Marshal(s.state)
	s.send(map[string]any{"type": evStateSnapshot, "snapshot": json.RawMessage(b)})
}

// patch sends STATE_DELTA replacing the value at path.
func (s *stream) patch(path, value string) {
	s.patchEv = stateDelta{Delta: [1]replaceOp{{Op: "replace", Path: path, Value: value}}, Type: evStateDelta}
	s.emit(evStateDelta, &s.patchEv)
}

func (s *stream) setStatus(status string) {
	if s.state.Status != status {
		s.state.Status = status
		s.patch("/status", status)
	}
}

func (s *stream) setStepStatus(id, status string) {
	for i := range s.state.Plan.Steps {
		if s.state.Plan.Steps[i].ID == id && s.state.Plan.Steps[i].Status != status {
			s.state.Plan.Steps[i].Status = status
			s.patch("/plan/steps/"+strconv.Itoa(i)+"/status", status)
		}
	}
}

func (s *stream) stepStarted(id string) {
	for _, open := range s.steps {
		if open == id {
			return
		}
	}
	s.steps = append(s.steps, id)
	s.sendStep(evStepStarted, id)
}

func (s *stream) stepFinished(id string) {
	for i, open := range s.steps {
		if open == id {
			s.steps = append(s.steps[:i], s.steps[i+1:]...)
			s.sendStep(evStepFinished, id)
			return
		}
	}
}

// closeAll ends the open text messages and steps: nothing may stay open at the run's end.
func (s *stream) closeAll() {
	ids := make([]string, 0, len(s.calls))
	for id := range s.calls {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		c := s.calls[id]
		delete(s.calls, id)
		if c.open {
			c.open = false
			s.sendMark(c.msgID, false)
		}
	}
	for len(s.steps) > 0 {
		s.stepFinished(s.steps[0])
	}
}

// streamed reports whether an LLM call's text is shown as an assistant message: a step's,
// a sub-agent's and the closing summary; a plan is the state, and a follow-up turn's
// direct answer is the turn's result.
func streamed(purpose string) bool {
	switch purpose {
	case "plan", "replan", "message":
		return false
	}
	return true
}

// text adds a model's text to call c, opening its message.
func (s *stream) text(c *call, attempt uint32, t string) {
	if c.open && attempt != 0 && attempt != c.attempt {
		s.sendMark(c.msgID, false)
		c.open = false
		c.text.Reset()
		c.sent = 0
		c.msgID = fmt.Sprintf("%s.%d", strings.SplitN(c.msgID, ".", 2)[0], attempt)
	}
	if !c.open {
		c.open, c.attempt = true, attempt
		s.slot(1)
		s.sendMark(c.msgID, true)
	}
	if t != "" {
		c.text.WriteString(t)
		c.sent += len(t)
		s.slot(2)
		s.sendText(c.msgID, t)
	}
}

// update folds one update of the session into the run's events.
func (s *stream) update(u live.Update) end {
	s.delta = u.IsDelta
	if u.IsDelta {
		d := u.Delta
		if d.Kind != "" && d.Kind != live.KindText {
			return going
		}
		if c := s.calls[d.CallID]; c != nil && streamed(c.purpose) && !c.resumed {
			// Deltas are numbered from 1 (across attempts). One that did not come (the
			// feed drops the oldest of a subscriber that lags) ends the streaming: the
			// client has the text before it, the rest comes with the answer.
			newAttempt := c.open && d.Attempt != 0 && d.Attempt != c.attempt
			if d.Index != 0 && !newAttempt && d.Index != c.last+1 {
				c.resumed = true
				return going
			}
			c.last = d.Index
			s.text(c, d.Attempt, d.Text)
		}
		return going
	}
	ev := u.Event
	seq := ev.GetSeq()
	s.pos = position{seq: seq}
	switch p := ev.GetPayload().(type) {
	case *messages.Event_SessionStarted:
		s.setStatus("planning")
	case *messages.Event_MessageReceived:
		s.state.Status, s.state.Plan = "planning", Plan{Steps: []Step{}}
		s.sendSnapshot()
	case *messages.Event_PlanCreated:
		s.state.Status = "executing"
		s.state.Plan = Plan{ID: p.PlanCreated.GetPlanId(), Steps: planSteps(p.PlanCreated.GetSteps())}
		s.sendSnapshot()
	case *messages.Event_PlanRevised:
		r := p.PlanRevised
		kept := []Step{}
		for _, st := range s.state.Plan.Steps {
			if !contains(r.GetReplacedStepIds(), st.ID) {
				kept = append(kept, st)
			}
		}
		s.state.Plan = Plan{ID: r.GetPlanId(), Steps: append(kept, planSteps(r.GetSteps())...)}
		s.sendSnapshot()
	case *messages.Event_StepStarted:
		s.setStepStatus(p.StepStarted.GetStepId(), "in_progress")
		s.stepStarted(p.StepStarted.GetStepId())
	case *messages.Event_StepCompleted:
		s.setStepStatus(p.StepCompleted.GetStepId(), "completed")
		s.stepFinished(p.StepCompleted.GetStepId())
	case *messages.Event_StepFailed:
		s.setStepStatus(p.StepFailed.GetStepId(), "failed")
		s.stepFinished(p.StepFailed.GetStepId())
	case *messages.Event_LlmRequested:
		r := p.LlmRequested
		if old := s.calls[r.GetCallId()]; old != nil && old.open {
			s.sendMark(old.msgID, false)
		}
		c := &call{purpose: r.GetPurpose(), msgID: fmt.Sprintf("%s:%d", s.sid, seq)}
		if res := s.resume; res != nil && seq <= res.Seq {
			// Requested before the point the stream resumes from: its text comes whole (or
			// what the client lacks of it) with the answer, not from the deltas to come.
			c.resumed = true
			for id, n := range res.Sent {
				if id == c.msgID || strings.HasPrefix(id, c.msgID+".") {
					c.msgID, c.open, c.sent = id, true, n
				}
			}
		}
		s.calls[r.GetCallId()] = c
	case *messages.Event_LlmResponded:
		s.responded(p.LlmResponded, seq)
	case *messages.Event_ToolCalled:
		c := p.ToolCalled
		ev := map[string]any{"type": evToolStart, "toolCallId": c.GetIdempotencyKey(), "toolCallName": c.GetTool()}
		if m := s.parent[c.GetStepId()+"/"+c.GetSubAgentId()]; m != "" {
			ev["parentMessageId"] = m
		}
		s.send(ev)
		if c.GetArgs() != "" {
			s.send(map[string]any{"type": evToolArgs, "toolCallId": c.GetIdempotencyKey(), "delta": c.GetArgs()})
		}
		s.send(map[string]any{"type": evToolEnd, "toolCallId": c.GetIdempotencyKey()})
	case *messages.Event_ToolResult:
		r := p.ToolResult
		content := r.GetResult()
		if r.GetError() != nil {
			content = firstNonEmpty(r.GetError().GetLlmText(), r.GetError().GetMessage())
		}
		s.send(map[string]any{"type": evToolResult, "messageId": fmt.Sprintf("%s:%d", s.sid, seq), "toolCallId": r.GetIdempotencyKey(),
			"content": content, "role": "tool"})
	case *messages.Event_HitlRequested:
		s.awaiting = append(s.awaiting, p.HitlRequested)
		s.setStatus("awaiting_human")
		return interrupted
	case *messages.Event_HitlReceived:
		for i, r := range s.awaiting {
			if r.GetRequestId() == p.HitlReceived.GetRequestId() {
				s.awaiting = append(s.awaiting[:i], s.awaiting[i+1:]...)
				break
			}
		}
		if len(s.awaiting) == 0 {
			s.setStatus("executing")
		}
	case *messages.Event_SessionCompleted:
		s.closeAll()
		if res := p.SessionCompleted.GetResult(); res != "" && res != s.lastText {
			id := fmt.Sprintf("%s:%d", s.sid, seq)
			s.sendMark(id, true)
			s.sendText(id, res)
			s.sendMark(id, false)
		}
		s.setStatus("completed")
		s.send(map[string]any{"type": evRunFinished, "threadId": s.in.ThreadID, "runId": s.in.RunID,
			"result": p.SessionCompleted.GetResult(), "outcome": map[string]any{"type": "success"}})
		s.done = true
		return finished
	case *messages.Event_SessionFailed:
		s.closeAll()
		s.setStatus("failed")
		s.runError(CodeSessionFailed, firstNonEmpty(p.SessionFailed.GetError(), "the session failed"))
		return finished
	case *messages.Event_SessionCancelled:
		s.closeAll()
		s.setStatus("cancelled")
		s.send(map[string]any{"type": evRunFinished, "threadId": s.in.ThreadID, "runId": s.in.RunID,
			"outcome": map[string]any{"type": "cancelled"}})
		s.done = true
		return finished
	}
	return going
}

// responded ends an LLM call's text message with the rest of its answer (all of it when
// no delta came: a replay from the journal, or a provider that did not stream).
func (s *stream) responded(r *messages.LlmResponded, seq uint64) {
	c := s.calls[r.GetCallId()]
	if c == nil {
		purpose := "step"
		if r.GetStepId() == "" {
			purpose = "plan"
		}
		c = &call{purpose: purpose, msgID: fmt.Sprintf("%s:%d", s.sid, seq)}
	}
	delete(s.calls, r.GetCallId())
	if !streamed(c.purpose) {
		return
	}
	content := r.GetContent()
	switch {
	case c.open:
		rest, ok := strings.CutPrefix(content, c.text.String())
		if c.resumed {
			rest, ok = "", c.sent <= len(content)
			if ok {
				rest = content[c.sent:]
			}
		}
		if ok && rest != "" {
			c.sent += len(rest)
			s.slot(2)
			s.sendText(c.msgID, rest)
		}
	case content != "":
		s.text(c, 0, content)
	default:
		return
	}
	c.open = false
	s.slot(3)
	s.sendMark(c.msgID, false)
	s.parent[r.GetStepId()+"/"+r.GetSubAgentId()] = c.msgID
	s.lastText = content
}

// interrupt ends the run with the interrupt outcome: one interrupt per open request.
func (s *stream) interrupt() {
	s.delta = false
	s.closeAll()
	s.sendSnapshot()
	list := make([]map[string]any, 0, len(s.awaiting))
	for _, r := range s.awaiting {
		list = append(list, interruptOf(r))
	}
	s.send(map[string]any{"type": evRunFinished, "threadId": s.in.ThreadID, "runId": s.in.RunID,
		"outcome": map[string]any{"type": "interrupt", "interrupts": list}})
	s.done = true
}

// interruptOf is the AG-UI interrupt of request r: reason "tool_call" for an approval
// (toolCallId its call), "input_required" for a question (a human_input step, an
// ask_human call: toolCallId the call).
func interruptOf(r *messages.HitlRequested) map[string]any {
	in := map[string]any{"id": r.GetRequestId(), "reason": "input_required", "message": r.GetQuestion()}
	meta := map[string]any{"kind": r.GetKind(), "step_id": r.GetStepId()}
	switch r.GetKind() {
	case "approval":
		in["reason"], in["toolCallId"] = "tool_call", r.GetRequestId()
		in["responseSchema"] = map[string]any{"type": "object", "required": []string{"approved"}, "properties": map[string]any{
			"approved": map[string]any{"type": "boolean"}, "editedArgs": map[string]any{"type": "object", "description": "Full replacement of the tool's arguments."},
			"message": map[string]any{"type": "string", "description": "Why the call is declined (approved false)."}}}
		meta["tool"], meta["args"] = r.GetTool(), r.GetArgs()
	case "tool":
		in["toolCallId"] = r.GetRequestId()
	}
	var schema map[string]any
	if r.GetInputSchema() != "" && json.Unmarshal([]byte(r.GetInputSchema()), &schema) == nil && schema != nil {
		in["responseSchema"] = schema
	} else if len(r.GetOptions()) > 0 {
		in["responseSchema"] = map[string]any{"enum": r.GetOptions()}
	}
	if d := r.GetDeadlineUnixNano(); d > 0 {
		in["expiresAt"] = time.Unix(0, d).UTC().Format(time.RFC3339Nano)
	}
	in["metadata"] = map[string]any{"fathom": meta}
	return in
}

func planSteps(ps []*messages.PlanStep) []Step {
	out := make([]Step, 0, len(ps))
	for _, p := range ps {
		out = append(out, Step{ID: p.GetId(), Type: p.GetType(), Description: p.GetDescription(), Status: "pending"})
	}
	return out
}

func sessionStatus(s messages.SessionStatus) string {
	return strings.ToLower(strings.TrimPrefix(s.String(), "SESSION_STATUS_"))
}

func stepStatus(s messages.StepStatus) string {
	return strings.ToLower(strings.TrimPrefix(s.String(), "STEP_STATUS_"))
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

func firstNonEmpty(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}

// position is an event's place in a run: the session event it comes from (seq, 0 for
// the run's opening events) and its place k among that event's AG-UI events.
type position struct {
	seq uint64
	k   int
}

// Position is a run's SSE event id: the place of the event (Seq, K: see position) and,
// for each text message still open, how much of its text (bytes) the client has.
// Written "SEQ.K" then "|MESSAGE_ID=BYTES" per open message.
type Position struct {
	Seq  uint64
	K    int
	Sent map[string]int
}

// String is p as an SSE id.
func (p Position) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d.%d", p.Seq, p.K)
	ids := make([]string, 0, len(p.Sent))
	for id := range p.Sent {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		fmt.Fprintf(&b, "|%s=%d", id, p.Sent[id])
	}
	return b.String()
}

// ParsePosition reads an SSE id of a run (a Last-Event-ID).
func ParsePosition(s string) (*Position, error) {
	parts := strings.Split(s, "|")
	seq, k, ok := strings.Cut(parts[0], ".")
	p := &Position{Sent: map[string]int{}}
	var err1, err2 error
	p.Seq, err1 = strconv.ParseUint(seq, 10, 64)
	p.K, err2 = strconv.Atoi(k)
	if !ok || err1 != nil || err2 != nil || p.K < 0 {
		return nil, fmt.Errorf("Last-Event-ID %q is not an event id of an AG-UI run (SEQ.K[|MESSAGE=BYTES...])", truncate(s, 80))
	}
	for _, m := range parts[1:] {
		id, n, ok := strings.Cut(m, "=")
		sent, err := strconv.Atoi(n)
		if !ok || id == "" || err != nil || sent < 0 {
			return nil, fmt.Errorf("Last-Event-ID %q is not an event id of an AG-UI run (SEQ.K[|MESSAGE=BYTES...])", truncate(s, 80))
		}
		p.Sent[id] = sent
	}
	return p, nil
}

// before reports whether at comes after p: the client, which has p, lacks it.
func (p *Position) before(at position) bool {
	return at.seq > p.Seq || at.seq == p.Seq && at.k > p.K
}
