package transcript

import (
	"fmt"
	"net/url"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/fathom-agents/fathom/messages"
)

// Orchestrator is the id of the orchestrator's lane.
const Orchestrator = "orchestrator"

// Entry kinds.
const (
	KindGoal      = "goal"      // the session's goal (Text)
	KindMessage   = "message"   // a follow-up user message opening a new turn (Text)
	KindPlan      = "plan"      // a plan or a re-plan (Text: its steps, as a markdown list)
	KindStep      = "step"      // a step the orchestrator runs itself starts (Text: its description)
	KindAnswer    = "answer"    // a model answer (Text, Reasoning; Pending while in flight)
	KindTool      = "tool"      // a tool call (Args) and its Result or Error
	KindTask      = "task"      // the brief a sub-agent starts from (Text)
	KindHandoff   = "handoff"   // a sub-agent's hand-off (Handoff)
	KindQuestion  = "question"  // a human question (Text, Options) and its Answer
	KindApproval  = "approval"  // a tool call waiting for approval (Tool, Args) and the Decision
	KindArtifact  = "artifact"  // an artifact written outside a tool call (Artifacts)
	KindError     = "error"     // a failed step or planner call (Text)
	KindBudget    = "budget"    // a session budget crossed (Text: which)
	KindResult    = "result"    // the session completed (Text: its result)
	KindFailed    = "failed"    // the session failed (Text: why)
	KindCancelled = "cancelled" // the session was cancelled (Text: the reason)
)

// Options tunes a Builder.
type Options struct {
	// MaxValue cuts values larger than this many bytes (0: DefaultMaxValue; < 0: never).
	MaxValue int
}

// Transcript is a session's run as a conversation, as the journal held it at Seq.
type Transcript struct {
	SessionID string `json:"session_id"`
	// Seq is the last event folded in.
	Seq uint64 `json:"seq"`
	// Status is running, awaiting_human, completed, failed or cancelled.
	Status string `json:"status"`
	Goal   string `json:"goal"`
	// Result is the final result while the session is completed (the latest turn's).
	Result *Value `json:"result,omitempty"`
	// Error is why the session failed, while it is failed.
	Error string `json:"error,omitempty"`
	// Agents are the lanes: the orchestrator's first, then each sub-agent's in the order
	// they started.
	Agents []*Agent `json:"agents"`
}

// Agent is one lane of the transcript: the orchestrator or a sub-agent.
type Agent struct {
	// ID is Orchestrator or the sub-agent's id.
	ID string `json:"id"`
	// AgentType is the sub-agent's type (researcher, coder, writer, reviewer).
	AgentType string `json:"agent_type,omitempty"`
	// StepID is the step the sub-agent last ran for.
	StepID string `json:"step_id,omitempty"`
	// Status is the sub-agent's: running, or its hand-off's status.
	Status  string   `json:"status,omitempty"`
	Entries []*Entry `json:"entries"`
}

// Entry is one thing an agent said or did, or that happened to it.
type Entry struct {
	// Seq is the event the entry starts at; At is when it was decided (RFC 3339).
	Seq  uint64 `json:"seq"`
	At   string `json:"at"`
	Kind string `json:"kind"`
	// EndSeq is the event that completed the entry (an answer, a result, a decision).
	EndSeq  uint64 `json:"end_seq,omitempty"`
	StepID  string `json:"step_id,omitempty"`
	CallID  string `json:"call_id,omitempty"`
	Purpose string `json:"purpose,omitempty"`
	Model   string `json:"model,omitempty"`
	// Pending is set on an answer or a tool call still in flight, a question or an
	// approval still open.
	Pending   bool   `json:"pending,omitempty"`
	Text      *Value `json:"text,omitempty"`
	Reasoning *Value `json:"reasoning,omitempty"`
	// ToolCalls are the calls an answer asked for (names).
	ToolCalls []string `json:"tool_calls,omitempty"`
	Tool      string   `json:"tool,omitempty"`
	Args      *Value   `json:"args,omitempty"`
	Result    *Value   `json:"result,omitempty"`
	// Error is a failed tool call's ToolError.
	Error     *ToolError `json:"error,omitempty"`
	Artifacts []Artifact `json:"artifacts,omitempty"`
	Handoff   *Handoff   `json:"handoff,omitempty"`
	Options   []string   `json:"options,omitempty"`
	// Answer is a human's answer to a question, or the arguments an approval was edited to.
	Answer *Value `json:"answer,omitempty"`
	// Decision answers an approval: approve, edit or reject.
	Decision string `json:"decision,omitempty"`
	// AnsweredBy is who answered or decided: the principal's subject@tenant, "human"
	// when the command carried none, or "timeout".
	AnsweredBy string  `json:"answered_by,omitempty"`
	DurationMS int64   `json:"duration_ms,omitempty"`
	CostUSD    float64 `json:"cost_usd,omitempty"`
	Tokens     uint64  `json:"tokens,omitempty"`
}

