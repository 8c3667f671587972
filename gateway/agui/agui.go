package agui

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/fathom-agents/fathom/auth"
	"github.com/fathom-agents/fathom/gateway"
	"github.com/fathom-agents/fathom/live"
	"github.com/fathom-agents/fathom/messages"
)

// Path is the AG-UI endpoint's route (POST).
const Path = "/v1/agui"

// Timing of a run's stream.
const (
	// keepalive is how often a waiting stream sends an SSE comment, so proxies keep it.
	keepalive = 15 * time.Second
	// writeTimeout bounds one write to the client.
	writeTimeout = 10 * time.Second
)

// Run errors' codes (RUN_ERROR.code) of the endpoint itself; the gateway's codes
// (not_found, failed_precondition, invalid_argument, ...) pass through.
const (
	// CodeInterruptsPending: a run without resume on a thread with open interrupts.
	CodeInterruptsPending = "interrupts_pending"
	// CodeInterruptNotOpen: a resume names an interrupt that is not open on the thread.
	CodeInterruptNotOpen = "interrupt_not_open"
	// CodeSessionFailed: the session failed (RUN_ERROR.message is its error).
	CodeSessionFailed = "session_failed"
)

// Handler serves POST /v1/agui over a gateway.
type Handler struct {
	g   *gateway.Handler
	log *slog.Logger
}

// Mount serves the AG-UI endpoint on g at POST /v1/agui (write scope), logging to log
// (nil: discarded). Call it before g serves requests.
func Mount(g *gateway.Handler, log *slog.Logger) *Handler {
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	h := &Handler{g: g, log: log}
	g.Mount("POST "+Path, gateway.ScopeWrite, h)
	return h
}

// SessionID is the session of thread threadID of tenant: "agui-" and 32 hex digits of
// a hash of both, so each tenant's threads are its own.
func SessionID(tenant, threadID string) string {
	sum := sha256.Sum256([]byte(tenant + "\x00" + threadID))
	return "agui-" + hex.EncodeToString(sum[:16])
}

// commandID is the command id of run runID's operation (part names an interrupt for a
// resume's inputs): posting a run again never applies it twice.
func commandID(runID, part string) string {
	sum := sha256.Sum256([]byte(runID + "\x00" + part))
	return "agui-" + hex.EncodeToString(sum[:16])
}

// ServeHTTP runs one AG-UI run.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	in, err := decodeInput(w, r)
	if err != nil {
		gateway.WriteError(w, gateway.CodeInvalidArgument, err.Error())
		return
	}
	// The run is a long answer: it ends when the gateway shuts down (the session goes on;
	// the client posts the run again to any node), and Shutdown waits for it.
	ctx, done, err := h.g.Stream(r.Context())
	if err != nil {
		code, msg := gateway.ErrorCode(err)
		gateway.WriteError(w, code, msg)
		return
	}
	defer done()
	tenant := ""
	if p, ok := auth.FromContext(ctx); ok {
		tenant = p.Tenant
	}
	sid := SessionID(tenant, in.ThreadID)
	st, err := h.state(ctx, sid)
	if err != nil {
		code, msg := gateway.ErrorCode(err)
		gateway.WriteError(w, code, msg)
		return
	}
	var resume *Position
	if last := r.Header.Get("Last-Event-ID"); last != "" {
		if resume, err = ParsePosition(last); err != nil {
			gateway.WriteError(w, gateway.CodeInvalidArgument, err.Error())
			return
		}
	}
	s := newStream(w, in, sid, resume)
	s.start()
	from, replay, err := h.apply(ctx, in, sid, st)
	if err != nil {
		code, msg := gateway.ErrorCode(err)
		if c, m, ok := runError(err); ok {
			code, msg = c, m
		}
		s.runError(code, msg)
		return
	}
	if err := h.follow(ctx, s, sid, from, replay, st); err != nil && ctx.Err() == nil {
		h.log.Warn("AG-UI run ended", "session_id", sid, "run_id", in.RunID, "error", err)
		code, msg := gateway.ErrorCode(err)
		s.runError(code, msg)
	}
}

// state is session sid's state; nil when there is no such session (for this principal).
func (h *Handler) state(ctx context.Context, sid string) (*messages.SessionState, error) {
	res, err := h.g.Do(ctx, gateway.Request{Op: gateway.OpState, SessionID: sid})
	if err != nil {
		if code, _ := gateway.ErrorCode(err); code == gateway.CodeNotFound {
			return nil, nil
		}
		return nil, err
	}
	resp := &messages.GetStateResponse{}
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(res, resp); err != nil {
		return nil, fmt.Errorf("decode the state of %s: %w", sid, err)
	}
	if !resp.GetExists() || resp.GetState().GetSeq() == 0 {
		return nil, nil
	}
	return resp.GetState(), nil
}

