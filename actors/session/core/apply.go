package core

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"

	"google.golang.org/protobuf/proto"

	"github.com/fathom-agents/fathom/auth"
	"github.com/fathom-agents/fathom/llm"
	"github.com/fathom-agents/fathom/messages"
)

// MaxRememberedCommands bounds SessionState.commands: the ids of the most recent commands
// are kept so a retried command is recognised; older ids are forgotten, oldest first.
const MaxRememberedCommands = 256

// ErrBadEvent means an event does not fit the state it is applied to (wrong session,
// sequence gap, missing payload). Apply never ignores an event: it applies it or fails.
var ErrBadEvent = errors.New("event does not apply")

// NewState returns the empty state of session id (before session_started).
func NewState(id string) *messages.SessionState {
	return &messages.SessionState{SessionId: id, Commands: map[string]uint64{}}
}

// Apply folds ev into s. It is the single definition of how events change a session,
// used by the grain, recovery, time travel and projections alike: deterministic, no I/O,
// no clock. It mutates s in place; on error s is unchanged.
func Apply(s *messages.SessionState, ev *messages.Event) error {
	if ev.GetSessionId() != s.GetSessionId() {
		return fmt.Errorf("%w: event of session %q applied to %q", ErrBadEvent, ev.GetSessionId(), s.GetSessionId())
	}
	if ev.GetSeq() != s.GetSeq()+1 {
		return fmt.Errorf("%w: seq %d after %d", ErrBadEvent, ev.GetSeq(), s.GetSeq())
	}
	prev := s.GetStatus()
	if err := applyPayload(s, ev); err != nil {
		return err
	}
	noteRun(s, prev, ev)
	noteWebhook(s, prev, ev)
	s.Seq = ev.GetSeq()
	s.UpdatedAtUnixNano = ev.GetAtUnixNano()
	if id := ev.GetCommandId(); id != "" {
		audit(s, ev)
		rememberCommand(s, id, ev.GetSeq())
	}
	return nil
}

// noteRun records in s where its current run began (run_started_seq and _at): the
// first run with the start or the fork, a later one with ev when ev makes a session that
// had stopped (waiting for a human, interrupted, ended) work again or end.
func noteRun(s *messages.SessionState, prev messages.SessionStatus, ev *messages.Event) {
	now := s.GetStatus()
	switch {
	case ev.GetSessionForked() != nil || prev == messages.SessionStatus_SESSION_STATUS_UNSPECIFIED && now != prev:
		s.RunStartedSeq, s.RunStartedAtUnixNano = 0, ev.GetAtUnixNano()
	case now == prev || Working(prev):
	case Working(now) || stoppedStatus(now) == "":
		s.RunStartedSeq, s.RunStartedAtUnixNano = ev.GetSeq(), ev.GetAtUnixNano()
	}
}

// Working reports whether a session in status st is working: planning or executing.
func Working(st messages.SessionStatus) bool {
	return st == messages.SessionStatus_SESSION_STATUS_PLANNING || st == messages.SessionStatus_SESSION_STATUS_EXECUTING
}

// stoppedStatus names a status in which a session waits without working
// (awaiting_human, interrupted), or is "".
func stoppedStatus(st messages.SessionStatus) string {
	switch st {
	case messages.SessionStatus_SESSION_STATUS_AWAITING_HUMAN:
		return "awaiting_human"
	case messages.SessionStatus_SESSION_STATUS_INTERRUPTED:
		return "interrupted"
	}
	return ""
}

// MaxAudit bounds SessionState.audit: the newest entries are kept.
const MaxAudit = 1000

// audit records the first event of a command a principal sent (Event.by) in s.audit.
func audit(s *messages.SessionState, ev *messages.Event) {
	if ev.GetBy() == nil {
		return
	}
	if n := len(s.Audit); n > 0 && s.Audit[n-1].GetCommandId() == ev.GetCommandId() {
		return
	}
	if len(s.Audit) >= MaxAudit {
		s.Audit = slices.Delete(s.Audit, 0, len(s.Audit)-MaxAudit+1)
	}
	s.Audit = append(s.Audit, &messages.AuditEntry{Seq: ev.GetSeq(), Event: ev.Type(), CommandId: ev.GetCommandId(),
		By: ev.GetBy(), AtUnixNano: ev.GetAtUnixNano()})
}

