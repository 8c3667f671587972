package core

import (
	"fmt"
	"strings"

	"github.com/fathom-agents/fathom/messages"
)

// The Gantt is a read model of a session's events: the run as bars on a time axis (the
// console's timeline), the plan's versions as dependency graphs, and the cost per step,
// per agent and in total. Everything in it comes from the events folded, each bar from
// the pair of events that opened and closed it, so a Gantt built through seq N is
// exactly what the journal held then (time travel). It is built by a GanttBuilder fed
// the events in seq order; the state it folds alongside (Apply) gives the steps'
// statuses and the totals, so they agree with StateAt.

// Span kinds.
const (
	SpanPlan      = "plan"      // planning: the first plan call to plan_created
	SpanReplan    = "replan"    // a re-plan: the hand-off that asked for it to plan_revised
	SpanStep      = "step"      // one attempt of a step: step_started to step_completed/failed
	SpanSubagent  = "subagent"  // one run of a sub-agent: subagent_started to subagent_completed
	SpanLLM       = "llm"       // one LLM call: llm_requested to llm_responded
	SpanTool      = "tool"      // one tool call: tool_called to tool_result
	SpanWait      = "wait"      // a human's turn: hitl_requested to hitl_received
	SpanInterrupt = "interrupt" // a breakpoint or pause: interrupt_triggered to interrupt_resumed
)

// Mark kinds (instants on the time axis).
const (
	MarkRetry   = "retry"   // a step or plan call failed retryably and runs again
	MarkReplan  = "replan"  // plan_revised: a new version of the plan
	MarkTurn    = "turn"    // message_received: a follow-up opened a turn
	MarkEnd     = "end"     // session_completed, session_failed or session_cancelled
	MarkRestart = "restart" // the session's grain was restarted by its supervisor
)

// MaxGanttSpans bounds the spans of one Gantt; later ones are counted in
// Gantt.DroppedSpans.
const MaxGanttSpans = 10000

// Gantt is a session's run as bars (see the comment at the top of this file).
type Gantt struct {
	SessionID string `json:"session_id"`
	// Seq is the last event folded: the point in the session the Gantt shows.
	Seq uint64 `json:"seq"`
	// Status is the session's status at Seq ("executing", "completed", ...).
	Status string `json:"status"`
	// StartUnixNano and EndUnixNano are the first and the last folded event's times: the
	// time axis. A span still open at Seq ends at EndUnixNano on it.
	StartUnixNano int64 `json:"start_unix_nano"`
	EndUnixNano   int64 `json:"end_unix_nano"`
	// Spans are the bars, in the order they opened.
	Spans []Span `json:"spans"`
	// DroppedSpans counts the spans past MaxGanttSpans, left out.
	DroppedSpans int `json:"dropped_spans,omitempty"`
	// Marks are instants: retries, re-plans, turns, the end, restarts.
	Marks []Mark `json:"marks"`
	// Steps are the cost of each step that ran, in the order they first started.
	Steps []StepCost `json:"steps"`
	// Agents are the cost of the orchestrator ("orchestrator") and of each sub-agent, in
	// the order they first called a model.
	Agents []AgentCost `json:"agents"`
	// Total is the session's cost at Seq (the state's: llm_calls, usage, cost_usd).
	Total Cost `json:"total"`
	// Plans are the plan's versions: plan_created, then one per plan_revised (and per
	// follow-up turn's plan). Each step's status is the one it had when the version was
	// replaced, or at Seq for the last version.
	Plans []PlanVersion `json:"plans"`
}

