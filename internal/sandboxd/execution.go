package sandboxd

import (
	"context"
	"log/slog"
	"time"

	"github.com/fathom-agents/fathom/messages/fsp"
)

// execution is one acknowledged execute on a connection, from the queue to its result.
type execution struct {
	conn   *conn
	req    *fsp.Execute
	rt     runtime
	limits fsp.Limits
	ctx    context.Context
	cancel context.CancelCauseFunc
	log    *slog.Logger
}

// run waits for a slot, runs the process and reports: status running, output as it comes,
// then the terminal status and the result. An output overflow adds an OUTPUT_LIMIT error
// before the terminal status (failed); an infrastructure failure after the ack is an
// INTERNAL_ERROR error and ends the execution without a result.
func (e *execution) run() {
	defer e.conn.finished(e)
	defer e.cancel(nil)
	slot, ok := e.conn.srv.acquire(e.ctx)
	if !ok {
		if context.Cause(e.ctx) == errCancelled {
			e.log.Info("sandbox execution cancelled while queued")
			e.finish(outcome{status: fsp.StatusCancelled})
		}
		return
	}
	defer e.conn.srv.release(slot)
	o, err := e.conn.srv.iso.run(e.ctx, job{
		rt:     e.rt,
		code:   e.req.Code,
		stdin:  e.req.Stdin,
		env:    e.req.Env,
		limits: e.limits,
		slot:   slot,
		chunk:  e.conn.srv.cfg.OutputChunkBytes,
		started: func() {
			e.conn.send(&fsp.StatusUpdate{Header: e.header(fsp.TypeStatus), Status: fsp.StatusRunning})
		},
		output: func(stream fsp.Type, data string) bool {
			return e.conn.send(&fsp.Output{Header: e.header(stream), Data: data})
		},
	})
	if err != nil {
		e.log.Error("sandbox execution failed", "err", err)
		e.conn.sendError(e.req.ID, fsp.CodeInternalError, "sandbox failure: "+err.Error())
		return
	}
	if o.killedFor == errOutputLimit {
		e.conn.sendError(e.req.ID, fsp.CodeOutputLimit, "output exceeded max_output_bytes")
	}
	e.finish(o)
	exit := -1
	if o.exitCode != nil {
		exit = *o.exitCode
	}
	e.log.Info("sandbox execution finished", "status", o.status, "exit_code", exit,
		"duration_ms", o.duration.Milliseconds(), "slot", slot)
}

// finish sends the terminal status and the result.
func (e *execution) finish(o outcome) {
	e.conn.send(&fsp.StatusUpdate{Header: e.header(fsp.TypeStatus), Status: o.status})
	e.conn.send(&fsp.Result{Header: e.header(fsp.TypeResult), ExitCode: o.exitCode, DurationMS: o.duration.Milliseconds(), ResourceUsage: o.usage})
}

func (e *execution) header(t fsp.Type) fsp.Header {
	return fsp.NewHeader(t, e.req.ID, time.Now())
}
