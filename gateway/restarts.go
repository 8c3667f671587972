package gateway

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/fathom-agents/fathom/live"
)

// restartPoll is how often a followed GET /v1/restarts looks for new records.
const restartPoll = 500 * time.Millisecond

// streamRestarts serves GET /v1/restarts: the node's kept supervision events as NDJSON,
// oldest first (at most the last 1,000). ?follow=1 keeps the stream open and writes each
// new record as it is seen, until the client goes away or the gateway shuts down.
func (h *Handler) streamRestarts(w http.ResponseWriter, r *http.Request) {
	follow, err := queryBool(r.URL.Query().Get("follow"), false)
	if err != nil {
		writeError(w, errorf(CodeInvalidArgument, "follow must be true or false (or 1 or 0)"))
		return
	}
	if h.cfg.Restarts == nil {
		writeError(w, errorf(CodeUnsupported, "this gateway has no restart log"))
		return
	}
	if !h.track(nil) {
		writeError(w, errorf(CodeUnavailable, "the gateway is shutting down"))
		return
	}
	defer h.untrack(nil)
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	stop := context.AfterFunc(h.base, cancel) // Shutdown ends streams
	defer stop()
	first, err := h.restartsAfter(ctx, 0)
	if err != nil {
		writeError(w, hidden(CodeUnavailable, "the restart log is unavailable; retry", err))
		return
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	enc := json.NewEncoder(w)
	var last uint64
	write := func(batch []restartLine) bool {
		for _, l := range batch {
			_ = rc.SetWriteDeadline(time.Now().Add(h.cfg.WriteTimeout))
			if enc.Encode(l.v) != nil {
				return false
			}
			last = l.seq
		}
		return rc.Flush() == nil
	}
	if !write(first) || !follow {
		return
	}
	t := time.NewTicker(restartPoll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		next, err := h.restartsAfter(ctx, last)
		if err != nil || !write(next) {
			return
		}
	}
}

type restartLine struct {
	seq uint64
	v   any
}

// restartsAfter returns the kept records numbered above after.
func (h *Handler) restartsAfter(ctx context.Context, after uint64) ([]restartLine, error) {
	qctx, cancel := context.WithTimeout(ctx, h.cfg.RequestTimeout)
	defer cancel()
	all, err := h.cfg.Restarts(qctx)
	if err != nil {
		return nil, err
	}
	var out []restartLine
	for _, r := range all {
		if r.Seq > after {
			out = append(out, restartLine{seq: r.Seq, v: r})
		}
	}
	return out, nil
}

// restartFrame is a restart frame: the record with op "restart".
type restartFrame struct {
	Op string `json:"op"`
	live.Restart
}

// subscribeRestarts serves subscribe_restarts: an ack, then every kept supervision event
// of the node as a restart frame, then each new one as it is seen (polled every
// restartPoll), until the connection ends. One goroutine per connection, owned by it.
func (c *conn) subscribeRestarts(req *Request) {
	if c.h.cfg.Restarts == nil {
		c.replyError(req, "", errorf(CodeUnsupported, "this gateway has no restart log"))
		return
	}
	c.mu.Lock()
	switch {
	case c.draining:
		c.mu.Unlock()
		c.replyError(req, "", errorf(CodeUnavailable, "the gateway is shutting down"))
		return
	case c.restarts:
		c.mu.Unlock()
		c.replyError(req, "", errorf(CodeFailedPrecondition, "this connection already follows the restarts"))
		return
	}
	c.restarts = true
	c.mu.Unlock()
	c.reply(ackBytes(req, "", []byte("{}")))
	go func() {
		var last uint64
		t := time.NewTicker(restartPoll)
		defer t.Stop()
		for {
			batch, err := c.h.restartsAfter(c.ctx, last)
			if err != nil && c.ctx.Err() == nil {
				c.reply(c.errorFrame(req, "", hidden(CodeUnavailable, "the restart log is unavailable; retry", err)))
			}
			for _, l := range batch {
				f, err := json.Marshal(restartFrame{Op: FrameRestart, Restart: l.v.(live.Restart)})
				if err != nil || !c.enqueue(c.ctx, f) {
					return
				}
				last = l.seq
			}
			select {
			case <-c.ctx.Done():
				return
			case <-c.closing:
				return
			case <-t.C:
			}
		}
	}()
}
