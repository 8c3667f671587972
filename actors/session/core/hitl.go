package core

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	jsv "github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/fathom-agents/fathom/llm"
	"github.com/fathom-agents/fathom/messages"
	"github.com/fathom-agents/fathom/tools"
	"github.com/fathom-agents/fathom/tools/builtin"
)

// Humans in the loop. A session asks a human in two ways:
//
//   - a human_input step: when it starts, step_started is followed by hitl_requested
//     (kind "step", request_id = the step id, the step's description as the question,
//     its input_schema); the answer is the step's output (step_completed, its
//     output_tokens counted as a history message), and the next step starts;
//   - the ask_human tool, called by the model in a step the orchestrator runs: its
//     tool_called is followed by hitl_requested (kind "tool", request_id = the call's
//     idempotency key); the call is never run by a tool runner: the answer becomes its
//     tool_result, and when it was the turn's last pending call the next LLM call
//     follows.
//
// While a request is open the session is AWAITING_HUMAN (state.awaiting). ProvideInput
// validates the answer (JSON; a bare string that is not JSON is taken as a JSON string)
// against the request's options and input schema: a bad answer is refused with
// INVALID_ARGUMENT, nothing is recorded and the request keeps waiting. Each request
// has a deadline in state (the step's interrupt_timeout_ms, default 5 minutes), so it
// fires after passivation, restart or failover: hitl_received{by: "timeout"} and the
// default action ("continue": an empty answer for a step, a "no answer" tool result
// for ask_human; "fail": the session fails).

// Human-input constants.
const (
	StepTypeHumanInput = "human_input"
	hitlKindStep       = "step"
	hitlKindTool       = "tool"
	// hitlKindHandoff: a sub-agent handed off "blocked"; the answer resumes it.
	hitlKindHandoff = "handoff"
	byHuman         = "human"
	byTimeout       = "timeout"
	// DefaultHumanTimeout bounds a human-input request or a plan step's interrupt whose
	// step sets no interrupt_timeout_ms.
	DefaultHumanTimeout = 5 * time.Minute
	// MaxInputBytes bounds a human's answer.
	MaxInputBytes = 64 << 10
)

// humanTimeout is how long step waits for a human.
func humanTimeout(step *messages.PlanStep) time.Duration {
	if ms := step.GetInterruptTimeoutMs(); ms > 0 {
		return time.Duration(ms) * time.Millisecond
	}
	return DefaultHumanTimeout
}

// requestStepInput opens the human-input request of a human_input step that just
// started (its step_started is in b).
func requestStepInput(b *EventBuilder, step *messages.PlanStep) {
	b.Add(func(e *messages.Event) {
		e.Payload = &messages.Event_HitlRequested{HitlRequested: &messages.HitlRequested{
			RequestId: step.GetId(), Kind: hitlKindStep, StepId: step.GetId(), Question: step.GetDescription(),
			InputSchema: step.GetInputSchema(), DeadlineUnixNano: b.at + humanTimeout(step).Nanoseconds(),
			DefaultAction: firstNonEmpty(step.GetDefaultAction(), actionContinue),
		}}
	})
}

// askHuman opens the human-input request of ask_human call c (made by sub-agent
// subAgentID, "" for the orchestrator), or records its validation error as its result.
// It reports whether a request was opened.
func askHuman(b *EventBuilder, cfg Config, step *messages.PlanStep, c *messages.ToolCallRequest, key, subAgentID string) bool {
	args, terr := builtin.ParseAskHuman(json.RawMessage(c.GetArguments()))
	if terr != nil {
		res := tools.Result{CallID: c.GetId(), Err: terr}
		tokens := cfg.CountMessage(b.s.GetConfig().GetModel(), ToolMessage(c.GetId(), res))
		b.Add(func(e *messages.Event) {
			tr := toolResultEvent(step.GetId(), c.GetId(), c.GetName(), key, res, tokens)
			tr.SubAgentId = subAgentID
			e.Payload = &messages.Event_ToolResult{ToolResult: tr}
		})
		return false
	}
	b.Add(func(e *messages.Event) {
		e.Payload = &messages.Event_HitlRequested{HitlRequested: &messages.HitlRequested{
			RequestId: key, Kind: hitlKindTool, StepId: step.GetId(), SubAgentId: subAgentID, Question: args.Question, Options: args.Options,
			CallId: c.GetId(), DeadlineUnixNano: b.at + humanTimeout(step).Nanoseconds(),
			DefaultAction: firstNonEmpty(step.GetDefaultAction(), actionContinue),
		}}
	})
	return true
}

