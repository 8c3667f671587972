package core

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/fathom-agents/fathom/messages"
)

// Interrupts stop a session at step boundaries. A runtime breakpoint (SetBreakpoint)
// matches steps by type and/or id, "before" a step starts or "after" it completed (and
// the next has not started; after the last step the session just completes). Pause is
// a once breakpoint matching every step. A plan step's own interrupt field ("before" or
// "after") is a breakpoint on that step, with the step's timeout (default 5 minutes)
// and default action. When one matches, the decision that would have started the step
// records interrupt_triggered instead and the session sits in INTERRUPTED; Resume (or
// the breakpoint's deadline, kept in state so it fires after passivation, restart or
// failover) records interrupt_resumed and starts the step, optionally replaced by a
// modified one. Steps in flight are never cut: interrupts happen between steps only.
//
// A user's pause holds until a human resumes: it comes before a step's own interrupt
// at the same boundary (a pause has no deadline), and a Pause requested while the
// session is already stopped suspends that interrupt's deadline; the Resume that ends
// the interrupt ends the pause too (interrupt_resumed.pause_released).
//
// A tool breakpoint (Breakpoint.tool) stops the session before a call of that tool
// runs: the turn's calls are recorded (tool_called) with interrupt_triggered (reason
// "tool"), none of them starts while the session is interrupted, and Resume lets them
// run (the turn goes on; its deadline's "fail" fails the session instead).

// Breakpoint positions and default actions.
const (
	positionBefore = "before"
	positionAfter  = "after"
	actionContinue = "continue"
	actionFail     = "fail"
	// PauseBreakpointID is the id of the once breakpoint a Pause sets.
	PauseBreakpointID = "pause"
	// StepInterruptPrefix starts the breakpoint id of a plan step's own interrupt
	// ("step:" + step id).
	StepInterruptPrefix = "step:"
)

// Interrupt reasons (InterruptTriggered.reason).
const (
	reasonPause      = "pause"
	reasonBreakpoint = "breakpoint"
	reasonStep       = "step"
	ReasonTool       = "tool"
)

// matchBreakpoint returns the first step breakpoint at position matching step (the
// step's own interrupt first), or nil. Tool breakpoints never match a step boundary.
func matchBreakpoint(s *messages.SessionState, position string, step *messages.PlanStep) *messages.Breakpoint {
	if bp := findBreakpoint(s.GetBreakpoints(), PauseBreakpointID); bp != nil && bp.GetPosition() == position && bp.GetTool() == "" && matchesStep(bp, step) {
		// A user's pause comes first: it has no deadline, so it holds until resumed
		// (the step's own interrupt would resume it when its deadline passed).
		return bp
	}
	if step.GetInterrupt() == position {
		return &messages.Breakpoint{
			Id: StepInterruptPrefix + step.GetId(), Position: position, StepId: step.GetId(),
			TimeoutMs: humanTimeout(step).Milliseconds(), DefaultAction: firstNonEmpty(step.GetDefaultAction(), actionContinue),
		}
	}
	for _, bp := range s.GetBreakpoints() {
		if bp.GetPosition() != position || bp.GetTool() != "" {
			continue
		}
		if matchesStep(bp, step) {
			return bp
		}
	}
	return nil
}

// matchesStep reports whether bp's step filters (type, id) admit step.
func matchesStep(bp *messages.Breakpoint, step *messages.PlanStep) bool {
	return (bp.GetStepType() == "" || bp.GetStepType() == step.GetType()) && (bp.GetStepId() == "" || bp.GetStepId() == step.GetId())
}

// interruptReason says why bp stops the session.
func interruptReason(bp *messages.Breakpoint) string {
	switch {
	case bp.GetId() == PauseBreakpointID:
		return reasonPause
	case bp.GetTool() != "":
		return ReasonTool
	case strings.HasPrefix(bp.GetId(), StepInterruptPrefix):
		return reasonStep
	}
	return reasonBreakpoint
}

func interrupt(b *EventBuilder, bp *messages.Breakpoint, idx uint32, stepID string) {
	it := &messages.InterruptTriggered{
		BreakpointId: bp.GetId(), Reason: interruptReason(bp), Position: bp.GetPosition(), StepId: stepID, StepIndex: idx,
		DefaultAction: bp.GetDefaultAction(),
	}
	if bp.GetTimeoutMs() > 0 {
		it.DeadlineUnixNano = b.at + bp.GetTimeoutMs()*int64(time.Millisecond)
	}
	b.Add(func(e *messages.Event) { e.Payload = &messages.Event_InterruptTriggered{InterruptTriggered: it} })
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
	case bp.GetTool() != "" && bp.GetPosition() != positionBefore:
		return refuse(messages.ErrorReason_INVALID_ARGUMENT, "a tool breakpoint stops before the call runs: its position must be before, not %q", bp.GetPosition())
	case bp.GetTool() != "" && !toolNamePattern.MatchString(bp.GetTool()):
		return refuse(messages.ErrorReason_INVALID_ARGUMENT, "tool %q is not a tool name ([a-zA-Z0-9_-]{1,64})", bp.GetTool())
	case bp.GetId() == PauseBreakpointID && bp.GetTool() != "":
		return refuse(messages.ErrorReason_INVALID_ARGUMENT, "breakpoint id %q is reserved for pause", PauseBreakpointID)
	}
	return nil
}