// ToolError is a failed tool call as the seed's ToolError classifies it.
type ToolError struct {
	// Type is validation, execution, timeout, sandbox, permission or rejected.
	Type      string `json:"type"`
	Message   string `json:"message"`
	Retryable bool   `json:"retryable,omitempty"`
}

// Artifact is an artifact an entry wrote.
type Artifact struct {
	Path        string `json:"path"`
	Type        string `json:"artifact_type"`
	Filename    string `json:"filename"`
	ContentType string `json:"content_type,omitempty"`
	Size        uint64 `json:"size"`
	// URL is the gateway path that serves it (GET /v1/sessions/{id}/artifacts/{type}/{filename}).
	URL string `json:"url"`
}

// Handoff is a sub-agent's hand-off.
type Handoff struct {
	// Status is completed, partial, blocked or failed.
	Status  string `json:"status"`
	Summary *Value `json:"summary,omitempty"`
	// Action is what the orchestrator did next: continue, retry, ask_human, replan, fail.
	Action string `json:"action,omitempty"`
	// Facts are the whole structured hand-off (messages.SubagentResult as JSON).
	Facts *Value `json:"facts,omitempty"`
}

// Builder folds a session's events into its Transcript.
type Builder struct {
	id    string
	max   int
	t     Transcript
	lanes map[string]*Agent
	calls map[string]*Entry // pending answers by lane + call id
	tools map[string]*Entry // tool calls by lane + idempotency key or call id
	asks  map[string]*Entry // open questions and approvals by request id
}

// New returns a Builder of session id's transcript.
func New(id string, o Options) *Builder {
	max := o.MaxValue
	if max == 0 {
		max = DefaultMaxValue
	}
	b := &Builder{id: id, max: max, lanes: map[string]*Agent{}, calls: map[string]*Entry{},
		tools: map[string]*Entry{}, asks: map[string]*Entry{}}
	b.t = Transcript{SessionID: id, Status: "running", Agents: []*Agent{}}
	b.lane("")
	return b
}

// Seq returns the seq of the last event added.
func (b *Builder) Seq() uint64 { return b.t.Seq }

// Transcript returns the transcript of the events added so far. It shares its entries
// with the Builder: add no event while it is in use.
func (b *Builder) Transcript() *Transcript { return &b.t }

func (b *Builder) lane(sub string) *Agent {
	id := sub
	if id == "" {
		id = Orchestrator
	}
	if a, ok := b.lanes[id]; ok {
		return a
	}
	a := &Agent{ID: id, Entries: []*Entry{}}
	b.lanes[id] = a
	b.t.Agents = append(b.t.Agents, a)
	return a
}

func (b *Builder) value(ev *messages.Event, field string) *Value {
	text, f, _ := fieldOf(ev, field)
	return newValue(text, f, b.max, FullPath(b.id, ev.GetSeq(), field))
}

func (b *Builder) entry(ev *messages.Event, sub, kind string) *Entry {
	e := &Entry{Seq: ev.GetSeq(), At: ev.At().Format(time.RFC3339Nano), Kind: kind}
	a := b.lane(sub)
	a.Entries = append(a.Entries, e)
	return e
}

// who names the principal behind ev's command.
func who(ev *messages.Event, fallback string) string {
	if p := ev.GetBy(); p.GetSubject() != "" {
		if p.GetTenant() != "" {
			return p.GetSubject() + "@" + p.GetTenant()
		}
		return p.GetSubject()
	}
	return fallback
}