// Span is one bar of a Gantt.
type Span struct {
	// ID is unique in the Gantt: the kind and the seq of the event that opened it.
	ID   string `json:"id"`
	Kind string `json:"kind"`
	// Label says what ran: a step's id and type, a call's id, a tool's name, a question.
	Label      string `json:"label"`
	StepID     string `json:"step_id,omitempty"`
	SubAgentID string `json:"sub_agent_id,omitempty"`
	// StartSeq and EndSeq are the events that opened and closed the span; EndSeq 0: open
	// at the Gantt's Seq.
	StartSeq      uint64 `json:"start_seq"`
	EndSeq        uint64 `json:"end_seq"`
	StartUnixNano int64  `json:"start_unix_nano"`
	EndUnixNano   int64  `json:"end_unix_nano"`
	// Status is how it ended: completed, failed, or what closed it (a hand-off's status,
	// a tool error's type, "timeout", "cancelled"); "open" while it runs.
	Status string `json:"status"`
	// Attempt is a step's attempt (from 1) or a sub-agent's run; Retry is true for a run
	// after a failed one.
	Attempt uint32 `json:"attempt,omitempty"`
	Retry   bool   `json:"retry,omitempty"`
	// Tokens and CostUSD are an LLM call's.
	Tokens  uint64  `json:"tokens,omitempty"`
	CostUSD float64 `json:"cost_usd,omitempty"`
}

// Mark is an instant of a Gantt.
type Mark struct {
	Kind     string `json:"kind"`
	Seq      uint64 `json:"seq,omitempty"`
	UnixNano int64  `json:"unix_nano"`
	StepID   string `json:"step_id,omitempty"`
	Label    string `json:"label"`
}

// Cost is what some calls cost.
type Cost struct {
	LLMCalls     uint32  `json:"llm_calls"`
	ToolCalls    uint32  `json:"tool_calls"`
	InputTokens  uint64  `json:"input_tokens"`
	OutputTokens uint64  `json:"output_tokens"`
	TotalTokens  uint64  `json:"total_tokens"`
	CostUSD      float64 `json:"cost_usd"`
}

// StepCost is the cost of one step (its sub-agents' calls included).
type StepCost struct {
	StepID   string `json:"step_id"`
	StepType string `json:"step_type"`
	Cost
}

// AgentCost is the cost of the orchestrator or of one sub-agent.
type AgentCost struct {
	// Agent is "orchestrator" or a sub_agent_id.
	Agent     string `json:"agent"`
	AgentType string `json:"agent_type"`
	Cost
}

// PlanVersion is one version of the plan.
type PlanVersion struct {
	// Version counts from 1; PlanID is the plan's ("plan-1", "plan-2" after a re-plan).
	Version uint32 `json:"version"`
	PlanID  string `json:"plan_id"`
	// Seq is the plan_created or plan_revised that made it; Reason is a revision's.
	Seq    uint64     `json:"seq"`
	Reason string     `json:"reason,omitempty"`
	Steps  []PlanNode `json:"steps"`
}

// PlanNode is a step of a plan version: a node of the dependency graph.
type PlanNode struct {
	ID           string   `json:"id"`
	Type         string   `json:"type"`
	Description  string   `json:"description"`
	Dependencies []string `json:"dependencies"`
	// Status is pending, in_progress, completed or failed.
	Status string `json:"status"`
}

// GanttBuilder folds events into a Gantt.
type GanttBuilder struct {
	g     Gantt
	state *messages.SessionState
	open  map[string]int // what opened a span ("llm:plan-1", "tool:KEY", ...) -> index in g.Spans
	calls map[string]*messages.LlmRequested
	// saStep is the step each sub-agent runs; saType its agent type.
	saStep, saType map[string]string
	steps          map[string]int // step id -> index in g.Steps
	agents         map[string]int // agent -> index in g.Agents
	planOpen       bool
}

// NewGanttBuilder starts the Gantt of session id.
func NewGanttBuilder(id string) *GanttBuilder {
	return &GanttBuilder{g: Gantt{SessionID: id, Spans: []Span{}, Marks: []Mark{}, Steps: []StepCost{}, Agents: []AgentCost{}, Plans: []PlanVersion{}},
		state: NewState(id), open: map[string]int{}, calls: map[string]*messages.LlmRequested{},
		saStep: map[string]string{}, saType: map[string]string{}, steps: map[string]int{}, agents: map[string]int{}}
}

// GanttOf builds the Gantt of events evs (a session's, in seq order from seq 1).
func GanttOf(id string, evs []*messages.Event) (*Gantt, error) {
	b := NewGanttBuilder(id)
	for _, ev := range evs {
		if err := b.Add(ev); err != nil {
			return nil, err
		}
	}
	return b.Gantt(), nil
}