// toolNamePattern is what a tool name looks like (tools.Registry's rule).
var toolNamePattern = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

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

// DecideSetBreakpoint decides a SetBreakpoint command: one breakpoint_set event.
func DecideSetBreakpoint(s *messages.SessionState, req *messages.SetBreakpointRequest, now time.Time) ([]*messages.Event, error) {
	bp := req.GetBreakpoint()
	if err := validateBreakpoint(bp); err != nil {
		return nil, err
	}
	if err := decideCommand(s, req.GetCommandId()); err != nil {
		return nil, err
	}
	b := NewEvents(s, req.GetCommandId(), now)
	b.Add(func(e *messages.Event) {
		e.Payload = &messages.Event_BreakpointSet{BreakpointSet: &messages.BreakpointSet{Breakpoint: bp}}
	})
	return b.Evs, nil
}

// DecideClearBreakpoints decides a ClearBreakpoints command: one breakpoints_cleared
// event.
func DecideClearBreakpoints(s *messages.SessionState, req *messages.ClearBreakpointsRequest, now time.Time) ([]*messages.Event, error) {
	if err := decideCommand(s, req.GetCommandId()); err != nil {
		return nil, err
	}
	b := NewEvents(s, req.GetCommandId(), now)
	b.Add(func(e *messages.Event) {
		e.Payload = &messages.Event_BreakpointsCleared{BreakpointsCleared: &messages.BreakpointsCleared{}}
	})
	return b.Evs, nil
}

// DecidePause decides a Pause command: a one-shot breakpoint before the next step.
func DecidePause(s *messages.SessionState, req *messages.PauseRequest, now time.Time) ([]*messages.Event, error) {
	return DecideSetBreakpoint(s, &messages.SetBreakpointRequest{CommandId: req.GetCommandId(), Breakpoint: &messages.Breakpoint{
		Id: PauseBreakpointID, Position: positionBefore, Once: true, DefaultAction: actionContinue,
	}}, now)
}

// DecideResume decides a Resume command: the end of the interrupt the session is
// stopped at, with the action and modified step the request gives.
func DecideResume(s *messages.SessionState, req *messages.ResumeRequest, cfg Config, now time.Time) ([]*messages.Event, error) {
	if err := decideCommand(s, req.GetCommandId()); err != nil {
		return nil, err
	}
	it := s.GetInterrupt()
	if it == nil {
		return nil, refuse(messages.ErrorReason_FAILED_PRECONDITION, "session %s is not interrupted (%s)", s.GetSessionId(), s.GetStatus())
	}
	var modified *messages.PlanStep
	if m := req.GetModifiedStep(); m != nil {
		if it.GetReason() == ReasonTool {
			return nil, refuse(messages.ErrorReason_INVALID_ARGUMENT, "modified_step applies to step boundaries; the session is stopped before a %s call inside step %s", toolOf(s, it), it.GetStepId())
		}
		var err error
		if modified, err = mergeModifiedStep(planSteps(s), nextStepIndex(it), m, cfg.Registry()); err != nil {
			return nil, err
		}
	}
	b := newEvents(s, req.GetCommandId(), now, cfg)
	endInterrupt(b, s, cfg, byHuman, actionContinue, modified)
	return b.Evs, nil
}

// mergeModifiedStep returns the step that runs next (steps[next]) with the fields m sets
// laid over it: a field m leaves empty keeps the step's value (its dependencies, and so
// the hand-offs of the steps it depends on, its type, its interrupt settings, its
// sub-agent), so {id, description} changes the description only. m must keep the step's
// id; interrupt "none" clears the step's own interrupt. The merged step is checked like
// a planned one (interrupt, default_action, input_schema; dependencies on steps of the
// plan, without a cycle).
func mergeModifiedStep(steps []*messages.PlanStep, next uint32, m *messages.PlanStep, agents *Agents) (*messages.PlanStep, error) {
	if int(next) >= len(steps) || m.GetId() != steps[next].GetId() {
		return nil, refuse(messages.ErrorReason_INVALID_ARGUMENT, "modified_step must keep the id of the step that runs next")
	}
	out := proto.Clone(steps[next]).(*messages.PlanStep)
	if d := strings.TrimSpace(m.GetDescription()); d != "" {
		out.Description = d
	}
	if t := strings.ToLower(strings.TrimSpace(m.GetType())); t != "" {
		typ, ok := agents.stepType(t)
		if !ok {
			return nil, refuse(messages.ErrorReason_INVALID_ARGUMENT, "modified_step type %q is not a step type (%s)", m.GetType(), strings.Join(agents.StepTypes(), ", "))
		}
		out.Type = typ
	}
	if m.GetInterrupt() != "" {
		out.Interrupt = m.GetInterrupt()
	}
	if m.GetInterruptTimeoutMs() != 0 {
		out.InterruptTimeoutMs = m.GetInterruptTimeoutMs()
	}
	if m.GetDefaultAction() != "" {
		out.DefaultAction = m.GetDefaultAction()
	}
	if m.GetInputSchema() != "" {
		out.InputSchema = m.GetInputSchema()
	}
	if m.GetSubAgentId() != "" {
		out.SubAgentId = m.GetSubAgentId()
	}
	schema := out.GetInputSchema()
	out.InputSchema = ""
	if err := planStepHITL(out, json.RawMessage(schema)); err != nil {
		return nil, refuse(messages.ErrorReason_INVALID_ARGUMENT, "modified_step: %v", err)
	}
	if len(m.GetDependencies()) > 0 {
		out.Dependencies = slices.Clone(m.GetDependencies())
		plan := make([]*messages.PlanStep, len(steps))
		for i, st := range steps {
			plan[i] = proto.Clone(st).(*messages.PlanStep)
		}
		plan[next] = out
		if err := checkDependencies(plan, nil); err != nil {
			return nil, refuse(messages.ErrorReason_INVALID_ARGUMENT, "modified_step: %v", err)
		}
	}
	return out, nil
}