func applyPayload(s *messages.SessionState, ev *messages.Event) error {
	switch p := ev.GetPayload().(type) {
	case *messages.Event_SessionStarted:
		if s.Status != messages.SessionStatus_SESSION_STATUS_UNSPECIFIED {
			return fmt.Errorf("%w: session_started on a %s session", ErrBadEvent, s.Status)
		}
		s.Status = messages.SessionStatus_SESSION_STATUS_PLANNING
		s.Goal = p.SessionStarted.GetGoal()
		s.Config = p.SessionStarted.GetConfig()
		s.UserId = p.SessionStarted.GetUserId()
		s.Tenant, s.Owner = p.SessionStarted.GetTenant(), p.SessionStarted.GetOwner()
		if s.Tenant == "" { // started before tenancy
			s.Tenant = auth.DefaultTenant
		}
		s.StartedAtUnixNano = ev.GetAtUnixNano()
	case *messages.Event_PlanCreated:
		s.PlanId = p.PlanCreated.GetPlanId()
		s.Steps = s.Steps[:0]
		for _, st := range p.PlanCreated.GetSteps() {
			s.Steps = append(s.Steps, &messages.StepState{Step: st, Status: messages.StepStatus_STEP_STATUS_PENDING})
		}
		s.CurrentStepIndex = 0
		s.Status = messages.SessionStatus_SESSION_STATUS_EXECUTING
		s.PlanSeq = ev.GetSeq()
	case *messages.Event_PlanRevised:
		return applyPlanRevised(s, p.PlanRevised)
	case *messages.Event_StepStarted:
		st, err := stepAt(s, p.StepStarted.GetStepIndex(), p.StepStarted.GetStepId())
		if err != nil {
			return err
		}
		st.Status = messages.StepStatus_STEP_STATUS_IN_PROGRESS
		st.Attempt = max(p.StepStarted.GetAttempt(), 1)
		st.Error = ""
		st.Transcript = nil
		st.StartedSeq, st.StartedAtUnixNano = ev.GetSeq(), ev.GetAtUnixNano()
		st.OpeningTokens = p.StepStarted.GetOpeningTokens()
		st.EndedSeq, st.EndedAtUnixNano = 0, 0
		if !delegated(st.GetStep()) {
			// current_step_index is the orchestrator's own step; sub-agent steps run beside it.
			s.CurrentStepIndex = p.StepStarted.GetStepIndex()
			s.RetryAtUnixNano = 0
		}
	case *messages.Event_LlmRequested:
		r := p.LlmRequested
		if r.GetSubAgentId() != "" {
			if err := applySubAgentRequested(s, r, ev); err != nil {
				return err
			}
			s.LlmCalls++
			return nil
		}
		if len(s.PendingTools) > 0 {
			return fmt.Errorf("%w: llm_requested %q while %d tool calls are pending", ErrBadEvent, r.GetCallId(), len(s.PendingTools))
		}
		s.Pending = &messages.PendingCall{CallId: r.GetCallId(), StepId: r.GetStepId(), Purpose: r.GetPurpose(), RequestedSeq: ev.GetSeq(),
			RepromptError: r.GetRepromptError(), RepromptAnswer: r.GetRepromptAnswer()}
		s.Iterations = r.GetIteration()
		s.LlmCalls++
		s.RetryAtUnixNano = 0
		switch {
		case planningPurpose(r.GetPurpose()):
			s.PlanAttempt++
		case r.GetPurpose() == PurposeReplan:
			s.ReplanCalls++
			s.ReplanAttempt++
		default:
			if st := currentStep(s, r.GetStepId()); st != nil {
				st.LlmCalls++
			}
		}
	case *messages.Event_LlmResponded:
		r := p.LlmResponded
		if r.GetSubAgentId() != "" {
			return applySubAgentResponded(s, r, ev)
		}
		if s.Pending.GetCallId() != r.GetCallId() {
			return fmt.Errorf("%w: llm_responded for %q while %q is pending", ErrBadEvent, r.GetCallId(), s.Pending.GetCallId())
		}
		if s.Pending.GetPurpose() == PurposeStep {
			if st := currentStep(s, r.GetStepId()); st != nil {
				st.Transcript = append(st.Transcript, &messages.TranscriptEntry{
					Role: "assistant", Content: r.GetContent(), ToolCalls: r.GetToolCalls(), Seq: ev.GetSeq(), Tokens: r.GetTokens(),
					Thinking: r.GetThinking(),
				})
			}
		}
		s.Pending = nil
		s.Usage = addUsage(s.Usage, r.GetUsage())
		s.CostUsd += r.GetCostUsd()
	case *messages.Event_ToolCalled:
		c := p.ToolCalled
		if c.GetSubAgentId() != "" {
			return applySubAgentToolCalled(s, c)
		}
		st := currentStep(s, c.GetStepId())
		if st == nil {
			return fmt.Errorf("%w: tool_called for step %q, which is not running", ErrBadEvent, c.GetStepId())
		}
		st.ToolCalls = max(st.ToolCalls, c.GetIndex())
		s.PendingTools = append(s.PendingTools, &messages.PendingTool{
			StepId: c.GetStepId(), CallId: c.GetCallId(), Tool: c.GetTool(), Args: c.GetArgs(), IdempotencyKey: c.GetIdempotencyKey(),
		})
	case *messages.Event_ToolResult:
		r := p.ToolResult
		if r.GetSubAgentId() != "" {
			return applySubAgentToolResult(s, r, ev)
		}
		i := pendingTool(s, r.GetIdempotencyKey())
		if i < 0 {
			return fmt.Errorf("%w: tool_result for %q, which is not pending", ErrBadEvent, r.GetIdempotencyKey())
		}
		s.PendingTools = append(s.PendingTools[:i], s.PendingTools[i+1:]...)
		if st := currentStep(s, r.GetStepId()); st != nil {
			content := r.GetResult()
			if r.GetError() != nil {
				content = r.GetError().GetLlmText()
			}
			st.Transcript = append(st.Transcript, &messages.TranscriptEntry{
				Role: "tool", Content: content, ToolCallId: r.GetCallId(), Seq: ev.GetSeq(), Tokens: r.GetTokens(),
			})
		}
	case *messages.Event_StepCompleted:
		st, err := stepAt(s, p.StepCompleted.GetStepIndex(), p.StepCompleted.GetStepId())
		if err != nil {
			return err
		}
		st.Status = messages.StepStatus_STEP_STATUS_COMPLETED
		st.Output = p.StepCompleted.GetOutput()
		st.EndedSeq, st.EndedAtUnixNano = ev.GetSeq(), ev.GetAtUnixNano()
		if n := p.StepCompleted.GetOutputTokens(); n > 0 {
			// The output enters the orchestrator's history as a message of its own: a
			// human's answer (user) or a sub-agent's hand-off (assistant).
			role := "assistant"
			if st.GetStep().GetType() == StepTypeHumanInput {
				role = "user"
			}
			st.Transcript = append(st.Transcript, &messages.TranscriptEntry{Role: role, Content: st.Output, Seq: ev.GetSeq(), Tokens: n})
		}
	case *messages.Event_StepFailed:
		st, err := stepAt(s, p.StepFailed.GetStepIndex(), p.StepFailed.GetStepId())
		if err != nil {
			return err
		}
		st.Status = messages.StepStatus_STEP_STATUS_FAILED
		st.Error = p.StepFailed.GetError()
		st.EndedSeq, st.EndedAtUnixNano = ev.GetSeq(), ev.GetAtUnixNano()
		if !delegated(st.GetStep()) {
			s.Pending, s.PendingTools = nil, nil
			s.RetryAtUnixNano = p.StepFailed.GetRetryAtUnixNano()
		}
	case *messages.Event_PlanFailed:
		s.Pending = nil
		s.RetryAtUnixNano = p.PlanFailed.GetRetryAtUnixNano()
	case *messages.Event_BreakpointSet:
		bp := p.BreakpointSet.GetBreakpoint()
		if bp.GetId() == "" {
			return fmt.Errorf("%w: breakpoint_set without an id", ErrBadEvent)
		}
		s.Breakpoints = removeBreakpoint(s.Breakpoints, bp.GetId())
		s.Breakpoints = append(s.Breakpoints, bp)
	case *messages.Event_BreakpointsCleared:
		s.Breakpoints = nil
	case *messages.Event_InterruptTriggered:
		if s.Interrupt != nil {
			return fmt.Errorf("%w: interrupt_triggered while interrupted", ErrBadEvent)
		}
		it := p.InterruptTriggered
		if bp := findBreakpoint(s.Breakpoints, it.GetBreakpointId()); bp != nil && bp.GetOnce() {
			s.Breakpoints = removeBreakpoint(s.Breakpoints, bp.GetId())
		}
		s.Interrupt = it
		s.Status = waitStatus(s)
	case *messages.Event_InterruptResumed:
		if s.Interrupt == nil {
			return fmt.Errorf("%w: interrupt_resumed while not interrupted", ErrBadEvent)
		}
		if m := p.InterruptResumed.GetModifiedStep(); m != nil {
			idx := s.Interrupt.GetStepIndex()
			if s.Interrupt.GetPosition() == positionAfter {
				idx++
			}
			st, err := stepAt(s, idx, m.GetId())
			if err != nil {
				return err
			}
			st.Step = m
		}
		if p.InterruptResumed.GetPauseReleased() {
			s.Breakpoints = removeBreakpoint(s.Breakpoints, PauseBreakpointID)
		}
		s.Interrupt = nil
		s.Status = waitStatus(s)
	case *messages.Event_HitlRequested:
		r := p.HitlRequested
		if r.GetRequestId() == "" || awaitingIndex(s, r.GetRequestId()) >= 0 {
			return fmt.Errorf("%w: hitl_requested %q is empty or already open", ErrBadEvent, r.GetRequestId())
		}
		s.Awaiting = append(s.Awaiting, r)
		s.Status = waitStatus(s)
	case *messages.Event_HitlReceived:
		i := awaitingIndex(s, p.HitlReceived.GetRequestId())
		if i < 0 {
			return fmt.Errorf("%w: hitl_received for %q, which is not open", ErrBadEvent, p.HitlReceived.GetRequestId())
		}
		if p.HitlReceived.GetDecision() == DecisionEdit {
			if err := applyApprovalEdit(s, p.HitlReceived.GetRequestId(), p.HitlReceived.GetArgs()); err != nil {
				return err
			}
		}
		s.Awaiting = slices.Delete(s.Awaiting, i, i+1)
		s.Status = waitStatus(s)
	case *messages.Event_SessionForked:
		if s.ForkedFrom != nil {
			return fmt.Errorf("%w: session_forked on a fork", ErrBadEvent)
		}
		s.ForkedFrom = p.SessionForked
		if m := p.SessionForked.GetModifiedStep(); m != nil {
			i := slices.IndexFunc(s.Steps, func(st *messages.StepState) bool { return st.GetStep().GetId() == m.GetId() })
			if i < 0 {
				return fmt.Errorf("%w: session_forked modifies step %q, which the plan does not have", ErrBadEvent, m.GetId())
			}
			ownStep(s, i).Step = m
		}
		if t := p.SessionForked.GetTenant(); t != "" {
			s.Tenant, s.Owner = t, p.SessionForked.GetOwner()
		}
	case *messages.Event_SessionCompleted:
		s.Status = messages.SessionStatus_SESSION_STATUS_COMPLETED
		s.Result = p.SessionCompleted.GetResult()
		s.Pending, s.PendingTools, s.RetryAtUnixNano = nil, nil, 0
		stopSubAgents(s)
	case *messages.Event_SessionFailed:
		s.Status = messages.SessionStatus_SESSION_STATUS_FAILED
		s.Error = p.SessionFailed.GetError()
		s.Pending, s.PendingTools, s.RetryAtUnixNano, s.Awaiting = nil, nil, 0, nil
		stopSubAgents(s)
	case *messages.Event_SessionCancelled:
		s.Status = messages.SessionStatus_SESSION_STATUS_CANCELLED
		s.Error = "cancelled"
		if r := p.SessionCancelled.GetReason(); r != "" {
			s.Error = "cancelled: " + r
		}
		s.Pending, s.PendingTools, s.RetryAtUnixNano, s.Awaiting, s.Interrupt = nil, nil, 0, nil, nil
		stopSubAgents(s)
	case *messages.Event_SummaryUpdated:
		u := p.SummaryUpdated
		if u.GetCoveredThroughSeq() >= ev.GetSeq() {
			return fmt.Errorf("%w: summary_updated at seq %d covers seq %d", ErrBadEvent, ev.GetSeq(), u.GetCoveredThroughSeq())
		}
		s.Summary = u
	case *messages.Event_ArtifactWritten:
		applyArtifact(s, p.ArtifactWritten)
		applySubAgentArtifact(s, p.ArtifactWritten)
	case *messages.Event_MemorySaved:
		applyMemorySaved(s, p.MemorySaved)
	case *messages.Event_MemoryDeleted:
		applyMemoryDeleted(s, p.MemoryDeleted)
	case *messages.Event_SubagentStarted:
		return applySubAgentStarted(s, p.SubagentStarted, ev)
	case *messages.Event_MessageReceived:
		return applyMessageReceived(s, p.MessageReceived, ev)
	case *messages.Event_MessageQueued:
		return applyMessageQueued(s, p.MessageQueued)
	case *messages.Event_WebhookDelivered:
		applyWebhookDelivered(s, p.WebhookDelivered)
	case *messages.Event_WebhookFailed:
		applyWebhookFailed(s, p.WebhookFailed)
	case *messages.Event_PushConfigSet:
		applyPushConfigSet(s, p.PushConfigSet, ev)
	case *messages.Event_PushConfigDeleted:
		applyPushConfigDeleted(s, p.PushConfigDeleted)
	case *messages.Event_SubagentCompleted:
		sa, err := subAgentOf(s, p.SubagentCompleted.GetSubAgentId(), "subagent_completed")
		if err != nil {
			return err
		}
		sa.Running, sa.Pending, sa.PendingTools = false, nil, nil
		sa.Result = p.SubagentCompleted.GetResult()
		if p.SubagentCompleted.GetAction() == ActionReplan {
			s.Replans++
		}
	case nil:
		return fmt.Errorf("%w: seq %d has no payload", ErrBadEvent, ev.GetSeq())
	default:
		return fmt.Errorf("%w: unknown payload %T", ErrBadEvent, p)
	}
	return nil
}