// agError is a run error of the endpoint's own (RUN_ERROR with code and message).
type agError struct{ code, msg string }

func (e *agError) Error() string { return e.code + ": " + e.msg }

func runError(err error) (code, msg string, ok bool) {
	var e *agError
	if errors.As(err, &e) {
		return e.code, e.msg, true
	}
	return "", "", false
}

// apply runs the run's operation: start (a new thread), send (a follow-up) or input
// (a resume), and returns the seq the run's events follow. replay is set when the run
// was applied before (the same runId): its events are those of its command, found in
// the journal.
func (h *Handler) apply(ctx context.Context, in *RunAgentInput, sid string, st *messages.SessionState) (from uint64, replay string, err error) {
	if len(in.Resume) > 0 {
		return h.resume(ctx, in, sid, st)
	}
	cmd := commandID(in.RunID, "")
	if _, done := st.GetCommands()[cmd]; done {
		return 0, cmd, nil
	}
	text, _ := lastUserText(in.Messages)
	if st == nil {
		_, err := h.g.Do(ctx, gateway.Request{Op: gateway.OpStart, SessionID: sid, Goal: text, CommandID: cmd})
		return 0, "", err
	}
	if open := st.GetAwaiting(); len(open) > 0 {
		return 0, "", &agError{CodeInterruptsPending, fmt.Sprintf("the thread has open interrupts (%s): the next run must answer them with resume",
			strings.Join(requestIDs(open), ", "))}
	}
	_, err = h.g.Do(ctx, gateway.Request{Op: gateway.OpSend, SessionID: sid, Content: text, CommandID: cmd})
	return st.GetSeq(), "", err
}

// resume answers the thread's open interrupts, every one of them.
func (h *Handler) resume(ctx context.Context, in *RunAgentInput, sid string, st *messages.SessionState) (uint64, string, error) {
	first := commandID(in.RunID, in.Resume[0].InterruptID)
	if _, done := st.GetCommands()[first]; done {
		return 0, first, nil
	}
	open := map[string]*messages.HitlRequested{}
	for _, r := range st.GetAwaiting() {
		open[r.GetRequestId()] = r
	}
	answered := map[string]bool{}
	for _, e := range in.Resume {
		if open[e.InterruptID] == nil {
			return 0, "", &agError{CodeInterruptNotOpen, fmt.Sprintf("interrupt %q is not open on thread %q", truncate(e.InterruptID, 80), truncate(in.ThreadID, 80))}
		}
		answered[e.InterruptID] = true
	}
	var missing []string
	for _, id := range requestIDs(st.GetAwaiting()) {
		if !answered[id] {
			missing = append(missing, id)
		}
	}
	if len(missing) > 0 {
		return 0, "", &agError{CodeInterruptsPending, fmt.Sprintf("resume must answer every open interrupt; not answered: %s", strings.Join(missing, ", "))}
	}
	from := st.GetSeq()
	inputs := make([]json.RawMessage, len(in.Resume))
	for i, e := range in.Resume { // every answer is checked before any is given
		req := open[e.InterruptID]
		if e.Status == StatusCancelled && req.GetKind() != "approval" {
			// Nobody will answer: the session is cancelled, and the run ends so.
			_, err := h.g.Do(ctx, gateway.Request{Op: gateway.OpCancel, SessionID: sid, CommandID: commandID(in.RunID, e.InterruptID),
				Reason: fmt.Sprintf("AG-UI interrupt %s cancelled", e.InterruptID), By: "agui"})
			return from, "", err
		}
		input, err := answer(req, e)
		if err != nil {
			return 0, "", err
		}
		inputs[i] = input
	}
	for i, e := range in.Resume {
		req := open[e.InterruptID]
		if _, err := h.g.Do(ctx, gateway.Request{Op: gateway.OpInput, SessionID: sid, StepID: req.GetStepId(), RequestID: req.GetRequestId(),
			Input: inputs[i], CommandID: commandID(in.RunID, e.InterruptID)}); err != nil {
			return 0, "", err
		}
	}
	return from, "", nil
}