// Add folds the next event.
func (b *GanttBuilder) Add(ev *messages.Event) error {
	if ev.GetSeq() != b.state.GetSeq()+1 {
		return fmt.Errorf("gantt of %s: event %d after %d", b.g.SessionID, ev.GetSeq(), b.state.GetSeq())
	}
	if rev, ok := ev.GetPayload().(*messages.Event_PlanRevised); ok {
		b.closeVersion()
		b.onRevised(ev, rev.PlanRevised)
	}
	if err := Apply(b.state, ev); err != nil {
		return fmt.Errorf("gantt of %s: %w", b.g.SessionID, err)
	}
	if b.g.StartUnixNano == 0 {
		b.g.StartUnixNano = ev.GetAtUnixNano()
	}
	b.g.Seq, b.g.EndUnixNano = ev.GetSeq(), ev.GetAtUnixNano()
	switch p := ev.GetPayload().(type) {
	case *messages.Event_PlanCreated:
		b.closeVersion()
		b.closeSpan("plan", ev, "completed")
		b.planOpen = false
		b.newVersion(ev, p.PlanCreated.GetPlanId(), "")
	case *messages.Event_PlanRevised:
		b.newVersion(ev, p.PlanRevised.GetPlanId(), p.PlanRevised.GetReason())
	case *messages.Event_PlanFailed:
		b.closeSpan("llm:"+p.PlanFailed.GetCallId(), ev, "failed")
		if p.PlanFailed.GetRetryAtUnixNano() > 0 {
			b.mark(MarkRetry, ev, "", "plan call "+p.PlanFailed.GetCallId()+" failed; retrying: "+p.PlanFailed.GetError())
		}
	case *messages.Event_MessageReceived:
		b.mark(MarkTurn, ev, "", "follow-up message")
	default:
		b.addRun(ev)
	}
	return nil
}

// addRun handles the events of steps, sub-agents, calls and waits.
func (b *GanttBuilder) addRun(ev *messages.Event) {
	switch p := ev.GetPayload().(type) {
	case *messages.Event_StepStarted:
		e := p.StepStarted
		b.openSpan("step:"+e.GetStepId(), Span{Kind: SpanStep, Label: e.GetStepId() + " · " + e.GetStepType(), StepID: e.GetStepId(),
			Attempt: e.GetAttempt(), Retry: e.GetAttempt() > 1}, ev)
		b.stepCost(e.GetStepId())
	case *messages.Event_StepCompleted:
		b.closeSpan("step:"+p.StepCompleted.GetStepId(), ev, "completed")
	case *messages.Event_StepFailed:
		e := p.StepFailed
		b.closeStepCalls(e.GetStepId(), ev)
		b.closeSpan("step:"+e.GetStepId(), ev, "failed")
		if e.GetRetryAtUnixNano() > 0 {
			b.mark(MarkRetry, ev, e.GetStepId(), fmt.Sprintf("step %s attempt %d failed; retrying: %s", e.GetStepId(), e.GetAttempt(), e.GetError()))
		}
	case *messages.Event_SubagentStarted:
		e := p.SubagentStarted
		b.saStep[e.GetSubAgentId()], b.saType[e.GetSubAgentId()] = e.GetStepId(), e.GetAgentType()
		attempt := b.stepAttempt(e.GetStepId())
		b.openSpan("agent:"+e.GetSubAgentId(), Span{Kind: SpanSubagent, Label: e.GetSubAgentId() + " (" + e.GetAgentType() + ")",
			StepID: e.GetStepId(), SubAgentID: e.GetSubAgentId(), Attempt: attempt, Retry: attempt > 1}, ev)
	case *messages.Event_SubagentCompleted:
		b.onHandoff(ev, p.SubagentCompleted)
	case *messages.Event_LlmRequested:
		b.onRequested(ev, p.LlmRequested)
	case *messages.Event_LlmResponded:
		b.onResponded(ev, p.LlmResponded)
	case *messages.Event_ToolCalled:
		e := p.ToolCalled
		step := b.stepOf(e.GetStepId(), e.GetSubAgentId())
		b.openSpan("tool:"+e.GetIdempotencyKey(), Span{Kind: SpanTool, Label: e.GetTool(), StepID: step, SubAgentID: e.GetSubAgentId()}, ev)
		b.addCost(step, e.GetSubAgentId(), Cost{ToolCalls: 1})
	case *messages.Event_ToolResult:
		status := "completed"
		if f := p.ToolResult.GetError(); f != nil {
			status = f.GetErrorType()
		}
		b.closeSpan("tool:"+p.ToolResult.GetIdempotencyKey(), ev, status)
	default:
		b.addWait(ev)
	}
}

