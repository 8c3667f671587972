package session

import (
	"context"
	"crypto/sha256"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/fathom-agents/fathom/actors/session/core"
	"github.com/fathom-agents/fathom/internal/telemetry"
	"github.com/fathom-agents/fathom/messages"
)

// One trace per session run.
//
// A session outlives its activations: the grain passivates, its node stops, it moves to
// another member, and every activation makes spans. None of them can hold the session's
// root span in memory, so the ids are derived instead: the trace id and the span ids of
// the session's long spans — the invoke_agent root, each step attempt, each sub-agent
// run — are hashes of the session id (and the step id and attempt, the sub-agent id and
// run). Every short span (an activation, an LLM call and its chat span, a tool call) is
// started under the derived id of the long span it belongs to, whichever node makes it.
// A long span is emitted once, with its derived id and its recorded start time, by the
// activation that commits the event ending it (step_completed or step_failed,
// subagent_completed, the session's terminal event): its children were exported long
// before, and a backend joins them when the parent arrives. The span ids reach the SDK
// through telemetry.IDGenerator, which the node's tracer provider uses.
//
// The root and the runs. A session can live for days, mostly waiting for a human, and a
// span is exported only when it ends: a root covering the whole session would leave its
// children without a parent in the backend for as long as the session lives. So the
// root invoke_agent span stands for the session's first run: it starts with the session
// and ends when that run stops — at the first wait for a human (awaiting_human,
// interrupted), at the end of the session, or when the activation stops (passivation,
// node shutdown), whichever comes first. Each later run (a reactivation that goes on
// working, a human's answer, a resume) is an invoke_agent orchestrator span of its own,
// a child of the root, ending the same way. The root keeps its derived id, so every
// other span of the session still hangs under it (or under a step or sub-agent span)
// and the trace is complete in the backend as soon as the first run stops. The run that
// ends the session carries the session's totals (fathom.status, tokens, cost). A fork's
// root carries a link to its source's root span and the fork point
// (fathom.fork.source_session_id, fathom.fork.source_seq).
//
// The shape:
//
//	invoke_agent orchestrator            (root, the first run: gen_ai.conversation.id = session id)
//	├── invoke_agent orchestrator        (each later run)
//	├── session.activation               (one per activation, fathom.host)
//	├── session.plan / session.replan    (an orchestrator LLM call) └── chat MODEL
//	└── session.step                     (a plan step attempt)
//	    ├── session.llm_call └── chat MODEL
//	    ├── execute_tool TOOL            (TRACEPARENT in the sandbox, traceparent in MCP _meta)
//	    └── invoke_agent AGENT_TYPE      (a sub-agent run: gen_ai.agent.name = agent type)
//	        ├── session.llm_call └── chat MODEL
//	        └── execute_tool TOOL

// orchestratorAgent is gen_ai.agent.name of a session's root span.
const orchestratorAgent = "orchestrator"

// sessionTraceID is the trace id of session id's run.
func sessionTraceID(id string) trace.TraceID {
	h := sha256.Sum256([]byte("fathom/trace\x00" + id))
	var tid trace.TraceID
	copy(tid[:], h[:16])
	if !tid.IsValid() {
		tid[15] = 1
	}
	return tid
}

// sessionSpanID is the span id of one of session id's long spans, named by parts.
func sessionSpanID(id string, parts ...string) trace.SpanID {
	var buf [128]byte // ids and parts are short: hashed from the stack
	b := append(append(buf[:0], "fathom/span\x00"...), id...)
	for _, p := range parts {
		b = append(append(b, 0), p...)
	}
	h := sha256.Sum256(b)
	var sid trace.SpanID
	copy(sid[:], h[:8])
	if !sid.IsValid() {
		sid[7] = 1
	}
	return sid
}

func rootSpanID(id string) trace.SpanID { return sessionSpanID(id, "invoke_agent") }

