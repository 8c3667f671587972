package a2a

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/fathom-agents/fathom/gateway"
	"github.com/fathom-agents/fathom/live"
	"github.com/fathom-agents/fathom/messages"
)

// state reads session id's state for the caller in ctx (a task the caller may not read
// answers CodeTaskNotFound, as a missing one).
func (s *Server) state(ctx context.Context, id string) (*messages.SessionState, error) {
	body, err := s.gw.Do(ctx, gateway.Request{Op: gateway.OpState, SessionID: id})
	if err != nil {
		return nil, fromGateway(err, id)
	}
	var resp messages.GetStateResponse
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(body, &resp); err != nil {
		return nil, fmt.Errorf("decode the state of %s: %w", id, err)
	}
	if !resp.GetExists() || resp.GetState() == nil {
		return nil, rpcErr(CodeTaskNotFound, "task %q not found", id)
	}
	return resp.GetState(), nil
}

// input is what a message carries: its text parts joined, and its one data part.
type input struct {
	text string
	data json.RawMessage
}

func messageInput(m *Message) (input, error) {
	if m == nil {
		return input{}, rpcErr(CodeInvalidParams, "message is required")
	}
	if m.Role != RoleUser && m.Role != "user" && m.Role != "1" {
		return input{}, rpcErr(CodeInvalidParams, "message.role must be %s", RoleUser)
	}
	var in input
	var texts []string
	for _, p := range m.Parts {
		switch {
		case p.Text != "":
			texts = append(texts, p.Text)
		case len(p.Data) > 0:
			if in.data != nil {
				return input{}, rpcErr(CodeInvalidParams, "message has more than one data part")
			}
			in.data = p.Data
		case len(p.Raw) > 0 || p.URL != "":
			return input{}, rpcErr(CodeContentTypeNotSupported, "file parts are not supported: send text or data parts")
		}
	}
	in.text = strings.Join(texts, "\n")
	if strings.TrimSpace(in.text) == "" && in.data == nil {
		return input{}, rpcErr(CodeInvalidParams, "message has no text or data part")
	}
	return in, nil
}

// deliver hands a message to its task: a new session, a human's answer or a follow-up
// turn. It returns the task id and the seq after which the task's new events follow.
func (s *Server) deliver(ctx context.Context, p *SendMessageRequest) (string, uint64, error) {
	in, err := messageInput(p.Message)
	if err != nil {
		return "", 0, err
	}
	m := p.Message
	id := m.TaskID
	if id == "" {
		id = m.ContextID
	} else if m.ContextID != "" && m.ContextID != m.TaskID {
		return "", 0, rpcErr(CodeInvalidParams, "contextId %q is not the context of task %q", m.ContextID, m.TaskID)
	}
	cmd := ""
	if m.MessageID != "" {
		cmd = "a2a-" + m.MessageID
	}
	if id == "" {
		goal := in.text
		if strings.TrimSpace(goal) == "" {
			goal = string(in.data)
		}
		body, err := s.gw.Do(ctx, gateway.Request{Op: gateway.OpStart, Goal: goal})
		if err != nil {
			return "", 0, fromGateway(err, "")
		}
		var started struct {
			SessionID string `json:"session_id"`
		}
		if err := json.Unmarshal(body, &started); err != nil {
			return "", 0, fmt.Errorf("decode the start answer: %w", err)
		}
		if err := s.pushOnSend(ctx, started.SessionID, p, true); err != nil {
			return "", 0, err
		}
		return started.SessionID, 0, nil
	}
	st, err := s.state(ctx, id)
	if err != nil {
		return "", 0, err
	}
	if err := s.pushOnSend(ctx, id, p, false); err != nil {
		return "", 0, err
	}
	switch st.GetStatus() {
	case messages.SessionStatus_SESSION_STATUS_AWAITING_HUMAN:
		answer := in.data
		if answer == nil {
			answer, _ = json.Marshal(in.text)
		}
		req := gateway.Request{Op: gateway.OpInput, SessionID: id, CommandID: cmd, Input: answer}
		if aw := st.GetAwaiting(); len(aw) > 0 {
			req.RequestID, req.StepID = aw[0].GetRequestId(), aw[0].GetStepId()
		}
		if _, err := s.gw.Do(ctx, req); err != nil {
			return "", 0, fromGateway(err, id)
		}
	case messages.SessionStatus_SESSION_STATUS_COMPLETED:
		text := in.text
		if strings.TrimSpace(text) == "" {
			text = string(in.data)
		}
		if _, err := s.gw.Do(ctx, gateway.Request{Op: gateway.OpSend, SessionID: id, CommandID: cmd, Content: text}); err != nil {
			return "", 0, fromGateway(err, id)
		}
	case messages.SessionStatus_SESSION_STATUS_FAILED, messages.SessionStatus_SESSION_STATUS_CANCELLED:
		return "", 0, rpcErr(CodeUnsupportedOperation, "task %q is in a terminal state (%s) and takes no more messages", id, taskState(st.GetStatus()))
	default:
		return "", 0, rpcErr(CodeUnsupportedOperation, "task %q is working: send when it asks for input (%s) or has completed", id, StateInputRequired)
	}
	return id, st.GetSeq(), nil
}

