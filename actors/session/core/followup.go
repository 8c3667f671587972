package core

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/fathom-agents/fathom/llm"
	"github.com/fathom-agents/fathom/messages"
	"github.com/fathom-agents/fathom/prompts"
)

// Follow-up messages: a session as a thread. A completed session takes a new user message
// (Send): message_received opens the session's next turn. Apply moves the finished turn's
// history (step openings, transcripts, hand-offs) and its result into the state's thread,
// followed by the message, and clears the plan; the orchestrator is then asked with the
// whole history under the memory budget and the message last (llm_requested, purpose
// "message"). Its answer is either a plan (one JSON object {"steps":[...]}, as for the
// goal): the new steps run as usual, and the turn ends like the first one; or anything
// else: the direct answer, recorded as the turn's result in session_completed.
//
// Budgets: the session budgets (max_llm_calls, max_cost_usd, max_tokens) count the whole
// session across turns (a send is refused once they are spent); max_iterations counts
// the orchestrator's calls of one turn (each turn starts from zero); max_steps bounds
// each turn's plan. The steps of turn n > 1 get ids prefixed "t{n}-" (and call ids
// "turn-{n}/..."), so their idempotency keys never meet an earlier turn's.

// PurposeMessage is the orchestrator's call that answers a follow-up message.
const PurposeMessage = "message"

// Turn is the session's turn: 1 until the first follow-up message, then one more per
// message.
func Turn(s *messages.SessionState) uint32 { return max(s.GetTurn(), 1) }

// turnCallID is the call id id of the session's current turn: id itself in turn 1,
// "turn-{n}/id" after.
func turnCallID(s *messages.SessionState, id string) string {
	if n := Turn(s); n > 1 {
		return fmt.Sprintf("turn-%d/%s", n, id)
	}
	return id
}

// planningCall is the call id and purpose of the n-th planning call of the current
// turn: the plan of the goal in turn 1, the answer to the follow-up message after.
func planningCall(s *messages.SessionState, n uint32) (string, string) {
	if Turn(s) > 1 {
		return turnCallID(s, planCallID(n)), PurposeMessage
	}
	return planCallID(n), PurposePlan
}

// planningPurpose reports whether purpose is a turn's planning call.
func planningPurpose(purpose string) bool { return purpose == PurposePlan || purpose == PurposeMessage }

// DecideSend validates a follow-up message and returns its events: message_received and
// the orchestrator's call. Only a completed session takes a message.
func DecideSend(s *messages.SessionState, req *messages.SendRequest, cfg Config, now time.Time) ([]*messages.Event, error) {
	if err := validateCommandID(req.GetCommandId()); err != nil {
		return nil, err
	}
	if err := validOnBusy(req.GetOnBusy()); err != nil {
		return nil, err
	}
	content := strings.TrimSpace(req.GetContent())
	switch {
	case content == "":
		return nil, refuse(messages.ErrorReason_INVALID_ARGUMENT, "content is empty: a follow-up needs a message")
	case len(content) > MaxGoalBytes:
		return nil, refuse(messages.ErrorReason_INVALID_ARGUMENT, "content is %d bytes, the limit is %d", len(content), MaxGoalBytes)
	case !utf8.ValidString(content):
		return nil, refuse(messages.ErrorReason_INVALID_ARGUMENT, "content is not valid UTF-8")
	}
	switch st := s.GetStatus(); st {
	case messages.SessionStatus_SESSION_STATUS_UNSPECIFIED:
		return nil, refuse(messages.ErrorReason_NOT_FOUND, "session %q not found", s.GetSessionId())
	case messages.SessionStatus_SESSION_STATUS_COMPLETED:
	case messages.SessionStatus_SESSION_STATUS_FAILED, messages.SessionStatus_SESSION_STATUS_CANCELLED:
		return nil, refuse(messages.ErrorReason_FAILED_PRECONDITION, "session %s has ended (%s): only a completed session takes a follow-up message", s.GetSessionId(), st)
	default:
		return decideBusySend(s, req, content, now) // double texting (onbusy.go)
	}
	b := newEvents(s, req.GetCommandId(), now, cfg)
	if reason := budgetReason(b); reason != "" {
		return nil, refuse(messages.ErrorReason_FAILED_PRECONDITION, "session %s cannot take a follow-up: %s", s.GetSessionId(), reason)
	}
	model := s.GetConfig().GetModel()
	turn := Turn(s) + 1
	b.Add(func(e *messages.Event) {
		e.Payload = &messages.Event_MessageReceived{MessageReceived: &messages.MessageReceived{
			Content: content, Turn: turn,
			Tokens:       cfg.CountMessage(model, llm.Message{Role: "user", Content: content}),
			ResultTokens: cfg.CountMessage(model, llm.Message{Role: "assistant", Content: s.GetResult()}),
		}}
	})
	b.Add(func(e *messages.Event) {
		e.Payload = &messages.Event_LlmRequested{LlmRequested: &messages.LlmRequested{
			CallId: fmt.Sprintf("turn-%d/%s", turn, planCallID(1)), Purpose: PurposeMessage, Model: model, Iteration: 1,
		}}
	})
	return b.Evs, nil
}