// addWait handles human waits, interrupts and the session's end.
func (b *GanttBuilder) addWait(ev *messages.Event) {
	switch p := ev.GetPayload().(type) {
	case *messages.Event_HitlRequested:
		e := p.HitlRequested
		label := e.GetKind() + ": " + e.GetQuestion()
		if e.GetKind() == "approval" {
			label = "approval: " + e.GetTool()
		}
		b.openSpan("wait:"+e.GetRequestId(), Span{Kind: SpanWait, Label: label, StepID: e.GetStepId(), SubAgentID: e.GetSubAgentId()}, ev)
	case *messages.Event_HitlReceived:
		status := p.HitlReceived.GetBy()
		if d := p.HitlReceived.GetDecision(); d != "" {
			status += " " + d
		}
		b.closeSpan("wait:"+p.HitlReceived.GetRequestId(), ev, status)
	case *messages.Event_InterruptTriggered:
		e := p.InterruptTriggered
		b.openSpan("interrupt", Span{Kind: SpanInterrupt, Label: strings.TrimSpace(e.GetReason() + " " + e.GetPosition() + " " + e.GetStepId()), StepID: e.GetStepId()}, ev)
	case *messages.Event_InterruptResumed:
		b.closeSpan("interrupt", ev, p.InterruptResumed.GetBy()+" "+p.InterruptResumed.GetAction())
	case *messages.Event_SessionCompleted, *messages.Event_SessionFailed, *messages.Event_SessionCancelled:
		status := strings.TrimPrefix(strings.ToLower(b.state.GetStatus().String()), "session_status_")
		for key := range b.open {
			b.closeSpan(key, ev, status)
		}
		b.planOpen = false
		b.mark(MarkEnd, ev, "", "session "+status)
	}
}

func (b *GanttBuilder) onRequested(ev *messages.Event, e *messages.LlmRequested) {
	b.calls[e.GetCallId()] = e
	step := b.stepOf(e.GetStepId(), e.GetSubAgentId())
	if e.GetPurpose() == "plan" && !b.planOpen {
		b.planOpen = true
		b.openSpan("plan", Span{Kind: SpanPlan, Label: "plan"}, ev)
	}
	if e.GetPurpose() == "plan" || e.GetPurpose() == "replan" || e.GetPurpose() == "synthesize" {
		step = ""
	}
	label := e.GetCallId()
	if e.GetPurpose() != "step" && e.GetPurpose() != "subagent" {
		label += " (" + e.GetPurpose() + ")"
	}
	b.openSpan("llm:"+e.GetCallId(), Span{Kind: SpanLLM, Label: label, StepID: step, SubAgentID: e.GetSubAgentId(),
		Retry: e.GetRepromptError() != ""}, ev)
	b.addCost(step, e.GetSubAgentId(), Cost{LLMCalls: 1})
}

func (b *GanttBuilder) onResponded(ev *messages.Event, e *messages.LlmResponded) {
	req := b.calls[e.GetCallId()]
	step := b.stepOf(e.GetStepId(), e.GetSubAgentId())
	if req != nil && req.GetPurpose() != "step" && req.GetPurpose() != "subagent" {
		step = ""
	}
	u := e.GetUsage()
	if i, ok := b.open["llm:"+e.GetCallId()]; ok {
		b.g.Spans[i].Tokens, b.g.Spans[i].CostUSD = u.GetTotalTokens(), e.GetCostUsd()
	}
	b.closeSpan("llm:"+e.GetCallId(), ev, "completed")
	b.addCost(step, e.GetSubAgentId(), Cost{InputTokens: u.GetInputTokens(), OutputTokens: u.GetOutputTokens(),
		TotalTokens: u.GetTotalTokens(), CostUSD: e.GetCostUsd()})
}