// sendMessage is SendMessage: deliver, then (unless returnImmediately) wait until the
// task completes, fails, is canceled, asks for input or is paused.
func (s *Server) sendMessage(ctx context.Context, p *SendMessageRequest) (*Task, error) {
	id, from, err := s.deliver(ctx, p)
	if err != nil {
		return nil, err
	}
	var hist *int32
	if p.Configuration != nil {
		hist = p.Configuration.HistoryLength
		if p.Configuration.ReturnImmediately {
			task, _, err := s.task(ctx, id, hist)
			return task, err
		}
	}
	sub, err := s.gw.Follow(ctx, id, from, false)
	if err != nil {
		return nil, fromGateway(err, id)
	}
	defer sub.Close()
	for {
		u, err := sub.NextUpdate(ctx)
		if err != nil {
			return nil, fmt.Errorf("follow task %s: %w", id, err)
		}
		if u.IsDelta || u.Event == nil {
			continue
		}
		if settles(u.Event) || u.Event.Type() == "interrupt_triggered" {
			break
		}
	}
	task, _, err := s.task(ctx, id, hist)
	return task, err
}

// settles reports whether ev leaves the task where a stream ends: a terminal state or
// waiting for a human.
func settles(ev *messages.Event) bool {
	switch ev.Type() {
	case "session_completed", "session_failed", "session_cancelled", "hitl_requested":
		return true
	}
	return false
}

func settled(state string) bool {
	switch state {
	case StateCompleted, StateFailed, StateCanceled, StateInputRequired, StateRejected:
		return true
	}
	return false
}

func terminal(state string) bool {
	return state == StateCompleted || state == StateFailed || state == StateCanceled || state == StateRejected
}

func taskState(st messages.SessionStatus) string {
	switch st {
	case messages.SessionStatus_SESSION_STATUS_COMPLETED:
		return StateCompleted
	case messages.SessionStatus_SESSION_STATUS_FAILED:
		return StateFailed
	case messages.SessionStatus_SESSION_STATUS_CANCELLED:
		return StateCanceled
	case messages.SessionStatus_SESSION_STATUS_AWAITING_HUMAN:
		return StateInputRequired
	}
	return StateWorking
}