// applyPlanRevised drops the steps a revision replaces (each must be failed or still
// pending), keeps the others in their order, appends the new steps, and moves every
// index that named a kept step (the orchestrator's current step, the sub-agents' steps,
// the interrupt's step) to its place in the revised list.
func applyPlanRevised(s *messages.SessionState, r *messages.PlanRevised) error {
	replaced := make(map[string]bool, len(r.GetReplacedStepIds()))
	for _, id := range r.GetReplacedStepIds() {
		i, ok := StepIndexByID(s, id)
		if !ok {
			return fmt.Errorf("%w: plan_revised replaces step %q, which is not in the plan", ErrBadEvent, id)
		}
		if st := s.Steps[i].GetStatus(); st != messages.StepStatus_STEP_STATUS_FAILED && st != messages.StepStatus_STEP_STATUS_PENDING {
			return fmt.Errorf("%w: plan_revised replaces step %q, which is %s", ErrBadEvent, id, st)
		}
		replaced[id] = true
	}
	if !replaced[r.GetFailedStepId()] {
		return fmt.Errorf("%w: plan_revised does not replace its failed step %q", ErrBadEvent, r.GetFailedStepId())
	}
	var oldCurrent string
	if i := int(s.CurrentStepIndex); i < len(s.Steps) {
		oldCurrent = s.Steps[i].GetStep().GetId()
	}
	steps := make([]*messages.StepState, 0, len(s.Steps)-len(replaced)+len(r.GetSteps()))
	kept := make(map[string]bool, len(s.Steps))
	var retired []string
	for _, st := range s.Steps {
		if id := st.GetStep().GetId(); replaced[id] {
			if st.GetStartedSeq() != 0 {
				retired = append(retired, id)
			}
			continue
		}
		steps = append(steps, st)
		kept[st.GetStep().GetId()] = true
	}
	added := make(map[string]bool, len(r.GetSteps()))
	for _, step := range r.GetSteps() {
		id := step.GetId()
		if id == "" || kept[id] || added[id] || slices.Contains(s.RetiredStepIds, id) || slices.Contains(retired, id) {
			return fmt.Errorf("%w: plan_revised adds step %q, whose id is empty or taken", ErrBadEvent, id)
		}
		added[id] = true
		steps = append(steps, &messages.StepState{Step: step, Status: messages.StepStatus_STEP_STATUS_PENDING})
	}
	s.Steps = steps
	s.RetiredStepIds = append(s.RetiredStepIds, retired...)
	s.PlanId, s.PlanRevision, s.ReplanAttempt = r.GetPlanId(), r.GetRevision(), 0
	// Indexes name places in the step list: those of kept steps move with them.
	s.CurrentStepIndex = 0
	if i, ok := StepIndexByID(s, oldCurrent); ok && kept[oldCurrent] {
		s.CurrentStepIndex = i
	}
	for id, sa := range s.SubAgents {
		if i, ok := StepIndexByID(s, sa.GetStepId()); ok && kept[sa.GetStepId()] && i != sa.GetStepIndex() {
			ownSubAgent(s, id).StepIndex = i
		}
	}
	if it := s.Interrupt; it != nil {
		if i, ok := StepIndexByID(s, it.GetStepId()); ok && kept[it.GetStepId()] && i != it.GetStepIndex() {
			// The interrupt is the applied event's payload: change a copy.
			it = proto.Clone(it).(*messages.InterruptTriggered)
			it.StepIndex = i
			s.Interrupt = it
		}
	}
	return nil
}