func (b *GanttBuilder) onHandoff(ev *messages.Event, e *messages.SubagentCompleted) {
	id := e.GetSubAgentId()
	for key, i := range b.open { // the run's calls still open end with it
		if b.g.Spans[i].SubAgentID == id && b.g.Spans[i].Kind != SpanWait {
			if key != "agent:"+id {
				b.closeSpan(key, ev, "abandoned")
			}
		}
	}
	b.closeSpan("agent:"+id, ev, e.GetResult().GetStatus())
	if e.GetAction() == ActionReplan {
		b.openSpan("replan", Span{Kind: SpanReplan, Label: "re-plan after " + e.GetStepId(), StepID: e.GetStepId()}, ev)
	}
}

func (b *GanttBuilder) onRevised(ev *messages.Event, e *messages.PlanRevised) {
	b.closeSpan("replan", ev, "completed")
	b.mark(MarkReplan, ev, e.GetFailedStepId(), fmt.Sprintf("%s: re-planned after %s", e.GetPlanId(), e.GetFailedStepId()))
}

// closeStepCalls closes the orchestrator's open calls of a step that failed.
func (b *GanttBuilder) closeStepCalls(step string, ev *messages.Event) {
	for key, i := range b.open {
		sp := b.g.Spans[i]
		if sp.StepID == step && sp.SubAgentID == "" && (sp.Kind == SpanLLM || sp.Kind == SpanTool) {
			b.closeSpan(key, ev, "failed")
		}
	}
}

// stepAttempt is the current attempt of step id (0: not in the plan).
func (b *GanttBuilder) stepAttempt(id string) uint32 {
	for _, st := range b.state.GetSteps() {
		if st.GetStep().GetId() == id {
			return st.GetAttempt()
		}
	}
	return 0
}

// stepOf is the step a call belongs to: its own, or its sub-agent's.
func (b *GanttBuilder) stepOf(step, subAgent string) string {
	if step == "" && subAgent != "" {
		return b.saStep[subAgent]
	}
	return step
}

func (b *GanttBuilder) openSpan(key string, sp Span, ev *messages.Event) {
	if i, ok := b.open[key]; ok { // opened again without a close (a restart re-recorded it): the new one wins
		b.g.Spans[i].Status = "abandoned"
		b.g.Spans[i].EndSeq, b.g.Spans[i].EndUnixNano = ev.GetSeq(), ev.GetAtUnixNano()
		delete(b.open, key)
	}
	if len(b.g.Spans) >= MaxGanttSpans {
		b.g.DroppedSpans++
		return
	}
	sp.ID = fmt.Sprintf("%s-%d", sp.Kind, ev.GetSeq())
	sp.StartSeq, sp.StartUnixNano, sp.Status = ev.GetSeq(), ev.GetAtUnixNano(), "open"
	b.open[key] = len(b.g.Spans)
	b.g.Spans = append(b.g.Spans, sp)
}

func (b *GanttBuilder) closeSpan(key string, ev *messages.Event, status string) {
	i, ok := b.open[key]
	if !ok {
		return
	}
	delete(b.open, key)
	b.g.Spans[i].EndSeq, b.g.Spans[i].EndUnixNano, b.g.Spans[i].Status = ev.GetSeq(), ev.GetAtUnixNano(), status
}

func (b *GanttBuilder) mark(kind string, ev *messages.Event, step, label string) {
	b.g.Marks = append(b.g.Marks, Mark{Kind: kind, Seq: ev.GetSeq(), UnixNano: ev.GetAtUnixNano(), StepID: step, Label: label})
}

// AddMark adds an instant the events do not hold (a restart of the session's grain).
func (b *GanttBuilder) AddMark(m Mark) { b.g.Marks = append(b.g.Marks, m) }