// pauseHolds reports whether a user's pause holds the session's interrupt: Pause was
// requested while the session was already stopped (by a breakpoint, a step's own
// interrupt or a tool breakpoint). The interrupt's deadline is then suspended: only a
// human's Resume (or ClearBreakpoints, which removes the pause) lets the session go on.
func pauseHolds(s *messages.SessionState) bool {
	return s.GetInterrupt() != nil && findBreakpoint(s.GetBreakpoints(), PauseBreakpointID) != nil
}

// InterruptDeadline is when the current interrupt takes its default action (0: never,
// or not while a pause holds it).
func InterruptDeadline(s *messages.SessionState) int64 {
	if pauseHolds(s) {
		return 0
	}
	return s.GetInterrupt().GetDeadlineUnixNano()
}

// DecideInterruptDeadline takes an interrupt's default action once its deadline passed
// (never while a user's pause holds the session).
func DecideInterruptDeadline(s *messages.SessionState, cfg Config, now time.Time) []*messages.Event {
	it := s.GetInterrupt()
	if it == nil || InterruptDeadline(s) == 0 || now.UnixNano() < it.GetDeadlineUnixNano() || Terminal(s) {
		return nil
	}
	b := newEvents(s, "", now, cfg)
	endInterrupt(b, s, cfg, byTimeout, it.GetDefaultAction(), nil)
	return b.Evs
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
// resume is for it) and no re-plan is due, then whatever else the plan allows (advance).
func endInterrupt(b *EventBuilder, s *messages.SessionState, cfg Config, by, action string, modified *messages.PlanStep) {
	it := s.GetInterrupt()
	// A human's resume ends a pause that holds the interrupt too: one resume goes on.
	released := by == byHuman && pauseHolds(s)
	b.Add(func(e *messages.Event) {
		e.Payload = &messages.Event_InterruptResumed{InterruptResumed: &messages.InterruptResumed{
			By: by, Action: action, ModifiedStep: modified, PauseReleased: released,
		}}
	})
	if action == actionFail {
		if it.GetReason() == ReasonTool {
			fail(b, fmt.Sprintf("interrupt before a %s call in step %s timed out; its default action is fail", toolOf(s, it), it.GetStepId()))
			return
		}
		fail(b, fmt.Sprintf("interrupt %s step %s timed out; its default action is fail", it.GetPosition(), it.GetStepId()))
		return
	}
	if it.GetReason() == ReasonTool {
		// The held calls of the turn run now (kick); steps that became ready meanwhile start.
		advance(b, cfg)
		return
	}
	st := b.state()
	next := nextStepIndex(it)
	// While a re-plan is due or in flight nothing starts: the revision decides what runs.
	if _, replanning := replanDue(st); !replanning && int(next) < len(st.GetSteps()) {
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

// matchToolBreakpoint returns the first tool breakpoint matching a call of tool in
// step, or nil.
func matchToolBreakpoint(s *messages.SessionState, step *messages.PlanStep, tool string) *messages.Breakpoint {
	for _, bp := range s.GetBreakpoints() {
		if bp.GetTool() == tool && bp.GetPosition() == positionBefore && matchesStep(bp, step) {
			return bp
		}
	}
	return nil
}

// toolOf names the tool a tool interrupt stopped before.
func toolOf(s *messages.SessionState, it *messages.InterruptTriggered) string {
	if bp := findBreakpoint(s.GetBreakpoints(), it.GetBreakpointId()); bp.GetTool() != "" {
		return bp.GetTool()
	}
	if pt := s.GetPendingTools(); len(pt) > 0 {
		return pt[0].GetTool()
	}
	return "tool"
}