func stepAt(s *messages.SessionState, idx uint32, id string) (*messages.StepState, error) {
	if int(idx) >= len(s.Steps) {
		return nil, fmt.Errorf("%w: step index %d out of range (plan has %d steps)", ErrBadEvent, idx, len(s.Steps))
	}
	if st := s.Steps[idx]; st.GetStep().GetId() != id {
		return nil, fmt.Errorf("%w: step %d is %q, not %q", ErrBadEvent, idx, st.GetStep().GetId(), id)
	}
	return ownStep(s, int(idx)), nil
}

// ownStep replaces step idx of s by a copy and returns the copy. A state shares its
// steps with the state it was cloned from (CloneState copies only the list), so Apply
// changes a step only in a copy of its own, and the states runners hold stay as they were.
func ownStep(s *messages.SessionState, idx int) *messages.StepState {
	st := cloneStep(s.Steps[idx])
	s.Steps[idx] = st
	return st
}

// currentStep is the orchestrator's running step if its id is id, else nil.
func currentStep(s *messages.SessionState, id string) *messages.StepState {
	idx := int(s.GetCurrentStepIndex())
	if idx >= len(s.Steps) || s.Steps[idx].GetStep().GetId() != id {
		return nil
	}
	return ownStep(s, idx)
}

func pendingTool(s *messages.SessionState, key string) int {
	for i, c := range s.PendingTools {
		if c.GetIdempotencyKey() == key {
			return i
		}
	}
	return -1
}

