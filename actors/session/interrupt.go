package session

import (
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/cluster"

	"github.com/fathom-agents/fathom/messages"
)

// Interrupts stop a session at step boundaries. A runtime breakpoint (SetBreakpoint)
// matches steps by type and/or id, "before" a step starts or "after" it completed (and
// the next has not started; after the last step the session just completes). Pause is
// a once breakpoint matching every step. When one matches, the decision that would have
// started the step records interrupt_triggered instead and the session sits in
// INTERRUPTED; Resume (or the breakpoint's deadline, kept in state so it fires after
// passivation, restart or failover) records interrupt_resumed and starts the step,
// optionally replaced by a modified one. Steps in flight are never cut: interrupts
// happen between steps only.

// Breakpoint positions and default actions.
const (
	positionBefore = "before"
	positionAfter  = "after"
	actionContinue = "continue"
	actionFail     = "fail"
	// PauseBreakpointID is the id of the once breakpoint a Pause sets.
	PauseBreakpointID = "pause"
)

// matchBreakpoint returns the first breakpoint at position matching step, or nil.
func matchBreakpoint(s *messages.SessionState, position string, step *messages.PlanStep) *messages.Breakpoint {
	for _, bp := range s.GetBreakpoints() {
		if bp.GetPosition() != position {
			continue
		}
		if (bp.GetStepType() == "" || bp.GetStepType() == step.GetType()) && (bp.GetStepId() == "" || bp.GetStepId() == step.GetId()) {
			return bp
		}
	}
	return nil
}

func interrupt(b *eventBuilder, bp *messages.Breakpoint, idx uint32, stepID string) {
	it := &messages.InterruptTriggered{
		BreakpointId: bp.GetId(), Reason: "breakpoint", Position: bp.GetPosition(), StepId: stepID, StepIndex: idx,
		DefaultAction: bp.GetDefaultAction(),
	}
	if bp.GetId() == PauseBreakpointID {
		it.Reason = "pause"
	}
	if bp.GetTimeoutMs() > 0 {
		it.DeadlineUnixNano = b.at + bp.GetTimeoutMs()*int64(time.Millisecond)
	}
	b.add(func(e *messages.Event) { e.Payload = &messages.Event_InterruptTriggered{InterruptTriggered: it} })
}

// validateBreakpoint checks a breakpoint from a request, filling in defaults.
func validateBreakpoint(bp *messages.Breakpoint) error {
	if bp == nil {
		return refuse(messages.ErrorReason_INVALID_ARGUMENT, "breakpoint is required")
	}
	if bp.Position == "" {
		bp.Position = positionBefore
	}
	if bp.DefaultAction == "" {
		bp.DefaultAction = actionContinue
	}
	switch {
	case bp.GetId() == "":
		return refuse(messages.ErrorReason_INVALID_ARGUMENT, "breakpoint id is required")
	case bp.GetPosition() != positionBefore && bp.GetPosition() != positionAfter:
		return refuse(messages.ErrorReason_INVALID_ARGUMENT, "breakpoint position must be before or after, not %q", bp.GetPosition())
	case bp.GetDefaultAction() != actionContinue && bp.GetDefaultAction() != actionFail:
		return refuse(messages.ErrorReason_INVALID_ARGUMENT, "default_action must be continue or fail, not %q", bp.GetDefaultAction())
	case bp.GetTimeoutMs() < 0:
		return refuse(messages.ErrorReason_INVALID_ARGUMENT, "timeout_ms must not be negative")
	}
	return nil
}

// decideCommand checks what every session command needs: a command id and a started,
// unfinished session.
func decideCommand(s *messages.SessionState, cmdID string) error {
	if err := validateCommandID(cmdID); err != nil {
		return err
	}
	if s.GetSeq() == 0 {
		return refuse(messages.ErrorReason_NOT_FOUND, "session %q not found", s.GetSessionId())
	}
	if Terminal(s) {
		return refuse(messages.ErrorReason_FAILED_PRECONDITION, "session %s has ended (%s)", s.GetSessionId(), s.GetStatus())
	}
	return nil
}

func decideSetBreakpoint(s *messages.SessionState, req *messages.SetBreakpointRequest, now time.Time) ([]*messages.Event, error) {
	bp := req.GetBreakpoint()
	if err := validateBreakpoint(bp); err != nil {
		return nil, err
	}
	if err := decideCommand(s, req.GetCommandId()); err != nil {
		return nil, err
	}
	b := newEvents(s, req.GetCommandId(), now)
	b.add(func(e *messages.Event) {
		e.Payload = &messages.Event_BreakpointSet{BreakpointSet: &messages.BreakpointSet{Breakpoint: bp}}
	})
	return b.evs, nil
}

func decideClearBreakpoints(s *messages.SessionState, req *messages.ClearBreakpointsRequest, now time.Time) ([]*messages.Event, error) {
	if err := decideCommand(s, req.GetCommandId()); err != nil {
		return nil, err
	}
	b := newEvents(s, req.GetCommandId(), now)
	b.add(func(e *messages.Event) {
		e.Payload = &messages.Event_BreakpointsCleared{BreakpointsCleared: &messages.BreakpointsCleared{}}
	})
	return b.evs, nil
}

func decidePause(s *messages.SessionState, req *messages.PauseRequest, now time.Time) ([]*messages.Event, error) {
	return decideSetBreakpoint(s, &messages.SetBreakpointRequest{CommandId: req.GetCommandId(), Breakpoint: &messages.Breakpoint{
		Id: PauseBreakpointID, Position: positionBefore, Once: true, DefaultAction: actionContinue,
	}}, now)
}

