package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/cluster"

	"github.com/fathom-agents/fathom/auth"
	"github.com/fathom-agents/fathom/live"
	"github.com/fathom-agents/fathom/messages"
)

// httpOp serves an operation of the routing table over HTTP: the session id comes from
// the path, the other fields from the JSON body (POST, DELETE) or the query (GET).
func (h *Handler) httpOp(op string) http.Handler {
	spec := ops[op]
	return h.require(spec.scope, func(w http.ResponseWriter, r *http.Request) {
		req := &Request{}
		if r.Method == http.MethodPost || r.Method == http.MethodDelete {
			if err := decodeBody(w, r, req); err != nil {
				writeError(w, err)
				return
			}
		}
		if req.Op != "" && req.Op != op {
			writeError(w, errorf(CodeInvalidArgument, "body op %q does not match the route's %q", truncate(req.Op, 40), op))
			return
		}
		req.Op = op
		req.caller, req.ctx = callerOf(r), r.Context()
		if id := r.PathValue("id"); id != "" {
			if req.SessionID != "" && req.SessionID != id {
				writeError(w, errorf(CodeInvalidArgument, "body session_id %q differs from the path's %q", truncate(req.SessionID, 40), truncate(id, 40)))
				return
			}
			req.SessionID = id
		}
		if op == OpGantt || op == OpStateAt {
			seq, err := querySeq(r)
			if err != nil {
				writeError(w, err)
				return
			}
			req.Seq = seq
		}
		if op == OpStateAt {
			switch at := r.URL.Query().Get("at"); {
			case at != "": // ?at= wins over ?seq=
				n, err := strconv.ParseUint(at, 10, 32)
				if err != nil {
					writeError(w, errorf(CodeInvalidArgument, "at must be a step index (0 = after planning): %q", truncate(at, 40)))
					return
				}
				idx := uint32(n)
				req.Seq, req.StepIndex = nil, &idx
			case req.Seq == nil:
				req.Op = OpState // GET /v1/sessions/{id}/state without ?at= or ?seq= is the current state
			}
		}
		res, err := h.run(req)
		if err != nil {
			writeError(w, toAPIError(err)) // the access log has the detail
			return
		}
		status := res.status
		if status == 0 {
			status = http.StatusOK
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write(res.body)
		_, _ = w.Write([]byte("\n"))
	})
}

// querySeq reads the ?seq= of state_at and gantt (nil when absent).
func querySeq(r *http.Request) (*uint64, *apiError) {
	seq := r.URL.Query().Get("seq")
	if seq == "" {
		return nil, nil
	}
	n, err := strconv.ParseUint(seq, 10, 64)
	if err != nil {
		return nil, errorf(CodeInvalidArgument, "seq must be an event's sequence number: %q", truncate(seq, 40))
	}
	return &n, nil
}

// decodeBody reads a JSON request body strictly; an empty body is an empty request.
func decodeBody(w http.ResponseWriter, r *http.Request, req *Request) *apiError {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	dec.DisallowUnknownFields()
	err := dec.Decode(req)
	if err == nil && dec.More() {
		err = errors.New("trailing data after the JSON object")
	}
	var tooBig *http.MaxBytesError
	switch {
	case err == nil || errors.Is(err, io.EOF): // an empty body is an empty request
		return nil
	case errors.As(err, &tooBig):
		return &apiError{code: CodeInvalidArgument, msg: fmt.Sprintf("body exceeds %d bytes", MaxBodyBytes), status: http.StatusRequestEntityTooLarge}
	}
	return errorf(CodeInvalidArgument, "malformed JSON body: %v", err)
}

// streamEvents serves GET /v1/sessions/{id}/events: the stored events after from_seq
// (or the SSE Last-Event-ID), then live ones, as NDJSON frames or, when the client
// accepts text/event-stream, as server-sent events. follow=false ends the stream at the
// session's current last event.
func (h *Handler) streamEvents(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := checkSessionID(id); err != nil {
		writeError(w, toAPIError(err))
		return
	}
	q := r.URL.Query()
	from, err := queryUint(q.Get("from_seq"), 0)
	if err == nil && r.Header.Get("Last-Event-ID") != "" {
		from, err = queryUint(r.Header.Get("Last-Event-ID"), 0)
	}
	if err != nil {
		writeError(w, errorf(CodeInvalidArgument, "from_seq / Last-Event-ID must be a sequence number"))
		return
	}
	follow, err1 := queryBool(q.Get("follow"), true)
	deltas, err2 := queryBool(q.Get("deltas"), true)
	if err1 != nil || err2 != nil {
		writeError(w, errorf(CodeInvalidArgument, "follow and deltas must be true or false"))
		return
	}
	if h.cfg.Feed == nil {
		writeError(w, errorf(CodeUnsupported, "this gateway has no event feed"))
		return
	}
	head, err := h.sessionHead(r.Context(), callerOf(r), id)
	if err != nil {
		writeError(w, toAPIError(err))
		return
	}
	until := uint64(0)
	if !follow {
		until = head
	}
	if !h.track(nil) {
		writeError(w, errorf(CodeUnavailable, "the gateway is shutting down"))
		return
	}
	defer h.untrack(nil)
	sse := strings.Contains(r.Header.Get("Accept"), "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	if sse {
		w.Header().Set("Content-Type", "text/event-stream")
	} else {
		w.Header().Set("Content-Type", "application/x-ndjson")
	}
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	_ = rc.Flush()
	if !follow && until <= from {
		return
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	stop := context.AfterFunc(h.base, cancel) // Shutdown ends streams
	defer stop()
	deltaBuffer := 0
	if deltas && follow {
		deltaBuffer = h.cfg.DeltaBuffer
	}
	sub := h.cfg.Feed.Follow(id, from, deltaBuffer)
	defer sub.Close()
	s := &eventStream{w: w, rc: rc, sse: sse, timeout: h.cfg.WriteTimeout}
	if sse {
		s.wait = live.NewWaiter(sub)
		defer s.wait.Stop()
	}
	rid := w.Header().Get(RequestIDHeader)
	fail := func(e *apiError) {
		h.cfg.Logger.Warn("event stream ended", "session_id", id, "request_id", rid, "last_seq", sub.Last(), "code", e.code, "error", e.detail)
		_ = s.write(errorBytes(nil, id, rid, e), 0, FrameError)
	}
	for {
		u, err := h.nextUpdate(ctx, sub, s)
		// What is ready now (the events of one commit, a catch-up's page) goes out in one
		// write: one flush after the last of them, not one per frame.
		for n := 1; ; n++ {
			if err != nil {
				if ctx.Err() == nil {
					fail(readError(fmt.Sprintf("the stream ended after seq %d: %s", sub.Last(), msgUnavailable), err))
				}
				return
			}
			var frame []byte
			var seq uint64
			kind := FrameDelta
			if u.IsDelta {
				frame = h.frames.delta(id, u.Delta)
			} else {
				if frame, err = h.frames.event(id, u.Event); err != nil {
					fail(hidden(CodeInternal, msgInternal, err))
					return
				}
				seq, kind = u.Event.GetSeq(), FrameEvent
			}
			if s.add(frame, seq, kind, n == 1) != nil {
				return
			}
			if !u.IsDelta && !follow && seq >= until {
				_ = s.flush()
				return
			}
			if n == maxFramesPerWrite {
				break
			}
			var ready bool
			if u, ready, err = sub.TryNextUpdate(ctx); err == nil && !ready {
				break
			}
		}
		if s.flush() != nil {
			return
		}
	}
}

// maxFramesPerWrite bounds the frames an event stream writes before it flushes them, so
// a long catch-up reaches the client as it is read.
const maxFramesPerWrite = 64

// access asks session id's grain whether caller may read it (act: act on it): the
// grain answers another tenant's session exactly as a missing one (NOT_FOUND). The
// routes that do not go through the grain (the event stream, artifacts, delete) ask
// first. An admin, who may do anything to any session, is not asked about.
func (h *Handler) access(caller *messages.Principal, id string, act bool) error {
	if caller == nil || auth.FromMessage(caller).Admin() {
		return nil
	}
	_, err := h.grain(id).Access(&messages.AccessRequest{Caller: caller, Act: act}, cluster.WithTimeout(h.cfg.RequestTimeout))
	return err
}

// sessionHead returns the seq of session id's last stored event. A session with none
// does not exist: CodeNotFound, as every route answers for an unknown session.
func (h *Handler) sessionHead(ctx context.Context, caller *messages.Principal, id string) (uint64, error) {
	if err := h.access(caller, id, false); err != nil {
		return 0, toAPIError(err)
	}
	ctx, cancel := context.WithTimeout(ctx, h.cfg.RequestTimeout)
	defer cancel()
	seq, err := h.cfg.Feed.LastSeq(ctx, id)
	switch {
	case err != nil:
		return 0, hidden(CodeUnavailable, msgUnavailable, fmt.Errorf("read the head of %s: %w", id, err))
	case seq == 0:
		return 0, errorf(CodeNotFound, "session %q not found", truncate(id, 200))
	}
	return seq, nil
}

// nextUpdate waits for the subscription's next update; an SSE stream gets a comment
// line every PingInterval while it waits, so proxies keep it open.
func (h *Handler) nextUpdate(ctx context.Context, sub live.Subscription, s *eventStream) (live.Update, error) {
	if !s.sse {
		return sub.NextUpdate(ctx)
	}
	for {
		u, idle, err := s.wait.Next(ctx, h.cfg.PingInterval)
		if !idle {
			return u, err
		}
		if err := s.comment("keepalive"); err != nil {
			return live.Update{}, err
		}
	}
}

// eventStream writes frames as NDJSON lines or server-sent events.
type eventStream struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	sse     bool
	timeout time.Duration
	wait    *live.Waiter // SSE: waits for updates, with a keepalive comment when idle
}

// write writes one frame and flushes it.
func (s *eventStream) write(frame []byte, seq uint64, kind string) error {
	if err := s.add(frame, seq, kind, true); err != nil {
		return err
	}
	return s.flush()
}

// flush sends the frames added so far.
func (s *eventStream) flush() error { return s.rc.Flush() }

// add writes one frame without flushing it; first (re)sets the write deadline, for the
// first frame of a write.
func (s *eventStream) add(frame []byte, seq uint64, kind string, first bool) error {
	if first {
		_ = s.rc.SetWriteDeadline(time.Now().Add(s.timeout))
	}
	// The line is put together in a scratch buffer shared by all streams (frameScratch):
	// one write of it, and no buffer held by an idle subscriber.
	scratch := frameScratch.Get().(*[]byte)
	defer frameScratch.Put(scratch)
	b := (*scratch)[:0]
	if s.sse {
		if seq > 0 {
			b = append(strconv.AppendUint(append(b, "id: "...), seq, 10), '\n')
		}
		b = append(append(append(append(append(b, "event: "...), kind...), "\ndata: "...), frame...), "\n\n"...)
	} else {
		b = append(append(b, frame...), '\n')
	}
	_, err := s.w.Write(b)
	if cap(b) <= maxScratch {
		*scratch = b[:0] // grown: kept for the next frame (not a large one's)
	}
	return err
}

func (s *eventStream) comment(text string) error {
	_ = s.rc.SetWriteDeadline(time.Now().Add(s.timeout))
	if _, err := fmt.Fprintf(s.w, ": %s\n\n", text); err != nil {
		return err
	}
	return s.rc.Flush()
}

func queryUint(v string, def uint64) (uint64, error) {
	if v == "" {
		return def, nil
	}
	return strconv.ParseUint(v, 10, 64)
}

func queryBool(v string, def bool) (bool, error) {
	if v == "" {
		return def, nil
	}
	return strconv.ParseBool(v)
}
