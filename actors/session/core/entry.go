package core

import (
	"fmt"
	"time"

	"github.com/fathom-agents/fathom/messages"
	"github.com/fathom-agents/fathom/webhooks"
)

// The decision entry. A shell (the session grain) hands every input to Decide and commits
// what it returns; it asks the state what is due (DueOf) and whether the session ended
// (Terminal). The Decide* functions stay for the tests that drive one decision.

// Inputs of Decide besides the grain's requests (*messages.StartRequest,
// *messages.CancelRequest, *messages.PauseRequest, *messages.ResumeRequest,
// *messages.SetBreakpointRequest, *messages.ClearBreakpointsRequest,
// *messages.ProvideInputRequest, *messages.SendRequest, *messages.SetPushConfigRequest)
// and the calls' results
// (*LLMResult, *ToolResult).
type (
	// ForkInput is a fork request with the source's events through the fork point.
	ForkInput struct {
		Req    *messages.ForkRequest
		Source []*messages.Event
	}
	// RetryDue tells that the retry time of a failed plan or step passed.
	RetryDue struct{}
	// InterruptDue tells that the current interrupt's deadline passed.
	InterruptDue struct{}
	// HumanDue tells that a human-input request's deadline passed.
	HumanDue struct{}
	// QueuedDue asks a completed session to open the turn of its oldest queued message.
	QueuedDue struct{}
	// SummaryDone is a regenerated rolling summary of the history through seq Through.
	SummaryDone struct {
		Content string
		Through uint64
		Tokens  int
	}
	// WebhookDone is the outcome of attempt Attempt of webhook notification ID, judged
	// with the sender's Config.
	WebhookDone struct {
		ID      string
		Attempt uint32
		Outcome webhooks.Outcome
		Config  webhooks.Config
	}
)

// Decide is the session's one decision: the events input in leads to from state s, and
// the state they reach (never s itself: s is not modified), or a command's refusal (a
// *CommandError). No events (nil, nil, nil) means nothing to record. A command's events
// are stamped with its caller (Event.by, the audit trail). An event that does not apply
// to s is a decision bug, returned as an error before anything is recorded.
func Decide(s *messages.SessionState, in any, c Config, now time.Time) ([]*messages.Event, *messages.SessionState, error) {
	var (
		evs  []*messages.Event
		next *messages.SessionState
		err  error
		by   interface {
			GetCommandId() string
			GetCaller() *messages.Principal
		}
	)
	switch m := in.(type) {
	case *messages.StartRequest:
		by = m
		evs, err = DecideStart(s, m, c, now)
	case ForkInput:
		by = m.Req
		evs, err = DecideFork(s, m.Req, m.Source, c, now)
	case *messages.CancelRequest:
		by = m
		evs, err = DecideCancel(s, m, now)
	case *messages.PauseRequest:
		by = m
		evs, err = DecidePause(s, m, now)
	case *messages.ResumeRequest:
		by = m
		evs, err = DecideResume(s, m, c, now)
	case *messages.SetBreakpointRequest:
		by = m
		evs, err = DecideSetBreakpoint(s, m, now)
	case *messages.ClearBreakpointsRequest:
		by = m
		evs, err = DecideClearBreakpoints(s, m, now)
	case *messages.ProvideInputRequest:
		by = m
		evs, err = DecideProvideInput(s, m, c, now)
	case *messages.SendRequest:
		by = m
		evs, err = DecideSend(s, m, c, now)
	case *messages.SetPushConfigRequest:
		by = m
		evs, err = DecideSetPushConfig(s, m, c, now)
	case *LLMResult:
		evs, next = DecideLLMResultState(s, m, c, now)
	case *ToolResult:
		evs = DecideToolResult(s, m, c, now)
	case RetryDue:
		evs = DecideRetry(s, c, now)
	case InterruptDue:
		evs = DecideInterruptDeadline(s, c, now)
	case HumanDue:
		evs = DecideHitlDeadline(s, c, now)
	case QueuedDue:
		evs, err = DecideQueued(s, c, now)
	case SummaryDone:
		evs = decideSummary(s, m, now)
	case WebhookDone:
		evs = DecideWebhookOutcome(s, m.ID, m.Attempt, m.Outcome, m.Config, now)
	default:
		return nil, nil, fmt.Errorf("no decision on a %T", in)
	}
	if err != nil || len(evs) == 0 {
		return nil, nil, err
	}
	if by != nil {
		stampBy(evs, by.GetCommandId(), by.GetCaller())
	}
	if next == nil {
		next = CloneState(s)
		for _, ev := range evs {
			if err := Apply(next, ev); err != nil {
				return nil, nil, fmt.Errorf("decided an event that does not apply: %w", err)
			}
		}
	}
	return evs, next, nil
}

// stampBy records caller on the events of command cmdID: the audit trail (Event.by).
func stampBy(evs []*messages.Event, cmdID string, caller *messages.Principal) {
	if caller == nil {
		return
	}
	for _, ev := range evs {
		if ev.GetCommandId() == cmdID && ev.By == nil {
			ev.By = caller
		}
	}
}

// decideSummary records a summary newer than s's current one as summary_updated.
func decideSummary(s *messages.SessionState, r SummaryDone, now time.Time) []*messages.Event {
	if Terminal(s) || r.Through <= s.GetSummary().GetCoveredThroughSeq() || r.Through > s.GetSeq() {
		return nil
	}
	b := NewEvents(s, "", now)
	b.Add(func(e *messages.Event) {
		e.Payload = &messages.Event_SummaryUpdated{SummaryUpdated: &messages.SummaryUpdated{
			Content: r.Content, CoveredThroughSeq: r.Through, Tokens: uint32(max(r.Tokens, 0)),
		}}
	})
	return b.Evs
}

// Due is what a session's state has due that its shell waits for: a timer's time (unix
// nanos, 0: none) or a sub-agent's work.
type Due struct {
	// RetryAt is when a retryably failed plan or step runs again (none once the session
	// ended).
	RetryAt int64
	// InterruptAt is the current interrupt's deadline.
	InterruptAt int64
	// HumanAt is the earliest deadline of an open human-input request.
	HumanAt int64
	// SubAgents is set while a sub-agent runs (core.SubAgentsBusy).
	SubAgents bool
}

// DueOf is what s has due.
func DueOf(s *messages.SessionState) Due {
	d := Due{InterruptAt: InterruptDeadline(s), HumanAt: NextHumanDeadline(s), SubAgents: SubAgentsBusy(s)}
	if !Terminal(s) {
		d.RetryAt = s.GetRetryAtUnixNano()
	}
	return d
}

// Waiting reports whether anything is due.
func (d Due) Waiting() bool {
	return d.RetryAt != 0 || d.InterruptAt != 0 || d.HumanAt != 0 || d.SubAgents
}