// task is session id as a task: its status from the session's state, its history and
// artifacts from its journal up to that state's seq (returned).
func (s *Server) task(ctx context.Context, id string, historyLength *int32) (*Task, uint64, error) {
	st, err := s.state(ctx, id)
	if err != nil {
		return nil, 0, err
	}
	t := &Task{ID: id, ContextID: id, Status: TaskStatus{State: taskState(st.GetStatus())},
		Metadata: map[string]any{"fathom": map[string]any{"seq": st.GetSeq()}}}
	if at := st.GetUpdatedAtUnixNano(); at > 0 {
		t.Status.Timestamp = time.Unix(0, at).UTC().Format(time.RFC3339Nano)
	}
	switch t.Status.State {
	case StateInputRequired:
		if aw := st.GetAwaiting(); len(aw) > 0 {
			t.Status.Message = agentMessage(id, fmt.Sprintf("%s-%d-status", id, st.GetSeq()), aw[0].GetQuestion())
		}
	case StateFailed:
		t.Status.Message = agentMessage(id, fmt.Sprintf("%s-%d-status", id, st.GetSeq()), st.GetError())
	}
	err = s.gw.Events(ctx, id, 0, st.GetSeq(), func(ev *messages.Event) {
		msgID := fmt.Sprintf("%s-%d", id, ev.GetSeq())
		switch ev.Type() {
		case "session_started":
			t.History = append(t.History, userMessage(id, msgID, ev.GetSessionStarted().GetGoal()))
		case "message_received":
			t.History = append(t.History, userMessage(id, msgID, ev.GetMessageReceived().GetContent()))
		case "hitl_requested":
			t.History = append(t.History, *agentMessage(id, msgID, ev.GetHitlRequested().GetQuestion()))
		case "hitl_received":
			t.History = append(t.History, userMessage(id, msgID, answerText(ev.GetHitlReceived().GetInput())))
		case "session_completed":
			res := ev.GetSessionCompleted().GetResult()
			t.History = append(t.History, *agentMessage(id, msgID, res))
			t.Artifacts = []Artifact{resultArtifact(res)}
		}
	})
	if err != nil {
		return nil, 0, fromGateway(err, id)
	}
	if historyLength != nil {
		if n := int(*historyLength); n < len(t.History) {
			t.History = t.History[len(t.History)-n:]
		}
		if len(t.History) == 0 {
			t.History = nil
		}
	}
	return t, st.GetSeq(), nil
}

// answerText is a human's answer (JSON text) as message text: a JSON string unquoted.
func answerText(js string) string {
	var s string
	if json.Unmarshal([]byte(js), &s) == nil {
		return s
	}
	return js
}

func userMessage(task, id, text string) Message {
	return Message{MessageID: id, ContextID: task, TaskID: task, Role: RoleUser, Parts: []Part{{Text: text}}}
}

func agentMessage(task, id, text string) *Message {
	return &Message{MessageID: id, ContextID: task, TaskID: task, Role: RoleAgent, Parts: []Part{{Text: text}}}
}

func resultArtifact(result string) Artifact {
	return Artifact{ArtifactID: "result", Name: "result", Description: "the session's final answer",
		Parts: []Part{{Text: result, MediaType: "text/plain"}}}
}

// cancel is CancelTask: the session is cancelled (TASK_STATE_CANCELED); a task in a
// terminal state is not cancelable.
func (s *Server) cancel(ctx context.Context, id string) (*Task, error) {
	st, err := s.state(ctx, id)
	if err != nil {
		return nil, err
	}
	if state := taskState(st.GetStatus()); terminal(state) {
		return nil, rpcErr(CodeTaskNotCancelable, "task %q is %s and cannot be canceled", id, state)
	}
	if _, err := s.gw.Do(ctx, gateway.Request{Op: gateway.OpCancel, SessionID: id, Reason: "canceled over A2A", By: "a2a"}); err != nil {
		return nil, fromGateway(err, id)
	}
	task, _, err := s.task(ctx, id, nil)
	return task, err
}

// updates are the stream responses of one event: a status update (state from the event,
// a one-line message, metadata.fathom = {seq, type, event}); session_completed first
// gives the result as the "result" artifact.
func (s *Server) updates(id string, ev *messages.Event) ([]StreamResponse, error) {
	js, err := s.gw.EventJSON(id, live.Update{Event: ev})
	if err != nil {
		return nil, fmt.Errorf("render event %d of %s: %w", ev.GetSeq(), id, err)
	}
	var event map[string]any
	if err := json.Unmarshal(js, &event); err != nil {
		return nil, fmt.Errorf("decode event %d of %s: %w", ev.GetSeq(), id, err)
	}
	delete(event, "op")
	meta := map[string]any{"fathom": map[string]any{"seq": ev.GetSeq(), "type": ev.Type(), "event": event}}
	state, text := StateWorking, summary(ev)
	var out []StreamResponse
	switch ev.Type() {
	case "hitl_requested":
		state = StateInputRequired
	case "session_completed":
		state = StateCompleted
		out = append(out, StreamResponse{ArtifactUpdate: &TaskArtifactUpdateEvent{TaskID: id, ContextID: id,
			Artifact: resultArtifact(ev.GetSessionCompleted().GetResult()), LastChunk: true, Metadata: meta}})
	case "session_failed":
		state = StateFailed
	case "session_cancelled":
		state = StateCanceled
	}
	status := TaskStatus{State: state, Message: agentMessage(id, fmt.Sprintf("%s-%d", id, ev.GetSeq()), text),
		Timestamp: ev.At().Format(time.RFC3339Nano)}
	out = append(out, StreamResponse{StatusUpdate: &TaskStatusUpdateEvent{TaskID: id, ContextID: id, Status: status, Metadata: meta}})
	return out, nil
}

