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
	if h.cfg.Feed == nil {
		writeError(w, errorf(CodeUnsupported, "this gateway has no event feed"))
		return
	}
	head, err := h.sessionHead(r.Context(), callerOf(r), id)
	if err != nil {
		writeError(w, toAPIError(err))
		return
	}
	until := head
	if at > 0 && at < head {
		until = at
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.RequestTimeout)
	defer cancel()
	b := transcript.New(id, transcript.Options{})
	err = h.readEvents(ctx, id, 0, until, func(ev *messages.Event) { b.Add(ev) })
	if err != nil {
		writeError(w, readError(msgUnavailable, fmt.Errorf("read the transcript of %s: %w", id, err)))
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
	if h.cfg.Feed == nil {
		writeError(w, errorf(CodeUnsupported, "this gateway has no event feed"))
		return
	}
	head, err := h.sessionHead(r.Context(), callerOf(r), id)
	if err != nil {
		writeError(w, toAPIError(err))
		return
	}
	if seq > head {
		writeError(w, errorf(CodeNotFound, "session %q has no event %d (its last is %d)", truncate(id, 200), seq, head))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.RequestTimeout)
	defer cancel()
	var ev *messages.Event
	if err := h.readEvents(ctx, id, seq-1, seq, func(e *messages.Event) { ev = e }); err != nil || ev == nil {
		writeError(w, readError(msgUnavailable, fmt.Errorf("read event %d of %s: %w", seq, id, err)))
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

// readEvents hands fn session id's stored events after seq from, up to seq until, in
// order (from the live feed, which reads the journal).
func (h *Handler) readEvents(ctx context.Context, id string, from, until uint64, fn func(*messages.Event)) error {
	if until <= from {
		return nil
	}
	sub := h.cfg.Feed.Follow(id, from, 0)
	defer sub.Close()
	for {
		u, err := sub.NextUpdate(ctx)
		if err != nil {
			return fmt.Errorf("read events %d..%d: %w", from+1, until, err)
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