func stepSpanID(id, stepID string, attempt uint32) trace.SpanID {
	return sessionSpanID(id, "step", stepID, strconv.FormatUint(uint64(attempt), 10))
}

func subAgentSpanID(id, subAgentID string, run uint32) trace.SpanID {
	return sessionSpanID(id, "sub_agent", subAgentID, strconv.FormatUint(uint64(run), 10))
}

// spanIn is the span context of span sid of session id's trace, as a parent. Its
// sampled flag is the decision of the session's root (Deps.Sampled): every span of the
// session follows the root, whichever node makes it, so a parent-based sampler keeps or
// drops the whole trace.
func spanIn(d *Deps, id string, sid trace.SpanID) trace.SpanContext {
	tid := sessionTraceID(id)
	var flags trace.TraceFlags
	if d == nil || d.Sampled == nil || d.Sampled(tid) {
		flags = trace.FlagsSampled
	}
	return trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: flags, Remote: true})
}

// rootParent is the parent of the spans directly under session id's root.
func rootParent(d *Deps, id string) trace.SpanContext { return spanIn(d, id, rootSpanID(id)) }

// callParent is the span a call of session id in state st belongs to: the current run of
// sub-agent subAgentID when set, else the current attempt of step stepID when the plan
// has it, else the session's root.
func callParent(d *Deps, id string, st *messages.SessionState, subAgentID, stepID string) trace.SpanContext {
	if sa := st.GetSubAgents()[subAgentID]; sa != nil {
		return spanIn(d, id, subAgentSpanID(id, subAgentID, sa.GetRuns()))
	}
	if stepID != "" {
		for _, s := range st.GetSteps() {
			if s.GetStep().GetId() == stepID {
				return spanIn(d, id, stepSpanID(id, stepID, s.GetAttempt()))
			}
		}
	}
	return rootParent(d, id)
}

// withParent returns a context whose span is parent (none when parent is invalid).
func withParent(parent trace.SpanContext) context.Context {
	if !parent.IsValid() {
		return context.Background()
	}
	return trace.ContextWithRemoteSpanContext(context.Background(), parent)
}

// traceEnded emits the long spans evs end: st is the state after evs, prev the state
// before them.
func (g *Grain) traceEnded(evs []*messages.Event, prev, st *messages.SessionState) {
	if len(evs) == 0 {
		return
	}
	g.runStarts(evs, prev, st)
	ended := false
	for i, ev := range evs {
		switch p := ev.GetPayload().(type) {
		case *messages.Event_StepCompleted:
			g.endStep(evs, i, st, p.StepCompleted.GetStepId(), "")
		case *messages.Event_StepFailed:
			g.endStep(evs, i, st, p.StepFailed.GetStepId(), p.StepFailed.GetError())
		case *messages.Event_SubagentCompleted:
			c := p.SubagentCompleted
			errText := ""
			if c.GetResult().GetStatus() == "failed" {
				errText = c.GetResult().GetSummary()
			}
			g.endSubAgent(evs, i, st, c.GetSubAgentId(), c.GetResult().GetStatus(), errText)
		case *messages.Event_SessionCompleted:
			g.endRoot(evs, i, prev, st, "")
			ended = true
		case *messages.Event_SessionFailed:
			g.endRoot(evs, i, prev, st, p.SessionFailed.GetError())
			ended = true
		case *messages.Event_SessionCancelled:
			g.endRoot(evs, i, prev, st, "cancelled: "+p.SessionCancelled.GetReason())
			ended = true
		}
	}
	if !ended && g.run.open && !runActive(st.GetStatus()) {
		g.endRun(st, evs[len(evs)-1].GetAtUnixNano(), runEndedBy(st.GetStatus()), "")
	}
}

// traceRun is the session's open run in this activation: the span of the first run is
// the trace's root (rootSpanID), a later run's is a child of it.
type traceRun struct {
	open  bool
	first bool
	start int64 // unix nanos
}

