package gateway

import (
	"context"
	"fmt"

	"github.com/fathom-agents/fathom/messages"
)

// opGantt answers gantt: the session's run as bars with durations, its plan's versions
// as dependency graphs and its cost per step, per agent and in total (Config.Gantt, the
// node's core.Gantt), folded from its stored events through seq (default: the last), so a past point shows
// only what the journal held then. Like the event stream it asks the session's grain
// first whether the caller may read it: another tenant's session answers exactly like
// a missing one. The restarts of the session's grain this node kept are added as marks.
func (h *Handler) opGantt(req *Request) (opResult, error) {
	if h.cfg.Feed == nil || h.cfg.Gantt == nil {
		return opResult{}, errorf(CodeUnsupported, "this gateway has no event feed or no gantt read model")
	}
	if req.Seq != nil && *req.Seq == 0 {
		return opResult{}, errorf(CodeInvalidArgument, "seq must be 1 or more")
	}
	ctx, cancel := context.WithTimeout(h.base, h.cfg.RequestTimeout)
	defer cancel()
	head, err := h.sessionHead(ctx, req.caller, req.SessionID)
	if err != nil {
		return opResult{}, err
	}
	upTo := head
	if req.Seq != nil {
		if *req.Seq > head {
			return opResult{}, errorf(CodeFailedPrecondition, "seq %d is past the session's last event (seq %d)", *req.Seq, head)
		}
		upTo = *req.Seq
	}
	var evs []*messages.Event
	sub := h.cfg.Feed.Follow(req.SessionID, 0, 0)
	defer sub.Close()
	for sub.Last() < upTo {
		u, err := sub.NextUpdate(ctx)
		if err != nil {
			return opResult{}, readError(msgUnavailable, fmt.Errorf("read the events of %s: %w", req.SessionID, err))
		}
		if !u.IsDelta {
			evs = append(evs, u.Event)
		}
	}
	body, err := h.cfg.Gantt(req.SessionID, evs, h.restartsOf(ctx, req.SessionID))
	if err != nil {
		return opResult{}, hidden(CodeInternal, msgInternal, fmt.Errorf("gantt of %s: %w", req.SessionID, err))
	}
	return opResult{sessionID: req.SessionID, body: body}, nil
}

// GanttRestart is a restart of a session's grain, drawn as a mark on its Gantt.
type GanttRestart struct {
	// UnixNano is when it happened; Label says what (kind and directive).
	UnixNano int64
	Label    string
}

// restartsOf returns the kept restarts of session id (the node's log, best effort: a
// gantt without them still answers).
func (h *Handler) restartsOf(ctx context.Context, id string) []GanttRestart {
	if h.cfg.Restarts == nil {
		return nil
	}
	all, err := h.cfg.Restarts(ctx)
	if err != nil {
		h.cfg.Logger.Debug("gantt without restarts", "session_id", id, "error", err)
		return nil
	}
	var out []GanttRestart
	for _, r := range all {
		if r.SessionID == id {
			out = append(out, GanttRestart{UnixNano: r.At.UnixNano(), Label: r.Kind + " " + r.Directive})
		}
	}
	return out
}
