package core

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/fathom-agents/fathom/messages"
	"github.com/fathom-agents/fathom/tools"
)

// Tool approval. A call of a tool listed in Config.ApprovalTools, made by the
// orchestrator or by a sub-agent, is recorded (tool_called, so it is pending) and then
// held: hitl_requested{kind "approval", request_id = the call's idempotency key,
// call_id, tool, args} opens a request and no tool runner starts it while the request
// is open (HeldTool; a sub-agent's actor skips calls that await a human). The human
// answers with ProvideInput, the input being JSON:
//
//   - {"decision":"approve"}: hitl_received{decision "approve"}; the request closes, so
//     the pending call is no longer held and runs once, like any pending call: the
//     event-sourced state (a pending call without an open request) is what says it is
//     due, so a node that stopped while the request waited runs it on the activation
//     that takes the decision, once (a run cut short by a crash runs again with the
//     same idempotency key, which the executor hands the tool: tools.CallInfo);
//   - {"decision":"edit","args":{...}}: the arguments are validated against the tool's
//     schema (a bad edit is refused with INVALID_ARGUMENT and the request keeps
//     waiting); hitl_received{decision "edit", args} replaces the pending call's
//     arguments and it runs with them. The model's transcript keeps the arguments it
//     produced; the result is the edited call's;
//   - {"decision":"reject","message":"..."}: hitl_received{decision "reject"} and the
//     call's tool_result is a ToolError of type "rejected" whose message is the human's
//     (the model reads it as a failed call and goes on); the call never runs.
//
// Config.ApprovalDecisions narrows, per tool, the decisions a human may take; the
// request records them (allowed_decisions) and a decision outside them is refused.
//
// At the deadline (the step's interrupt_timeout_ms, default 5 minutes) the step's
// default action is taken like for any request: "continue" (the default) rejects the
// call — hitl_received{by "timeout", decision "reject"} and a "rejected" ToolError
// saying no decision came in time, never running a risky call nobody approved — and
// "fail" fails the session.

const hitlKindApproval = "approval"

// Approval decisions: the "decision" of a human's answer to an approval request, and
// HitlReceived.decision.
const (
	DecisionApprove = "approve"
	DecisionEdit    = "edit"
	DecisionReject  = "reject"
)

// decisions are the approval decisions in the order they are listed.
var decisions = []string{DecisionApprove, DecisionEdit, DecisionReject}

// approvalInput is the JSON a human answers an approval request with.
type approvalInput struct {
	Decision string          `json:"decision"`
	Args     json.RawMessage `json:"args,omitempty"`
	Message  string          `json:"message,omitempty"`
}

// UnknownApprovalToolError is Config.ApprovalTools naming a tool the node does not have.
type UnknownApprovalToolError struct {
	// Tool is the name given.
	Tool string
	// Known are the node's tools.
	Known []string
}

func (e *UnknownApprovalToolError) Error() string {
	return fmt.Sprintf("approval tools: %q is not a tool of this node (tools: %s)", e.Tool, strings.Join(e.Known, ", "))
}

// WithArgsCheck returns c whose approval edits are validated by check (a tool's
// arguments against its schema, tools.Registry.Validate). session.Register sets it.
func (c Config) WithArgsCheck(check func(tool string, args json.RawMessage) *tools.ToolError) Config {
	c.checkArgs = check
	return c
}

// CheckApprovalTools reports an *UnknownApprovalToolError for the first ApprovalTools
// entry that is not a tool of the node (WithNode), and an error for ApprovalDecisions
// naming a tool not in ApprovalTools or a decision that is not one.
func (c Config) CheckApprovalTools() error {
	for _, name := range slices.Sorted(maps.Keys(c.ApprovalDecisions)) {
		if !slices.Contains(c.ApprovalTools, name) {
			return fmt.Errorf("approval decisions: %q is not one of the approval tools (%s)", name, strings.Join(c.ApprovalTools, ", "))
		}
		if err := CheckDecisions(c.ApprovalDecisions[name]); err != nil {
			return fmt.Errorf("approval decisions of %s: %w", name, err)
		}
	}
	for _, name := range c.ApprovalTools {
		if !c.hasTool(name) {
			known := make([]string, 0, len(c.toolNames))
			for n := range c.toolNames {
				known = append(known, n)
			}
			slices.Sort(known)
			return &UnknownApprovalToolError{Tool: name, Known: known}
		}
	}
	return nil
}

// CheckDecisions reports an error unless list is a non-empty list of distinct approval
// decisions (DecisionApprove, DecisionEdit, DecisionReject).
func CheckDecisions(list []string) error {
	if len(list) == 0 {
		return fmt.Errorf("no decision allowed: list some of %s", strings.Join(decisions, ", "))
	}
	for i, d := range list {
		if !slices.Contains(decisions, d) {
			return fmt.Errorf("%q is not a decision (want %s)", d, strings.Join(decisions, ", "))
		}
		if slices.Contains(list[:i], d) {
			return fmt.Errorf("decision %q is listed twice", d)
		}
	}
	return nil
}

// allowedDecisions are the decisions a human may take on calls of tool, in the order
// of decisions.
func (c Config) allowedDecisions(tool string) []string {
	list, ok := c.ApprovalDecisions[tool]
	if !ok {
		return slices.Clone(decisions)
	}
	out := make([]string, 0, len(decisions))
	for _, d := range decisions {
		if slices.Contains(list, d) {
			out = append(out, d)
		}
	}
	return out
}

// needsApproval reports whether calls of tool name wait for a human's decision.
func (c Config) needsApproval(name string) bool { return slices.Contains(c.ApprovalTools, name) }