func addUsage(a, b *messages.Usage) *messages.Usage {
	if b == nil {
		return a
	}
	return &messages.Usage{
		InputTokens:           a.GetInputTokens() + b.GetInputTokens(),
		OutputTokens:          a.GetOutputTokens() + b.GetOutputTokens(),
		TotalTokens:           a.GetTotalTokens() + b.GetTotalTokens(),
		CachedInputTokens:     a.GetCachedInputTokens() + b.GetCachedInputTokens(),
		CacheWriteInputTokens: a.GetCacheWriteInputTokens() + b.GetCacheWriteInputTokens(),
		ReasoningTokens:       a.GetReasoningTokens() + b.GetReasoningTokens(),
	}
}

// UsageOf is a recorded usage as the price table reads it (llm.PriceTable.CostOf): cached
// and cache-written input tokens are priced at their own rates.
func UsageOf(u *messages.Usage) llm.Usage {
	n := func(v uint64) int64 { return int64(min(v, math.MaxInt64)) }
	return llm.Usage{InputTokens: n(u.GetInputTokens()), OutputTokens: n(u.GetOutputTokens()), TotalTokens: n(u.GetTotalTokens()),
		CachedInputTokens: n(u.GetCachedInputTokens()), CacheWriteInputTokens: n(u.GetCacheWriteInputTokens()), ReasoningTokens: n(u.GetReasoningTokens())}
}