// Add folds the next event (seq order) into the transcript.
func (b *Builder) Add(ev *messages.Event) {
	if ev.GetSeq() > b.t.Seq {
		b.t.Seq = ev.GetSeq()
	}
	switch p := ev.GetPayload().(type) {
	case *messages.Event_SessionStarted:
		b.t.Goal = p.SessionStarted.GetGoal()
		b.entry(ev, "", KindGoal).Text = b.value(ev, "goal")
	case *messages.Event_MessageReceived:
		b.t.Status, b.t.Result, b.t.Error = "running", nil, ""
		b.entry(ev, "", KindMessage).Text = b.value(ev, "content")
	case *messages.Event_PlanCreated:
		b.entry(ev, "", KindPlan).Text = newValue(planText(p.PlanCreated.GetPlanId(), "", p.PlanCreated.GetSteps()), markdown, 0, "")
	case *messages.Event_PlanRevised:
		r := p.PlanRevised
		head := fmt.Sprintf("re-planned after %s failed: %s", r.GetFailedStepId(), r.GetReason())
		b.entry(ev, "", KindPlan).Text = newValue(planText(r.GetPlanId(), head, r.GetSteps()), markdown, b.max, "")
	case *messages.Event_StepStarted:
		s := p.StepStarted
		if s.GetStepType() != "human_input" {
			e := b.entry(ev, "", KindStep)
			e.StepID = s.GetStepId()
			txt := fmt.Sprintf("%s (%s)", s.GetDescription(), s.GetStepType())
			if s.GetAttempt() > 1 {
				txt += fmt.Sprintf(", attempt %d", s.GetAttempt())
			}
			e.Text = newValue(txt, plain, b.max, "")
		}
	case *messages.Event_LlmRequested:
		r := p.LlmRequested
		key := r.GetSubAgentId() + "\x00" + r.GetCallId()
		if e, ok := b.calls[key]; ok && e.Pending {
			return // asked again after a recovery: the same answer is awaited
		}
		e := b.entry(ev, r.GetSubAgentId(), KindAnswer)
		e.StepID, e.CallID, e.Purpose, e.Model, e.Pending = r.GetStepId(), r.GetCallId(), r.GetPurpose(), r.GetModel(), true
		b.calls[key] = e
	case *messages.Event_LlmResponded:
		r := p.LlmResponded
		key := r.GetSubAgentId() + "\x00" + r.GetCallId()
		e, ok := b.calls[key]
		if !ok {
			e = b.entry(ev, r.GetSubAgentId(), KindAnswer)
			e.StepID, e.CallID = r.GetStepId(), r.GetCallId()
		}
		delete(b.calls, key)
		e.Pending, e.EndSeq, e.Model = false, ev.GetSeq(), r.GetModel()
		e.Text = b.value(ev, "content")
		if e.Purpose == "plan" || e.Purpose == "replan" {
			e.Text = newValue(r.GetContent(), plain, b.max, FullPath(b.id, ev.GetSeq(), "content"))
		}
		if thinkingText(r) != "" {
			e.Reasoning = b.value(ev, "thinking")
		}
		for _, c := range r.GetToolCalls() {
			e.ToolCalls = append(e.ToolCalls, c.GetName())
		}
		e.DurationMS, e.CostUSD, e.Tokens = r.GetDurationMs(), r.GetCostUsd(), r.GetUsage().GetTotalTokens()
	case *messages.Event_ToolCalled:
		c := p.ToolCalled
		e := b.entry(ev, c.GetSubAgentId(), KindTool)
		e.StepID, e.CallID, e.Tool, e.Pending = c.GetStepId(), c.GetCallId(), c.GetTool(), true
		e.Args = b.value(ev, "args")
		b.tools[toolKey(c.GetSubAgentId(), c.GetIdempotencyKey(), c.GetCallId())] = e
	case *messages.Event_ArtifactWritten:
		a := p.ArtifactWritten
		art := Artifact{Path: a.GetPath(), Type: a.GetArtifactType(), Filename: a.GetFilename(), ContentType: a.GetContentType(),
			Size: a.GetSize(), URL: "/v1/sessions/" + url.PathEscape(b.id) + "/artifacts/" + url.PathEscape(a.GetArtifactType()) + "/" + url.PathEscape(a.GetFilename())}
		if e, ok := b.tools[toolKey(a.GetSubAgentId(), a.GetIdempotencyKey(), a.GetCallId())]; ok {
			e.Artifacts = append(e.Artifacts, art)
			return
		}
		e := b.entry(ev, a.GetSubAgentId(), KindArtifact)
		e.StepID, e.CallID, e.Artifacts = a.GetStepId(), a.GetCallId(), []Artifact{art}
	case *messages.Event_ToolResult:
		r := p.ToolResult
		key := toolKey(r.GetSubAgentId(), r.GetIdempotencyKey(), r.GetCallId())
		e, ok := b.tools[key]
		if !ok {
			e = b.entry(ev, r.GetSubAgentId(), KindTool)
			e.StepID, e.CallID, e.Tool = r.GetStepId(), r.GetCallId(), r.GetTool()
		}
		delete(b.tools, key)
		e.Pending, e.EndSeq, e.DurationMS = false, ev.GetSeq(), r.GetDurationMs()
		if f := r.GetError(); f != nil {
			e.Error = &ToolError{Type: f.GetErrorType(), Message: f.GetMessage(), Retryable: f.GetRetryable()}
		} else {
			e.Result = b.value(ev, "result")
		}
	case *messages.Event_SubagentStarted:
		s := p.SubagentStarted
		a := b.lane(s.GetSubAgentId())
		a.AgentType, a.StepID, a.Status = s.GetAgentType(), s.GetStepId(), "running"
		e := b.entry(ev, s.GetSubAgentId(), KindTask)
		e.StepID, e.Text = s.GetStepId(), b.value(ev, "task")
	case *messages.Event_SubagentCompleted:
		s := p.SubagentCompleted
		a := b.lane(s.GetSubAgentId())
		a.Status = s.GetResult().GetStatus()
		e := b.entry(ev, s.GetSubAgentId(), KindHandoff)
		e.StepID = s.GetStepId()
		h := &Handoff{Status: s.GetResult().GetStatus(), Action: s.GetAction(), Summary: b.value(ev, "summary")}
		if facts, err := (protojson.MarshalOptions{UseProtoNames: true}).Marshal(s.GetResult()); err == nil {
			h.Facts = newValue(string(facts), plain, 0, "")
		}
		e.Handoff = h
		e.DurationMS, e.CostUSD = s.GetResult().GetDurationMs(), s.GetResult().GetCostUsd()
	case *messages.Event_HitlRequested:
		r := p.HitlRequested
		kind := KindQuestion
		if r.GetKind() == "approval" {
			kind = KindApproval
		}
		e := b.entry(ev, r.GetSubAgentId(), kind)
		e.StepID, e.CallID, e.Pending, e.Options = r.GetStepId(), r.GetCallId(), true, r.GetOptions()
		if kind == KindApproval {
			e.Tool, e.Args = r.GetTool(), b.value(ev, "args")
		} else {
			e.Text = b.value(ev, "question")
		}
		b.asks[r.GetRequestId()] = e
		b.t.Status = "awaiting_human"
	case *messages.Event_HitlReceived:
		r := p.HitlReceived
		e, ok := b.asks[r.GetRequestId()]
		if !ok {
			e = b.entry(ev, r.GetSubAgentId(), KindQuestion)
			e.StepID = r.GetStepId()
		}
		delete(b.asks, r.GetRequestId())
		e.Pending, e.EndSeq, e.Decision = false, ev.GetSeq(), r.GetDecision()
		e.AnsweredBy = who(ev, r.GetBy())
		if r.GetBy() == "timeout" {
			e.AnsweredBy = "timeout"
		}
		switch {
		case e.Kind == KindApproval && r.GetArgs() != "":
			e.Answer = b.value(ev, "args")
		case e.Kind != KindApproval:
			e.Answer = b.value(ev, "input")
		}
		if len(b.asks) == 0 && b.t.Status == "awaiting_human" {
			b.t.Status = "running"
		}
	case *messages.Event_StepFailed:
		s := p.StepFailed
		e := b.entry(ev, "", KindError)
		e.StepID = s.GetStepId()
		txt := fmt.Sprintf("step %s failed (attempt %d): %s", s.GetStepId(), s.GetAttempt(), s.GetError())
		if s.GetRetryAtUnixNano() > 0 {
			txt += " — it runs again"
		}
		e.Text = newValue(txt, plain, b.max, FullPath(b.id, ev.GetSeq(), "error"))
	case *messages.Event_PlanFailed:
		e := b.entry(ev, "", KindError)
		e.CallID = p.PlanFailed.GetCallId()
		e.Text = newValue("planning failed: "+p.PlanFailed.GetError(), plain, b.max, FullPath(b.id, ev.GetSeq(), "error"))
	case *messages.Event_SessionCompleted:
		c := p.SessionCompleted
		b.t.Status, b.t.Error = "completed", ""
		b.t.Result = b.value(ev, "result")
		e := b.entry(ev, "", KindResult)
		e.Text, e.CostUSD, e.Tokens = b.t.Result, c.GetCostUsd(), c.GetUsage().GetTotalTokens()
	case *messages.Event_SessionFailed:
		msg := p.SessionFailed.GetError()
		b.t.Status, b.t.Error = "failed", msg
		kind := KindFailed
		if strings.Contains(msg, "session budget exceeded") {
			kind = KindBudget
		}
		b.entry(ev, "", kind).Text = b.value(ev, "error")
	case *messages.Event_SessionCancelled:
		c := p.SessionCancelled
		b.t.Status = "cancelled"
		e := b.entry(ev, "", KindCancelled)
		e.AnsweredBy = who(ev, c.GetBy())
		e.Text = newValue(c.GetReason(), plain, b.max, "")
	}
}

func toolKey(sub, idem, call string) string {
	if idem != "" {
		return sub + "\x00" + idem
	}
	return sub + "\x00call:" + call
}

// planText renders a plan's steps as a markdown list.
func planText(id, head string, steps []*messages.PlanStep) string {
	var sb strings.Builder
	if head != "" {
		sb.WriteString(head + "\n\n")
	}
	fmt.Fprintf(&sb, "**%s**\n\n", id)
	for i, s := range steps {
		fmt.Fprintf(&sb, "%d. `%s` %s — %s", i+1, s.GetId(), s.GetType(), s.GetDescription())
		if len(s.GetDependencies()) > 0 {
			fmt.Fprintf(&sb, " (after %s)", strings.Join(s.GetDependencies(), ", "))
		}
		sb.WriteString("\n")
	}
	return sb.String()
}