func decideResume(s *messages.SessionState, req *messages.ResumeRequest, cfg Config, now time.Time) ([]*messages.Event, error) {
	if err := decideCommand(s, req.GetCommandId()); err != nil {
		return nil, err
	}
	it := s.GetInterrupt()
	if it == nil {
		return nil, refuse(messages.ErrorReason_FAILED_PRECONDITION, "session %s is not interrupted (%s)", s.GetSessionId(), s.GetStatus())
	}
	next := nextStepIndex(it)
	if m := req.GetModifiedStep(); m != nil {
		steps := planSteps(s)
		if int(next) >= len(steps) || m.GetId() != steps[next].GetId() {
			return nil, refuse(messages.ErrorReason_INVALID_ARGUMENT, "modified_step must keep the id of the step that runs next")
		}
		if m.GetDescription() == "" {
			return nil, refuse(messages.ErrorReason_INVALID_ARGUMENT, "modified_step needs a description")
		}
		if m.Type == "" {
			m.Type = steps[next].GetType()
		}
	}
	b := newEvents(s, req.GetCommandId(), now)
	endInterrupt(b, s, cfg, "human", actionContinue, req.GetModifiedStep())
	return b.evs, nil
}

// decideInterruptDeadline takes an interrupt's default action once its deadline passed.
func decideInterruptDeadline(s *messages.SessionState, cfg Config, now time.Time) []*messages.Event {
	it := s.GetInterrupt()
	if it == nil || it.GetDeadlineUnixNano() == 0 || now.UnixNano() < it.GetDeadlineUnixNano() || Terminal(s) {
		return nil
	}
	b := newEvents(s, "", now)
	endInterrupt(b, s, cfg, "timeout", it.GetDefaultAction(), nil)
	return b.evs
}

// nextStepIndex is the step that runs when interrupt it ends.
func nextStepIndex(it *messages.InterruptTriggered) uint32 {
	if it.GetPosition() == positionAfter {
		return it.GetStepIndex() + 1
	}
	return it.GetStepIndex()
}

// endInterrupt records interrupt_resumed and then fails the session or starts the step
// that runs next when it is ready (its before-breakpoints are not checked again: this
// resume is for it), then whatever else the plan allows (advance).
func endInterrupt(b *eventBuilder, s *messages.SessionState, cfg Config, by, action string, modified *messages.PlanStep) {
	it := s.GetInterrupt()
	b.add(func(e *messages.Event) {
		e.Payload = &messages.Event_InterruptResumed{InterruptResumed: &messages.InterruptResumed{By: by, Action: action, ModifiedStep: modified}}
	})
	if action == actionFail {
		fail(b, fmt.Sprintf("interrupt %s step %s timed out; its default action is fail", it.GetPosition(), it.GetStepId()))
		return
	}
	st := b.state()
	next := nextStepIndex(it)
	if int(next) < len(st.GetSteps()) {
		step := st.GetSteps()[next]
		busy := orchestratorBusy(st)
		if delegated(step.GetStep()) {
			busy = runningSubAgents(st) >= cfg.maxParallelSubAgents()
		}
		if step.GetStatus() == messages.StepStatus_STEP_STATUS_PENDING && dependenciesDone(st, step.GetStep()) && !busy {
			startAnyStep(b, cfg, step.GetStep(), next, 1, "")
		}
	}
	advance(b, cfg)
}

// SetBreakpoint adds a breakpoint. Idempotent by command id.
func (g *Grain) SetBreakpoint(req *messages.SetBreakpointRequest, ctx cluster.GrainContext) (*messages.CommandResponse, error) {
	defer g.guard(ctx, "SetBreakpoint")
	return g.command(ctx, req.GetCommandId(), func() ([]*messages.Event, error) { return decideSetBreakpoint(g.state, req, g.deps.Now()) })
}

// ClearBreakpoints removes every breakpoint. Idempotent by command id.
func (g *Grain) ClearBreakpoints(req *messages.ClearBreakpointsRequest, ctx cluster.GrainContext) (*messages.CommandResponse, error) {
	defer g.guard(ctx, "ClearBreakpoints")
	return g.command(ctx, req.GetCommandId(), func() ([]*messages.Event, error) { return decideClearBreakpoints(g.state, req, g.deps.Now()) })
}

// Pause stops the session at its next step boundary. Idempotent by command id.
func (g *Grain) Pause(req *messages.PauseRequest, ctx cluster.GrainContext) (*messages.CommandResponse, error) {
	defer g.guard(ctx, "Pause")
	return g.command(ctx, req.GetCommandId(), func() ([]*messages.Event, error) { return decidePause(g.state, req, g.deps.Now()) })
}

// Resume ends the current interrupt. Idempotent by command id.
func (g *Grain) Resume(req *messages.ResumeRequest, ctx cluster.GrainContext) (*messages.CommandResponse, error) {
	defer g.guard(ctx, "Resume")
	return g.command(ctx, req.GetCommandId(), func() ([]*messages.Event, error) { return decideResume(g.state, req, g.deps.Config, g.deps.Now()) })
}

// command runs a session command through the commit path: readiness, the duplicate
// check by command id, decide, commit, then whatever became due.
func (g *Grain) command(ctx cluster.GrainContext, cmdID string, decide func() ([]*messages.Event, error)) (*messages.CommandResponse, error) {
	defer g.updateIdle(ctx)
	if err := g.ready(); err != nil {
		return nil, err
	}
	if seq, ok := g.state.GetCommands()[cmdID]; ok && cmdID != "" {
		return &messages.CommandResponse{Seq: seq, Duplicate: true}, nil
	}
	evs, err := decide()
	if err != nil {
		return nil, grainError(err)
	}
	if err := g.commit(ctx, evs); err != nil {
		return nil, err
	}
	g.kick(ctx)
	return &messages.CommandResponse{Seq: g.state.GetSeq()}, nil
}