// summary is one line on an event for a status message.
func summary(ev *messages.Event) string {
	switch ev.Type() {
	case "session_started":
		return "started: " + ev.GetSessionStarted().GetGoal()
	case "plan_created":
		return fmt.Sprintf("planned %d steps", len(ev.GetPlanCreated().GetSteps()))
	case "step_started":
		p := ev.GetStepStarted()
		return fmt.Sprintf("step %d (%s): %s", p.GetStepIndex()+1, p.GetStepType(), p.GetDescription())
	case "step_completed":
		return fmt.Sprintf("step %d completed", ev.GetStepCompleted().GetStepIndex()+1)
	case "tool_called":
		return "calling " + ev.GetToolCalled().GetTool()
	case "hitl_requested":
		return ev.GetHitlRequested().GetQuestion()
	case "hitl_received":
		return "answered: " + answerText(ev.GetHitlReceived().GetInput())
	case "message_received":
		return "message: " + ev.GetMessageReceived().GetContent()
	case "session_completed":
		return "completed"
	case "session_failed":
		return ev.GetSessionFailed().GetError()
	case "session_cancelled":
		if r := ev.GetSessionCancelled().GetReason(); r != "" {
			return "canceled: " + r
		}
		return "canceled"
	}
	return strings.ReplaceAll(ev.Type(), "_", " ")
}

// lastEventID reads the SSE Last-Event-ID header: the seq of the last event the client
// has (resume is false without the header).
func lastEventID(r *http.Request) (uint64, bool, error) {
	v := strings.TrimSpace(r.Header.Get("Last-Event-ID"))
	if v == "" {
		return 0, false, nil
	}
	seq, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, false, rpcErr(CodeInvalidParams, "Last-Event-ID %q is not an event seq", truncate(v, 40))
	}
	return seq, true, nil
}

// subscribe is SubscribeToTask. Without Last-Event-ID a task in a terminal state is
// refused (UnsupportedOperation, as the spec says); with it the events after that seq
// are replayed from the journal whatever the task's state, so a client that lost its
// stream gets each event once.
func (s *Server) subscribe(w http.ResponseWriter, r *http.Request, rpcID json.RawMessage, id string, from uint64, resume, legacy bool) {
	if !resume {
		st, err := s.state(r.Context(), id)
		if err != nil {
			writeRPC(w, rpcID, nil, err)
			return
		}
		if state := taskState(st.GetStatus()); terminal(state) {
			writeRPC(w, rpcID, nil, rpcErr(CodeUnsupportedOperation, "task %q is %s: nothing to subscribe to (GetTask reads it)", id, state))
			return
		}
		from = st.GetSeq()
	}
	s.stream(w, r, rpcID, id, from, legacy)
}