// runActive reports whether a session in status s is working (a run is open).
func runActive(s messages.SessionStatus) bool {
	return s == messages.SessionStatus_SESSION_STATUS_PLANNING || s == messages.SessionStatus_SESSION_STATUS_EXECUTING
}

// runEndedBy names what stopped a run that left the session in status s.
func runEndedBy(s messages.SessionStatus) string {
	switch s {
	case messages.SessionStatus_SESSION_STATUS_AWAITING_HUMAN:
		return "awaiting_human"
	case messages.SessionStatus_SESSION_STATUS_INTERRUPTED:
		return "interrupted"
	case messages.SessionStatus_SESSION_STATUS_COMPLETED:
		return "completed"
	case messages.SessionStatus_SESSION_STATUS_FAILED:
		return "failed"
	case messages.SessionStatus_SESSION_STATUS_CANCELLED:
		return "cancelled"
	}
	return "passivation"
}

// traceActivated opens a run when the loaded session is working (Init, after load).
func (g *Grain) traceActivated() {
	if g.deps == nil || !runActive(g.state.GetStatus()) {
		return
	}
	g.run = traceRun{open: true, start: g.deps.Now().UnixNano()}
}

// traceDeactivated ends the activation's trace (Terminate, after waitPipeline published
// the durable appends still in the pipeline and so ended their spans): the open run.
func (g *Grain) traceDeactivated() {
	if g.deps == nil {
		return
	}
	if !g.run.open {
		return
	}
	st := g.pubState
	if st == nil {
		st = g.state
	}
	g.endRun(st, g.deps.Now().UnixNano(), "passivation", "")
}

// runStarts opens a run for evs (leading from prev to st): the first run when evs start
// the session (or make it a fork), a later one when evs make a stopped session work
// again or end it while no run is open (a cancel while it waits for a human).
func (g *Grain) runStarts(evs []*messages.Event, prev, st *messages.SessionState) {
	if prev.GetStatus() == messages.SessionStatus_SESSION_STATUS_UNSPECIFIED && st.GetStatus() != messages.SessionStatus_SESSION_STATUS_UNSPECIFIED {
		start := st.GetStartedAtUnixNano()
		for _, ev := range evs {
			if ev.GetSessionForked() != nil {
				start = ev.GetAtUnixNano()
			}
		}
		g.run = traceRun{open: true, first: true, start: start}
		return
	}
	if g.run.open {
		return
	}
	if runActive(st.GetStatus()) || core.Terminal(st) && !core.Terminal(prev) {
		g.run = traceRun{open: true, start: evs[0].GetAtUnixNano()}
	}
}

// endRun emits the open run's span, ending at end (unix nanos): the root for the first
// run, a child of it for a later one.
func (g *Grain) endRun(st *messages.SessionState, end int64, endedBy, errText string) {
	run := g.run
	if !run.open {
		return
	}
	g.run = traceRun{}
	attrs := []attribute.KeyValue{
		semconv.GenAIOperationNameInvokeAgent,
		semconv.GenAIAgentName(orchestratorAgent),
		semconv.GenAIConversationID(g.id),
		semconv.GenAIRequestModel(st.GetConfig().GetModel()),
		semconv.GenAIUsageInputTokensKey.Int64(int64(st.GetUsage().GetInputTokens())),
		semconv.GenAIUsageOutputTokensKey.Int64(int64(st.GetUsage().GetOutputTokens())),
		attribute.String("fathom.session_id", g.id),
		attribute.String("fathom.status", st.GetStatus().String()),
		attribute.String("fathom.run.ended_by", endedBy),
		attribute.Float64("fathom.cost_usd", st.GetCostUsd()),
		attribute.Int("fathom.steps", len(st.GetSteps())),
		attribute.Int("fathom.llm_calls", int(st.GetLlmCalls())),
	}
	parent, sid := rootParent(g.deps, g.id), trace.SpanID{}
	var opts []trace.SpanStartOption
	if run.first {
		parent, sid = trace.SpanContext{}, rootSpanID(g.id)
		if f := st.GetForkedFrom(); f != nil && f.GetSourceSessionId() != "" {
			fork := []attribute.KeyValue{
				attribute.String("fathom.fork.source_session_id", f.GetSourceSessionId()),
				attribute.Int64("fathom.fork.source_seq", int64(f.GetSourceSeq())),
			}
			attrs = append(attrs, fork...)
			opts = append(opts, trace.WithLinks(trace.Link{SpanContext: rootParent(g.deps, f.GetSourceSessionId()), Attributes: fork}))
		}
	}
	g.emitSpanWith("invoke_agent "+orchestratorAgent, parent, sid, run.start, end, errText, append(opts, trace.WithAttributes(attrs...))...)
}

