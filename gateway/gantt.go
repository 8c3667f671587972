package gateway

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/fathom-agents/fathom/actors/session/core"
)

// opGantt answers gantt: the session's run as bars with durations, its plan's versions
// as dependency graphs and its cost per step, per agent and in total (core.Gantt),
// folded from its stored events through seq (default: the last), so a past point shows
// only what the journal held then. Like the event stream it asks the session's grain
// first whether the caller may read it: another tenant's session answers exactly like
// a missing one. The restarts of the session's grain this node kept are added as marks.
func (h *Handler) opGantt(req *Request) (opResult, error) {
	if h.cfg.Feed == nil {
		return opResult{}, errorf(CodeUnsupported, "this gateway has no event feed")
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
	b := core.NewGanttBuilder(req.SessionID)
	sub := h.cfg.Feed.Follow(req.SessionID, 0, 0)
	defer sub.Close()
	for sub.Last() < upTo {
		u, err := sub.NextUpdate(ctx)
		if err != nil {
			return opResult{}, hidden(CodeUnavailable, msgUnavailable, fmt.Errorf("read the events of %s: %w", req.SessionID, err))
		}
		if u.IsDelta {
			continue
		}
		if err := b.Add(u.Event); err != nil {
			return opResult{}, hidden(CodeInternal, msgInternal, err)
		}
	}
	g := b.Gantt()
	h.addRestarts(ctx, g)
	body, err := json.Marshal(g)
	if err != nil {
		return opResult{}, fmt.Errorf("encode the gantt of %s: %w", req.SessionID, err)
	}
	return opResult{sessionID: req.SessionID, body: body}, nil
}

// addRestarts adds the kept restarts of g's session up to its last event's time as marks
// (one that came before the first event, while the start was handled, is drawn at the
// start). The log is the node's, best effort: a gantt without it still answers.
func (h *Handler) addRestarts(ctx context.Context, g *core.Gantt) {
	if h.cfg.Restarts == nil {
		return
	}
	all, err := h.cfg.Restarts(ctx)
	if err != nil {
		h.cfg.Logger.Debug("gantt without restarts", "session_id", g.SessionID, "error", err)
		return
	}
	for _, r := range all {
		at := r.At.UnixNano()
		if r.SessionID != g.SessionID || at > g.EndUnixNano { // a restart before the first event is drawn at the start
			continue
		}
		g.Marks = append(g.Marks, core.Mark{Kind: core.MarkRestart, UnixNano: at, Label: r.Kind + " " + r.Directive})
	}
}