// rememberCommand records that command id produced the event at seq. The map is
// replaced, never written in place: CloneState shares it between the states.
func rememberCommand(s *messages.SessionState, id string, seq uint64) {
	m := make(map[string]uint64, min(len(s.Commands)+1, MaxRememberedCommands+1))
	maps.Copy(m, s.Commands)
	// The newest seq wins: a command's entry points at the last event it produced.
	m[id] = seq
	for len(m) > MaxRememberedCommands {
		evictOldestCommand(m)
	}
	s.Commands = m
}

// evictOldestCommand removes the id with the lowest seq (ties broken by id, so replay is
// deterministic).
func evictOldestCommand(m map[string]uint64) {
	ids := make([]string, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool {
		if m[ids[i]] != m[ids[j]] {
			return m[ids[i]] < m[ids[j]]
		}
		return ids[i] < ids[j]
	})
	delete(m, ids[0])
}

// waitStatus is the status of a running session: stopped at an interrupt, else waiting
// for a human while a request is open, else executing.
func waitStatus(s *messages.SessionState) messages.SessionStatus {
	switch {
	case s.Interrupt != nil:
		return messages.SessionStatus_SESSION_STATUS_INTERRUPTED
	case len(s.Awaiting) > 0:
		return messages.SessionStatus_SESSION_STATUS_AWAITING_HUMAN
	}
	return messages.SessionStatus_SESSION_STATUS_EXECUTING
}