// runOf returns the run number and start time (unix nanos; 0: unknown) of the run that
// evs[i] ends. isStart tells the events that start a run of the same thing; runs and
// startedAt are the latest run's in the state after evs (a later event of evs may have
// started another).
func runOf(evs []*messages.Event, i int, isStart func(*messages.Event) bool, runs uint32, startedAt int64) (uint32, int64) {
	later := uint32(0)
	for _, ev := range evs[i+1:] {
		if isStart(ev) {
			later++
		}
	}
	for j := i - 1; j >= 0; j-- {
		if isStart(evs[j]) {
			return runs - later, evs[j].GetAtUnixNano()
		}
	}
	if later == 0 {
		return runs, startedAt
	}
	return runs - later, 0
}

func (g *Grain) endStep(evs []*messages.Event, i int, st *messages.SessionState, stepID, errText string) {
	var step *messages.StepState
	for _, s := range st.GetSteps() {
		if s.GetStep().GetId() == stepID {
			step = s
		}
	}
	attempt, start := runOf(evs, i, func(ev *messages.Event) bool {
		return ev.GetStepStarted() != nil && ev.GetStepStarted().GetStepId() == stepID
	},
		step.GetAttempt(), step.GetStartedAtUnixNano())
	g.emitStep(step, stepID, attempt, start, evs[i].GetAtUnixNano(), errText)
}

func (g *Grain) emitStep(step *messages.StepState, stepID string, attempt uint32, start, end int64, errText string) {
	g.emitSpan("session.step", rootParent(g.deps, g.id), stepSpanID(g.id, stepID, attempt), start, end, errText,
		semconv.GenAIConversationID(g.id),
		attribute.String("fathom.session_id", g.id),
		attribute.String("fathom.step_id", stepID),
		attribute.String("fathom.step_type", step.GetStep().GetType()),
		attribute.Int("fathom.step.attempt", int(attempt)),
	)
}

func (g *Grain) endSubAgent(evs []*messages.Event, i int, st *messages.SessionState, subID, status, errText string) {
	sa := st.GetSubAgents()[subID]
	run, start := runOf(evs, i, func(ev *messages.Event) bool {
		return ev.GetSubagentStarted() != nil && ev.GetSubagentStarted().GetSubAgentId() == subID
	},
		sa.GetRuns(), sa.GetRunStartedAtUnixNano())
	g.emitSubAgent(st, sa, run, start, evs[i].GetAtUnixNano(), status, errText)
}