// HeldTool reports whether pending call c must not start: it waits for a human, or the
// session is stopped at an interrupt (a tool breakpoint holds the turn's calls).
func HeldTool(s *messages.SessionState, c *messages.PendingTool) bool {
	return s.GetInterrupt() != nil || awaitingRequest(s, c.GetIdempotencyKey()) != nil
}

func awaitingRequest(s *messages.SessionState, requestID string) *messages.HitlRequested {
	for _, r := range s.GetAwaiting() {
		if r.GetRequestId() == requestID {
			return r
		}
	}
	return nil
}

// DecideProvideInput answers an open request with a human's input.
func DecideProvideInput(s *messages.SessionState, req *messages.ProvideInputRequest, cfg Config, now time.Time) ([]*messages.Event, error) {
	if err := decideCommand(s, req.GetCommandId()); err != nil {
		return nil, err
	}
	r, err := findRequest(s, req.GetStepId(), req.GetRequestId())
	if err != nil {
		return nil, err
	}
	input, err := checkInput(r, req.GetInput())
	if err != nil {
		return nil, err
	}
	b := newEvents(s, req.GetCommandId(), now, cfg)
	if err := answer(b, cfg, r, input, byHuman); err != nil {
		return nil, err
	}
	return b.Evs, nil
}

// findRequest picks the open request a ProvideInput names.
func findRequest(s *messages.SessionState, stepID, requestID string) (*messages.HitlRequested, error) {
	if stepID == "" && requestID == "" {
		return nil, refuse(messages.ErrorReason_INVALID_ARGUMENT, "step_id (or request_id) is required: it names the request the input answers")
	}
	var open, match []string
	var found *messages.HitlRequested
	for _, r := range s.GetAwaiting() {
		open = append(open, fmt.Sprintf("%s (step %s)", r.GetRequestId(), r.GetStepId()))
		if (requestID == "" || r.GetRequestId() == requestID) && (stepID == "" || r.GetStepId() == stepID) {
			match = append(match, r.GetRequestId())
			if found == nil {
				found = r
			}
		}
	}
	switch {
	case len(match) > 1:
		return nil, refuse(messages.ErrorReason_INVALID_ARGUMENT, "step %s has %d open requests (%s): name one with request_id", stepID, len(match), strings.Join(match, ", "))
	case found != nil:
		return found, nil
	case len(open) == 0:
		return nil, refuse(messages.ErrorReason_FAILED_PRECONDITION, "session %s is not waiting for human input (%s)", s.GetSessionId(), s.GetStatus())
	}
	what := "step " + stepID
	if requestID != "" {
		what = "request " + requestID
	}
	return nil, refuse(messages.ErrorReason_FAILED_PRECONDITION, "no open human-input request for %s; open: %s", what, strings.Join(open, ", "))
}

// normaliseInput returns a human's answer as compact JSON text: JSON as given, anything
// else as a JSON string.
func normaliseInput(raw string) string {
	if t := strings.TrimSpace(raw); t != "" && json.Valid([]byte(t)) {
		var buf bytes.Buffer
		if json.Compact(&buf, []byte(t)) == nil {
			return buf.String()
		}
	}
	b, _ := json.Marshal(raw) // a string always marshals
	return string(b)
}