// stream answers SSE: the task first, then the stream responses of each event after
// from, until the task settles (a terminal state, or input-required) after the task's
// snapshot. Each frame's SSE id is its event's seq.
//
// legacy streams A2A 0.3's results (legacyStream).
func (s *Server) stream(w http.ResponseWriter, r *http.Request, rpcID json.RawMessage, id string, from uint64, legacy bool) {
	ctx, end, err := s.gw.Stream(r.Context())
	if err != nil {
		writeRPC(w, rpcID, nil, fromGateway(err, id))
		return
	}
	defer end()
	snap, snapSeq, err := s.task(ctx, id, nil)
	if err != nil {
		writeRPC(w, rpcID, nil, err)
		return
	}
	sub, err := s.gw.Follow(ctx, id, from, false)
	if err != nil {
		writeRPC(w, rpcID, nil, fromGateway(err, id))
		return
	}
	defer sub.Close()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	prefix, err := framePrefix(rpcID)
	if err != nil {
		return
	}
	// add writes one frame (result: its "result") without flushing it; what is ready
	// at once (the events of one commit, a catch-up) goes out with one flush.
	var frame []byte
	pending := 0
	add := func(seq uint64, result []byte) error {
		frame = frame[:0]
		if seq > 0 {
			frame = strconv.AppendUint(append(frame, "id: "...), seq, 10)
			frame = append(frame, '\n')
		}
		frame = append(append(append(append(frame, "data: "...), prefix...), result...), "}\n\n"...)
		if pending == 0 {
			_ = rc.SetWriteDeadline(time.Now().Add(s.cfg.WriteTimeout))
		}
		if _, err := w.Write(frame); err != nil {
			return fmt.Errorf("write a stream response: %w", err)
		}
		pending++
		return nil
	}
	flush := func() error {
		if pending == 0 {
			return nil
		}
		pending = 0
		return rc.Flush()
	}
	defer func() { _ = flush() }()
	result, err := marshalResult(StreamResponse{Task: snap}, legacy, false)
	if err != nil || add(0, result) != nil || flush() != nil {
		return
	}
	if from >= snapSeq && settled(snap.Status.State) {
		return
	}
	notify := make(chan struct{}, 1)
	sub.Notify(notify)
	tick := time.NewTicker(s.cfg.KeepAlive)
	defer tick.Stop()
	for {
		u, ok, err := sub.TryNextUpdate(ctx)
		if err != nil {
			if ctx.Err() == nil {
				s.cfg.Logger.Warn("a2a stream: reading the journal failed", "task", id, "error", err)
			}
			return
		}
		if !ok || pending >= maxFramesPerFlush {
			if flush() != nil {
				return
			}
		}
		if !ok {
			select {
			case <-ctx.Done():
				return
			case <-notify:
			case <-tick.C: // a comment keeps proxies from closing an idle stream
				_ = rc.SetWriteDeadline(time.Now().Add(s.cfg.WriteTimeout))
				if _, err := fmt.Fprint(w, ": keep-alive\n\n"); err != nil || rc.Flush() != nil {
					return
				}
			}
			continue
		}
		if u.IsDelta || u.Event == nil {
			continue
		}
		ev := u.Event
		last := ev.GetSeq() == snapSeq && settled(snap.Status.State) || ev.GetSeq() > snapSeq && settles(ev)
		results, err := s.eventResults(id, ev, legacy, last)
		if err != nil {
			s.cfg.Logger.Warn("a2a stream", "task", id, "error", err)
			return
		}
		for i, result := range results {
			seq := uint64(0)
			if i == len(results)-1 {
				seq = ev.GetSeq()
			}
			if err := add(seq, result); err != nil {
				return
			}
		}
		if last {
			return
		}
	}
}

// maxFramesPerFlush bounds the frames a stream writes before it flushes them, so a long
// catch-up reaches the client as it is read.
const maxFramesPerFlush = 64

// nullID is id, or JSON null for an id-less call.
func nullID(id json.RawMessage) json.RawMessage {
	if len(id) == 0 {
		return json.RawMessage("null")
	}
	return id
}

// pushOnSend sets the push config a send's configuration names on task id, if any;
// started says the send started the task (which may have settled already: setPush's
// current).
func (s *Server) pushOnSend(ctx context.Context, id string, p *SendMessageRequest, started bool) error {
	c := p.Configuration
	if c == nil || c.TaskPushNotificationConfig == nil {
		return nil
	}
	if !s.cfg.PushNotifications {
		return rpcErr(CodePushNotSupported, "push notifications are not supported by this agent (it has no webhook secret)")
	}
	_, err := s.setPush(ctx, id, *c.TaskPushNotificationConfig, started)
	return err
}