func (g *Grain) emitSubAgent(st *messages.SessionState, sa *messages.SubagentState, run uint32, start, end int64, status, errText string) {
	parent := rootParent(g.deps, g.id)
	for _, s := range st.GetSteps() {
		if s.GetStep().GetId() == sa.GetStepId() {
			parent = spanIn(g.deps, g.id, stepSpanID(g.id, sa.GetStepId(), s.GetAttempt()))
		}
	}
	attrs := []attribute.KeyValue{
		semconv.GenAIOperationNameInvokeAgent,
		semconv.GenAIAgentName(sa.GetAgentType()),
		semconv.GenAIAgentID(sa.GetId()),
		semconv.GenAIConversationID(g.id),
		semconv.GenAIRequestModel(st.GetConfig().GetModel()),
		attribute.String("fathom.session_id", g.id),
		attribute.String("fathom.sub_agent_id", sa.GetId()),
		attribute.String("fathom.step_id", sa.GetStepId()),
		attribute.Int("fathom.sub_agent.run", int(run)),
		attribute.String("fathom.sub_agent.status", status),
	}
	if run == sa.GetRuns() {
		attrs = append(attrs,
			semconv.GenAIUsageInputTokensKey.Int64(int64(sa.GetRunUsage().GetInputTokens())),
			semconv.GenAIUsageOutputTokensKey.Int64(int64(sa.GetRunUsage().GetOutputTokens())))
	}
	g.emitSpan("invoke_agent "+sa.GetAgentType(), parent, subAgentSpanID(g.id, sa.GetId(), run), start, end, errText, attrs...)
}

// endRoot emits the session's root span, ended by terminal event evs[i], and the spans
// of the steps and sub-agent runs the end cut short (running in prev, the state before
// evs, or started by evs, and not ended before evs[i]).
func (g *Grain) endRoot(evs []*messages.Event, i int, prev, st *messages.SessionState, errText string) {
	end := evs[i].GetAtUnixNano()
	for _, s := range st.GetSteps() {
		if s.GetStatus() == messages.StepStatus_STEP_STATUS_IN_PROGRESS && s.GetAttempt() > 0 {
			g.emitStep(s, s.GetStep().GetId(), s.GetAttempt(), s.GetStartedAtUnixNano(), end, "the session ended")
		}
	}
	running := map[string]bool{}
	for id, sa := range prev.GetSubAgents() {
		running[id] = sa.GetRunning()
	}
	for _, ev := range evs[:i] {
		if s := ev.GetSubagentStarted(); s != nil {
			running[s.GetSubAgentId()] = true
		}
		if c := ev.GetSubagentCompleted(); c != nil {
			running[c.GetSubAgentId()] = false
		}
	}
	for id, sa := range st.GetSubAgents() {
		if running[id] {
			g.emitSubAgent(st, sa, sa.GetRuns(), sa.GetRunStartedAtUnixNano(), end, "", "the session ended")
		}
	}
	g.endRun(st, end, runEndedBy(st.GetStatus()), errText)
}

// emitSpan emits a finished span with id sid under parent (the trace's root when parent
// is invalid), from start to end (unix nanos; an unknown start is end).
func (g *Grain) emitSpan(name string, parent trace.SpanContext, sid trace.SpanID, start, end int64, errText string, attrs ...attribute.KeyValue) {
	g.emitSpanWith(name, parent, sid, start, end, errText, trace.WithAttributes(attrs...))
}

// emitSpanWith is emitSpan with start options (attributes, links); an invalid sid gets a
// random span id.
func (g *Grain) emitSpanWith(name string, parent trace.SpanContext, sid trace.SpanID, start, end int64, errText string, extra ...trace.SpanStartOption) {
	if start <= 0 || start > end {
		start = end
	}
	ctx := telemetry.WithIDs(withParent(parent), sessionTraceID(g.id), sid)
	opts := append([]trace.SpanStartOption{trace.WithTimestamp(time.Unix(0, start))}, extra...)
	if !parent.IsValid() {
		opts = append(opts, trace.WithNewRoot())
	}
	_, span := g.deps.Tracer.Start(ctx, name, opts...)
	if errText != "" {
		span.SetStatus(codes.Error, errText)
	}
	span.End(trace.WithTimestamp(time.Unix(0, end)))
	if sc := span.SpanContext(); sc.IsValid() && sid.IsValid() && sc.SpanID() != sid && !g.deps.traceIDsWarned.Swap(true) {
		g.log.Warn("the tracer provider does not use telemetry.IDGenerator: a session's long spans (invoke_agent, session.step) get random ids and their children point at parents no backend receives")
	}
}