// applyMessageReceived opens the next turn of a completed session (see the top of this
// file).
func applyMessageReceived(s *messages.SessionState, m *messages.MessageReceived, ev *messages.Event) error {
	if s.Status != messages.SessionStatus_SESSION_STATUS_COMPLETED {
		return fmt.Errorf("%w: message_received on a %s session", ErrBadEvent, s.Status)
	}
	if m.GetTurn() != Turn(s)+1 {
		return fmt.Errorf("%w: message_received opens turn %d after turn %d", ErrBadEvent, m.GetTurn(), Turn(s))
	}
	thread := append(s.Thread, turnEntries(s)...)
	if s.Result != "" {
		thread = append(thread, &messages.TranscriptEntry{Role: "assistant", Content: s.Result, Seq: s.Seq, Tokens: m.GetResultTokens()})
	}
	s.Thread = append(thread, &messages.TranscriptEntry{Role: "user", Content: m.GetContent(), Seq: ev.GetSeq(), Tokens: m.GetTokens()})
	if m.GetFromQueue() {
		if len(s.QueuedMessages) == 0 {
			return fmt.Errorf("%w: message_received from an empty queue", ErrBadEvent)
		}
		s.QueuedMessages = s.QueuedMessages[1:]
	}
	s.Turn = m.GetTurn()
	s.Status = messages.SessionStatus_SESSION_STATUS_PLANNING
	s.Steps, s.CurrentStepIndex, s.PlanId, s.PlanRevision, s.PlanSeq = nil, 0, "", 0, 0
	s.PlanAttempt, s.ReplanAttempt, s.Iterations = 0, 0, 0
	s.Result, s.Error = "", ""
	s.Pending, s.PendingTools, s.RetryAtUnixNano, s.Awaiting, s.Interrupt = nil, nil, 0, nil, nil
	return nil
}

// turnEntries are the current turn's history messages (stepHistory) as transcript
// entries, for the thread.
func turnEntries(s *messages.SessionState) []*messages.TranscriptEntry {
	var out []*messages.TranscriptEntry
	for _, m := range stepHistory(s) {
		e := &messages.TranscriptEntry{Role: m.Role, Content: m.Content, ToolCallId: m.ToolCallID, Seq: m.Seq, Tokens: uint32(max(m.Tokens, 0))}
		for _, c := range m.ToolCalls {
			e.ToolCalls = append(e.ToolCalls, &messages.ToolCallRequest{Id: c.ID, Name: c.Name, Arguments: c.Arguments})
		}
		out = append(out, e)
	}
	return out
}

// decideFollowUpAnswer decides the orchestrator's answer to a follow-up message: a plan
// starts the turn's steps; an answer with no plan in it completes the turn with it; a
// plan that cannot be used is asked again once, as for the first plan.
func decideFollowUpAnswer(b *EventBuilder, s *messages.SessionState, p *messages.PendingCall, content string, cfg Config) {
	if !strings.Contains(content, `"steps"`) {
		completeWith(b, b.state(), content)
		return
	}
	steps, err := parsePlan(content, s.GetConfig().GetMaxSteps())
	if err != nil {
		unusablePlan(b, s, p, content, "planner", err)
		return
	}
	prefix := fmt.Sprintf("t%d-", Turn(s))
	for _, st := range steps {
		st.Id = prefix + st.GetId()
		for i, d := range st.GetDependencies() {
			st.Dependencies[i] = prefix + d
		}
	}
	b.Add(func(e *messages.Event) {
		e.Payload = &messages.Event_PlanCreated{PlanCreated: &messages.PlanCreated{PlanId: turnCallID(s, "plan-1"), Steps: steps}}
	})
	advance(b, cfg)
}

// followUpNote ends the orchestrator's system prompt in a follow-up call. Its first
// line marks the call for scripted models.
const followUpNote = "\n\nFATHOM-FOLLOW-UP\n## Follow-up message (turn %d)\n" +
	"This session has already worked on the goal: the conversation so far follows, and its last message " +
	"is a new message from the user. If it can be answered from what is already known, answer it directly " +
	"in plain text, with no JSON. If it needs new work, answer with a plan for the new work only: ONE JSON " +
	"object {\"steps\":[...]} as described above.\n"

// FollowUpSystemPrompt is the orchestrator's system prompt for the answer to a follow-up
// message: the planning prompt, then what the call is for.
func FollowUpSystemPrompt(s *messages.SessionState, p *prompts.Set) (string, error) {
	sys, err := p.Render(prompts.Orchestrator, prompts.AgentData{
		AgentType: prompts.Orchestrator, Phase: prompts.PhasePlan, Goal: s.GetGoal(),
		Workspace: s.GetSessionId() + "/", MaxSteps: s.GetConfig().GetMaxSteps(),
	})
	if err != nil {
		return "", err
	}
	return sys + fmt.Sprintf(followUpNote, Turn(s)), nil
}

// LastMessage is the follow-up message of the current turn and its seq ("" and 0 in
// turn 1).
func LastMessage(s *messages.SessionState) (string, uint64) {
	th := s.GetThread()
	if Turn(s) < 2 || len(th) == 0 {
		return "", 0
	}
	last := th[len(th)-1]
	return last.GetContent(), last.GetSeq()
}

// RepromptMessages are the messages a re-prompted planning call adds after its
// conversation (none for a first call).
func RepromptMessages(p *messages.PendingCall) []llm.Message { return repromptMessages(p) }
