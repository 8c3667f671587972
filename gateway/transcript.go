package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/fathom-agents/fathom/messages"
	"github.com/fathom-agents/fathom/transcript"
)

// serveTranscript answers GET /v1/sessions/{id}/transcript: the session's run as a
// conversation per agent (package transcript), folded from its stored events up to
// seq=N when given (the transcript as the journal held it then), else up to its last.
func (h *Handler) serveTranscript(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := checkSessionID(id); err != nil {
		writeError(w, toAPIError(err))
		return
	}
	at, err := queryUint(r.URL.Query().Get("seq"), 0)
	if err != nil {
		writeError(w, errorf(CodeInvalidArgument, "seq must be an event's sequence number: %q", truncate(r.URL.Query().Get("seq"), 40)))
		return
	}
	b := transcript.New(id, transcript.Options{})
	if err := h.readThrough(r.Context(), callerOf(r), id, 0, at, b.Add); err != nil {
		writeError(w, toAPIError(err))
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, b.Transcript())
}

// serveEvent answers GET /v1/sessions/{id}/events/{seq}: one stored event in its JSON
// rendering, or, with field=F, the whole value of that transcript field
// (transcript.FullValue: what a cut value's "full" names).
func (h *Handler) serveEvent(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := checkSessionID(id); err != nil {
		writeError(w, toAPIError(err))
		return
	}
	seq, err := queryUint(r.PathValue("seq"), 0)
	if err != nil || seq == 0 {
		writeError(w, errorf(CodeInvalidArgument, "seq must be an event's sequence number (from 1): %q", truncate(r.PathValue("seq"), 40)))
		return
	}
	var ev *messages.Event
	err = h.readThrough(r.Context(), callerOf(r), id, seq-1, seq, func(e *messages.Event) { ev = e })
	if code, msg := ErrorCode(err); code == CodeFailedPrecondition {
		writeError(w, errorf(CodeNotFound, "session %q has no event %d: %s", truncate(id, 200), seq, msg))
		return
	}
	if err != nil {
		writeError(w, toAPIError(err))
		return
	}
	if ev == nil {
		writeError(w, hidden(CodeUnavailable, msgUnavailable, fmt.Errorf("read event %d of %s: not delivered", seq, id)))
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	field := r.URL.Query().Get("field")
	if field == "" {
		f, err := h.frames.event(id, ev)
		if err != nil {
			writeError(w, hidden(CodeInternal, msgInternal, err))
			return
		}
		// The cached frame is {"op":"event", ...the event's fields}: drop the op.
		const head = `{"op":"event",`
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte("{"))
		_, _ = w.Write(f[len(head):])
		_, _ = w.Write([]byte("\n"))
		return
	}
	v, err := transcript.FullValue(ev, field)
	if errors.Is(err, transcript.ErrNoField) {
		writeError(w, errorf(CodeInvalidArgument, "event %d (%s) has no transcript field %q", seq, ev.Type(), truncate(field, 40)))
		return
	}
	if err != nil {
		writeError(w, hidden(CodeInternal, msgInternal, err))
		return
	}
	writeJSON(w, http.StatusOK, v)
}

// readThrough checks that caller may read session id (another tenant's session answers
// CodeNotFound, as a missing one) and hands fn its stored events after seq from, through
// seq until, in order (from the live feed, which reads the journal). until 0 means the
// session's last event; an until past it is CodeFailedPrecondition. It is the one read of
// a session's past that the transcript, the gantt, one stored event and the protocol
// adapters' task histories share.
func (h *Handler) readThrough(ctx context.Context, caller *messages.Principal, id string, from, until uint64, fn func(*messages.Event)) error {
	if h.cfg.Feed == nil {
		return errorf(CodeUnsupported, "this gateway has no event feed")
	}
	head, err := h.sessionHead(ctx, caller, id)
	if err != nil {
		return err
	}
	switch {
	case until == 0:
		until = head
	case until > head:
		return errorf(CodeFailedPrecondition, "seq %d is past the session's last event (seq %d)", until, head)
	}
	if until <= from {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, h.cfg.RequestTimeout)
	defer cancel()
	sub := h.cfg.Feed.Follow(id, from, 0)
	defer sub.Close()
	for {
		u, err := sub.NextUpdate(ctx)
		if err != nil {
			return readError(msgUnavailable, fmt.Errorf("read events %d..%d of %s: %w", from+1, until, id, err))
		}
		if u.IsDelta || u.Event == nil {
			continue
		}
		if u.Event.GetSeq() > until {
			return nil
		}
		fn(u.Event)
		if u.Event.GetSeq() >= until {
			return nil
		}
	}
}