// answer is the session input of resume entry e for request req: the payload as it is
// for a question; for an approval, {"approved": true} approves, with "editedArgs" edits,
// {"approved": false, "message"?: why} (or a cancelled status) rejects.
func answer(req *messages.HitlRequested, e ResumeEntry) (json.RawMessage, error) {
	if req.GetKind() != "approval" {
		if len(e.Payload) == 0 || string(e.Payload) == "null" {
			return nil, &agError{gateway.CodeInvalidArgument, fmt.Sprintf("resume of interrupt %q needs a payload: the answer", truncate(e.InterruptID, 80))}
		}
		return e.Payload, nil
	}
	var p struct {
		Approved   *bool           `json:"approved"`
		EditedArgs json.RawMessage `json:"editedArgs"`
		Message    string          `json:"message"`
	}
	if e.Status == StatusResolved {
		if err := json.Unmarshal(e.Payload, &p); err != nil || p.Approved == nil {
			return nil, &agError{gateway.CodeInvalidArgument, fmt.Sprintf(`resume of approval %q needs a payload {"approved": true|false, "editedArgs"?: {...}}`, truncate(e.InterruptID, 80))}
		}
	}
	var d map[string]any
	switch {
	case e.Status == StatusCancelled || !*p.Approved:
		msg := p.Message
		if msg == "" {
			msg = "The user declined the call."
		}
		d = map[string]any{"decision": "reject", "message": msg}
	case len(p.EditedArgs) > 0 && string(p.EditedArgs) != "null":
		d = map[string]any{"decision": "edit", "args": p.EditedArgs}
	default:
		d = map[string]any{"decision": "approve"}
	}
	return json.Marshal(d)
}

func requestIDs(rs []*messages.HitlRequested) []string {
	ids := make([]string, len(rs))
	for i, r := range rs {
		ids[i] = r.GetRequestId()
	}
	return ids
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// follow streams the run: the session's events after from (with its token deltas) until
// the turn ends (RUN_FINISHED, RUN_ERROR) or waits for a human (RUN_FINISHED with the
// interrupt outcome). A replay first skips to the first event of its command.
func (h *Handler) follow(ctx context.Context, s *stream, sid string, from uint64, replay string, st *messages.SessionState) error {
	sub, err := h.g.Follow(ctx, sid, from, true)
	if err != nil {
		return err
	}
	defer sub.Close()
	wait := live.NewWaiter(sub)
	defer wait.Stop()
	// The events of the updates ready at once go out with one flush: before the stream
	// waits, after maxHeld updates, and when it ends.
	s.hold = true
	defer func() {
		s.hold = false
		s.flush()
	}()
	if replay == "" {
		s.snapshot(st)
	}
	for s.err == nil && !s.done {
		u, err := h.next(ctx, sub, wait, s)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("follow %s after seq %d: %w", sid, sub.Last(), err)
		}
		if replay != "" {
			if u.IsDelta || u.Event.GetCommandId() != replay {
				continue
			}
			replay = ""
			s.flush()
			at, err := h.stateAt(ctx, sid, u.Event.GetSeq()-1)
			if err != nil {
				return err
			}
			s.snapshot(at)
		}
		if s.update(u) != interrupted {
			continue
		}
		// The other calls and requests decided with this one (one answer may ask
		// several questions) are ready now: fold them before the run ends. Anything else
		// (an answer, in a replay) is the next run's.
		for s.err == nil && !s.done {
			u, ok, err := sub.TryNextUpdate(ctx)
			if err != nil || !ok || !u.IsDelta && !decidedWithRequest(u.Event) {
				break
			}
			s.update(u)
		}
		if !s.done && len(s.awaiting) > 0 {
			s.interrupt()
		}
	}
	return nil
}

// decidedWithRequest reports the events that come with a human-input request in one
// decision: other tool calls and requests.
func decidedWithRequest(ev *messages.Event) bool {
	switch ev.GetPayload().(type) {
	case *messages.Event_ToolCalled, *messages.Event_HitlRequested:
		return true
	}
	return false
}

// maxHeld is how many updates' events a stream writes before it flushes them, so a long
// catch-up reaches the client as it is read.
const maxHeld = 64

// next returns the subscription's next update: one ready now while fewer than maxHeld
// are unflushed; else it flushes the stream and waits, with an SSE comment every
// keepalive.
func (h *Handler) next(ctx context.Context, sub live.Subscription, wait *live.Waiter, s *stream) (live.Update, error) {
	if s.held < maxHeld {
		s.held++
		if u, ok, err := sub.TryNextUpdate(ctx); err != nil || ok {
			return u, err
		}
	}
	s.held = 0
	if s.flush(); s.err != nil {
		return live.Update{}, s.err
	}
	for {
		u, idle, err := wait.Next(ctx, keepalive)
		if !idle {
			return u, err
		}
		if s.comment(); s.err != nil {
			return live.Update{}, s.err
		}
	}
}

// stateAt is session sid's state after event seq (nil for 0: before it started).
func (h *Handler) stateAt(ctx context.Context, sid string, seq uint64) (*messages.SessionState, error) {
	if seq == 0 {
		return nil, nil
	}
	res, err := h.g.Do(ctx, gateway.Request{Op: gateway.OpStateAt, SessionID: sid, Seq: &seq})
	if err != nil {
		return nil, err
	}
	resp := &messages.StateAtResponse{}
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(res, resp); err != nil {
		return nil, fmt.Errorf("decode the state of %s at %d: %w", sid, seq, err)
	}
	return resp.GetState(), nil
}