func (b *GanttBuilder) stepCost(step string) *StepCost {
	i, ok := b.steps[step]
	if !ok {
		typ := ""
		for _, st := range b.state.GetSteps() {
			if st.GetStep().GetId() == step {
				typ = st.GetStep().GetType()
			}
		}
		i = len(b.g.Steps)
		b.steps[step] = i
		b.g.Steps = append(b.g.Steps, StepCost{StepID: step, StepType: typ})
	}
	return &b.g.Steps[i]
}

// addCost adds c to step's cost (when the call belongs to a step) and to its agent's.
func (b *GanttBuilder) addCost(step, subAgent string, c Cost) {
	if step != "" {
		b.stepCost(step).add(c)
	}
	agent, typ := "orchestrator", "orchestrator"
	if subAgent != "" {
		agent, typ = subAgent, b.saType[subAgent]
	}
	i, ok := b.agents[agent]
	if !ok {
		i = len(b.g.Agents)
		b.agents[agent] = i
		b.g.Agents = append(b.g.Agents, AgentCost{Agent: agent, AgentType: typ})
	}
	b.g.Agents[i].add(c)
}

func (c *Cost) add(o Cost) {
	c.LLMCalls += o.LLMCalls
	c.ToolCalls += o.ToolCalls
	c.InputTokens += o.InputTokens
	c.OutputTokens += o.OutputTokens
	c.TotalTokens += o.TotalTokens
	c.CostUSD += o.CostUSD
}

// newVersion starts a plan version from the state's current steps.
func (b *GanttBuilder) newVersion(ev *messages.Event, planID, reason string) {
	v := PlanVersion{Version: uint32(len(b.g.Plans) + 1), PlanID: planID, Seq: ev.GetSeq(), Reason: reason}
	for _, st := range b.state.GetSteps() {
		s := st.GetStep()
		deps := append([]string{}, s.GetDependencies()...)
		v.Steps = append(v.Steps, PlanNode{ID: s.GetId(), Type: s.GetType(), Description: s.GetDescription(), Dependencies: deps})
	}
	b.g.Plans = append(b.g.Plans, v)
}

// closeVersion sets the last version's statuses from the state (before the event that
// replaces it is applied).
func (b *GanttBuilder) closeVersion() {
	if len(b.g.Plans) == 0 {
		return
	}
	status := map[string]string{}
	for _, st := range b.state.GetSteps() {
		status[st.GetStep().GetId()] = stepStatusName(st.GetStatus())
	}
	v := &b.g.Plans[len(b.g.Plans)-1]
	for i := range v.Steps {
		if s, ok := status[v.Steps[i].ID]; ok {
			v.Steps[i].Status = s
		}
	}
}

func stepStatusName(s messages.StepStatus) string {
	return strings.TrimPrefix(strings.ToLower(s.String()), "step_status_")
}

// Gantt returns the Gantt of the events added so far (the builder may go on).
func (b *GanttBuilder) Gantt() *Gantt {
	b.closeVersion()
	s := b.state
	b.g.Status = strings.TrimPrefix(strings.ToLower(s.GetStatus().String()), "session_status_")
	u := s.GetUsage()
	var tools uint32
	for _, c := range b.g.Agents {
		tools += c.ToolCalls
	}
	b.g.Total = Cost{LLMCalls: s.GetLlmCalls(), ToolCalls: tools, InputTokens: u.GetInputTokens(), OutputTokens: u.GetOutputTokens(),
		TotalTokens: u.GetTotalTokens(), CostUSD: s.GetCostUsd()}
	out := b.g
	out.Spans = append([]Span{}, b.g.Spans...)
	out.Marks = append([]Mark{}, b.g.Marks...)
	out.Steps = append([]StepCost{}, b.g.Steps...)
	out.Agents = append([]AgentCost{}, b.g.Agents...)
	out.Plans = make([]PlanVersion, len(b.g.Plans))
	for i, v := range b.g.Plans {
		v.Steps = append([]PlanNode{}, v.Steps...)
		out.Plans[i] = v
	}
	return &out
}