func awaitingIndex(s *messages.SessionState, requestID string) int {
	return slices.IndexFunc(s.Awaiting, func(r *messages.HitlRequested) bool { return r.GetRequestId() == requestID })
}

// Terminal reports whether the session has finished (completed, failed or cancelled).
func Terminal(s *messages.SessionState) bool {
	return s.GetStatus() == messages.SessionStatus_SESSION_STATUS_COMPLETED ||
		s.GetStatus() == messages.SessionStatus_SESSION_STATUS_FAILED ||
		s.GetStatus() == messages.SessionStatus_SESSION_STATUS_CANCELLED
}

func findBreakpoint(bps []*messages.Breakpoint, id string) *messages.Breakpoint {
	for _, bp := range bps {
		if bp.GetId() == id {
			return bp
		}
	}
	return nil
}

func removeBreakpoint(bps []*messages.Breakpoint, id string) []*messages.Breakpoint {
	out := bps[:0:0]
	for _, bp := range bps {
		if bp.GetId() != id {
			out = append(out, bp)
		}
	}
	return out
}

// applyArtifact upserts a by path: the projection keeps the newest record of each path,
// in the order paths were first written.
func applyArtifact(s *messages.SessionState, a *messages.ArtifactWritten) {
	for i, old := range s.Artifacts {
		if old.GetPath() == a.GetPath() {
			s.Artifacts[i] = a
			return
		}
	}
	s.Artifacts = append(s.Artifacts, a)
}