// checkInput validates a human's answer against r's options and input schema and
// returns it as compact JSON.
func checkInput(r *messages.HitlRequested, raw string) (string, error) {
	if len(raw) > MaxInputBytes {
		return "", refuse(messages.ErrorReason_INVALID_ARGUMENT, "input is %d bytes, the limit is %d", len(raw), MaxInputBytes)
	}
	if !utf8.ValidString(raw) {
		return "", refuse(messages.ErrorReason_INVALID_ARGUMENT, "input is not valid UTF-8")
	}
	input := normaliseInput(raw)
	if opts := r.GetOptions(); len(opts) > 0 {
		var choice string
		if json.Unmarshal([]byte(input), &choice) != nil || !slices.Contains(opts, choice) {
			return "", refuse(messages.ErrorReason_INVALID_ARGUMENT, "input for %s must be one of the options %q, not %s", r.GetRequestId(), opts, truncateText(input, 200))
		}
	}
	if r.GetInputSchema() == "" {
		return input, nil
	}
	sch, err := compileInputSchema(r.GetInputSchema())
	if err != nil {
		return "", refuse(messages.ErrorReason_FAILED_PRECONDITION, "request %s has an input schema that does not compile: %v", r.GetRequestId(), err)
	}
	inst, err := jsv.UnmarshalJSON(strings.NewReader(input))
	if err == nil {
		err = sch.Validate(inst)
	}
	if err != nil {
		return "", refuse(messages.ErrorReason_INVALID_ARGUMENT, "input for %s does not match its input schema: %s", r.GetRequestId(), tools.DescribeSchemaError(err))
	}
	return input, nil
}

// compileInputSchema compiles a JSON Schema given as text. It loads nothing: a $ref
// may only point inside the schema (plans come from a model; no file or URL is read).
func compileInputSchema(text string) (*jsv.Schema, error) {
	doc, err := jsv.UnmarshalJSON(strings.NewReader(text))
	if err != nil {
		return nil, fmt.Errorf("not JSON: %w", err)
	}
	c := jsv.NewCompiler()
	c.UseLoader(jsv.SchemeURLLoader{})
	const url = "mem://fathom/input-schema.json"
	if err := c.AddResource(url, doc); err != nil {
		return nil, err
	}
	return c.Compile(url)
}

// answer records the end of request r (input: compact JSON, "" for a timeout with
// action continue) and what follows it. by is "human" or "timeout".
func answer(b *EventBuilder, cfg Config, r *messages.HitlRequested, input, by string) error {
	if r.GetKind() == hitlKindApproval && (by == byHuman || r.GetDefaultAction() != actionFail) {
		return answerApproval(b, cfg, r, input, by)
	}
	b.Add(func(e *messages.Event) {
		e.Payload = &messages.Event_HitlReceived{HitlReceived: &messages.HitlReceived{
			RequestId: r.GetRequestId(), StepId: r.GetStepId(), Input: input, By: by, SubAgentId: r.GetSubAgentId(),
		}}
	})
	action := actionContinue
	if by == byTimeout {
		action = r.GetDefaultAction()
	}
	switch {
	case action == actionFail:
		timedOut(b, r)
		return nil
	case r.GetKind() == hitlKindHandoff:
		return then(b, func(s *messages.SessionState) []*messages.Event {
			return answerHandoff(s, cfg, r, input, by, time.Unix(0, b.at))
		})
	case r.GetKind() == hitlKindTool:
		res := tools.Result{CallID: r.GetCallId(), Output: input}
		if by == byTimeout {
			res.Output = fmt.Sprintf("No answer from a human within %s: the question was not answered. Continue without the answer.",
				humanTimeout(currentStep(b.s, r.GetStepId()).GetStep()))
		}
		tokens := cfg.CountMessage(b.s.GetConfig().GetModel(), ToolMessage(r.GetCallId(), res))
		return then(b, func(s *messages.SessionState) []*messages.Event {
			return DecideToolResult(s, &ToolResult{Key: r.GetRequestId(), Res: res, Tokens: tokens}, cfg, time.Unix(0, b.at))
		})
	}
	return then(b, func(s *messages.SessionState) []*messages.Event {
		return completeInputStep(s, cfg, r, input, time.Unix(0, b.at))
	})
}