// requestApproval opens the approval request of call c (made by agent a, recorded with
// idempotency key key).
func requestApproval(b *EventBuilder, cfg Config, a *agentTurn, c *messages.ToolCallRequest, key string) {
	allowed := cfg.allowedDecisions(c.GetName())
	b.Add(func(e *messages.Event) {
		e.Payload = &messages.Event_HitlRequested{HitlRequested: &messages.HitlRequested{
			RequestId: key, Kind: hitlKindApproval, StepId: a.stepID, SubAgentId: a.subAgentID, CallId: c.GetId(),
			Tool: c.GetName(), Args: c.GetArguments(), Question: fmt.Sprintf("Approve the call of %s?", c.GetName()),
			DeadlineUnixNano: b.at + humanTimeout(a.step).Nanoseconds(),
			DefaultAction:    firstNonEmpty(a.step.GetDefaultAction(), actionContinue),
			AllowedDecisions: allowed,
		}}
	})
}

// checkApproval parses and validates the answer to approval request r.
func checkApproval(r *messages.HitlRequested, input string, cfg Config) (approvalInput, error) {
	var in approvalInput
	dec := json.NewDecoder(strings.NewReader(input))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return in, refuse(messages.ErrorReason_INVALID_ARGUMENT,
			`input for approval request %s must be {"decision":"approve"}, {"decision":"edit","args":{...}} or {"decision":"reject","message":"..."}: %v`, r.GetRequestId(), err)
	}
	if allowed := r.GetAllowedDecisions(); slices.Contains(decisions, in.Decision) && len(allowed) > 0 && !slices.Contains(allowed, in.Decision) {
		return in, refuse(messages.ErrorReason_INVALID_ARGUMENT, `decision %q is not allowed on calls of %s (allowed: %s)`,
			in.Decision, r.GetTool(), strings.Join(allowed, ", "))
	}
	switch in.Decision {
	case DecisionApprove:
		if len(in.Args) > 0 || in.Message != "" {
			return in, refuse(messages.ErrorReason_INVALID_ARGUMENT, `decision "approve" takes no args or message (use "edit" to change the arguments)`)
		}
	case DecisionReject:
		if len(in.Args) > 0 {
			return in, refuse(messages.ErrorReason_INVALID_ARGUMENT, `decision "reject" takes a message, not args`)
		}
	case DecisionEdit:
		if len(bytes.TrimSpace(in.Args)) == 0 || bytes.Equal(bytes.TrimSpace(in.Args), []byte("null")) {
			return in, refuse(messages.ErrorReason_INVALID_ARGUMENT, `decision "edit" needs "args": the call's new arguments`)
		}
		var buf bytes.Buffer
		if err := json.Compact(&buf, in.Args); err != nil {
			return in, refuse(messages.ErrorReason_INVALID_ARGUMENT, "edited args are not JSON: %v", err)
		}
		in.Args = buf.Bytes()
		if cfg.checkArgs != nil {
			if terr := cfg.checkArgs(r.GetTool(), in.Args); terr != nil {
				return in, refuse(messages.ErrorReason_INVALID_ARGUMENT, "edited args for %s do not match its schema: %s", r.GetTool(), terr.Message)
			}
		}
	default:
		return in, refuse(messages.ErrorReason_INVALID_ARGUMENT, `input for approval request %s: decision %q is not one of "approve", "edit", "reject"`, r.GetRequestId(), in.Decision)
	}
	return in, nil
}

// answerApproval records the decision on approval request r (by a human, or the
// timeout's reject) and what follows it.
func answerApproval(b *EventBuilder, cfg Config, r *messages.HitlRequested, input, by string) error {
	in := approvalInput{Decision: DecisionReject}
	if by == byHuman {
		var err error
		if in, err = checkApproval(r, input, cfg); err != nil {
			return err
		}
	}
	b.Add(func(e *messages.Event) {
		e.Payload = &messages.Event_HitlReceived{HitlReceived: &messages.HitlReceived{
			RequestId: r.GetRequestId(), StepId: r.GetStepId(), Input: input, By: by, SubAgentId: r.GetSubAgentId(),
			Decision: in.Decision, Args: string(in.Args),
		}}
	})
	if in.Decision != DecisionReject {
		return nil // the call is no longer held: the grain (or the sub-agent's actor) runs it
	}
	msg := in.Message
	switch {
	case by == byTimeout:
		msg = fmt.Sprintf("No decision from a human within %s on this call of %s: it was rejected (timed out) and did not run.",
			humanTimeout(stepOfID(b.s, r.GetStepId())), r.GetTool())
	case msg == "":
		msg = fmt.Sprintf("A human rejected this call of %s: it did not run.", r.GetTool())
	}
	res := tools.Result{CallID: r.GetCallId(), Err: tools.RejectedError(r.GetTool(), msg)}
	tokens := cfg.CountMessage(b.s.GetConfig().GetModel(), ToolMessage(r.GetCallId(), res))
	return then(b, func(s *messages.SessionState) []*messages.Event {
		return DecideToolResult(s, &ToolResult{Key: r.GetRequestId(), Res: res, Tokens: tokens}, cfg, time.Unix(0, b.at))
	})
}

// applyApprovalEdit gives the pending call that approval request key holds the edited
// args.
func applyApprovalEdit(s *messages.SessionState, key, args string) error {
	if i := pendingTool(s, key); i >= 0 {
		s.PendingTools[i].Args = args
		return nil
	}
	for _, sa := range s.GetSubAgents() {
		for _, c := range sa.GetPendingTools() {
			if c.GetIdempotencyKey() == key {
				c.Args = args
				return nil
			}
		}
	}
	return fmt.Errorf("%w: hitl_received edits call %q, which is not pending", ErrBadEvent, key)
}