// completeInputStep completes the human_input step of request r with input as its
// output (a history message of its own) and moves on.
func completeInputStep(s *messages.SessionState, cfg Config, r *messages.HitlRequested, input string, now time.Time) []*messages.Event {
	idx := s.GetCurrentStepIndex()
	st := currentStep(s, r.GetStepId())
	if st == nil {
		return nil
	}
	var tokens uint32
	if input != "" {
		tokens = cfg.CountMessage(s.GetConfig().GetModel(), humanInputMessage(input))
	}
	b := newEvents(s, "", now, cfg)
	b.Add(func(e *messages.Event) {
		e.Payload = &messages.Event_StepCompleted{StepCompleted: &messages.StepCompleted{
			StepId: r.GetStepId(), StepIndex: idx, Output: input, OutputTokens: tokens,
		}}
	})
	afterStep(b, cfg, idx)
	return b.Evs
}

// timedOut fails the session after request r's deadline passed with action fail.
func timedOut(b *EventBuilder, r *messages.HitlRequested) {
	msg := fmt.Sprintf("no human input for request %s (step %s) before its deadline; its default action is fail", r.GetRequestId(), r.GetStepId())
	if r.GetKind() == hitlKindStep || r.GetKind() == hitlKindHandoff {
		idx, _ := StepIndexByID(b.s, r.GetStepId())
		st := b.s.GetSteps()[idx]
		b.Add(func(e *messages.Event) {
			e.Payload = &messages.Event_StepFailed{StepFailed: &messages.StepFailed{
				StepId: r.GetStepId(), StepIndex: idx, Error: msg, Attempt: max(st.GetAttempt(), 1),
			}}
		})
	}
	fail(b, msg)
}

// DecideHitlDeadline takes the default action of every open request whose deadline
// passed, oldest first.
func DecideHitlDeadline(s *messages.SessionState, cfg Config, now time.Time) []*messages.Event {
	if Terminal(s) {
		return nil
	}
	b := newEvents(s, "", now, cfg)
	for _, r := range s.GetAwaiting() {
		if r.GetDeadlineUnixNano() == 0 || now.UnixNano() < r.GetDeadlineUnixNano() {
			continue
		}
		err := then(b, func(cur *messages.SessionState) []*messages.Event {
			if Terminal(cur) || awaitingRequest(cur, r.GetRequestId()) == nil {
				return nil
			}
			nb := newEvents(cur, "", now, cfg)
			if err := answer(nb, cfg, r, "", byTimeout); err != nil {
				return nil
			}
			return nb.Evs
		})
		if err != nil {
			return nil
		}
	}
	return b.Evs
}

// NextHumanDeadline is the earliest deadline of the open requests (0: none).
func NextHumanDeadline(s *messages.SessionState) int64 {
	var at int64
	for _, r := range s.GetAwaiting() {
		if d := r.GetDeadlineUnixNano(); d != 0 && (at == 0 || d < at) {
			at = d
		}
	}
	return at
}

// then appends to b what decide returns for the state b's events lead to, stamped with
// b's command id, so one command can reuse another decision. It fails only when b holds
// an event that does not apply (a decision bug).
func then(b *EventBuilder, decide func(*messages.SessionState) []*messages.Event) error {
	next := CloneState(b.s)
	for _, ev := range b.Evs {
		if err := Apply(next, ev); err != nil {
			return fmt.Errorf("chain decisions: %w", err)
		}
	}
	for _, ev := range decide(next) {
		ev.CommandId = b.cmdID
		b.Evs = append(b.Evs, ev)
	}
	return nil
}

// humanInputMessage is the history message a human_input step's answer becomes.
func humanInputMessage(input string) llm.Message {
	return llm.Message{Role: "user", Content: input}
}

func truncateText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
