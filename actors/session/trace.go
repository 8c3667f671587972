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
// The shape:
//
//	invoke_agent orchestrator            (root: gen_ai.conversation.id = session id)
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
	b := []byte("fathom/span\x00" + id)
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

// spanIn is the span context of span sid of session id's trace, as a parent.
func spanIn(id string, sid trace.SpanID) trace.SpanContext {
	return trace.NewSpanContext(trace.SpanContextConfig{TraceID: sessionTraceID(id), SpanID: sid, TraceFlags: trace.FlagsSampled, Remote: true})
}

// rootParent is the parent of the spans directly under session id's root.
func rootParent(id string) trace.SpanContext { return spanIn(id, rootSpanID(id)) }

// callParent is the span a call of session id in state st belongs to: the current run of
// sub-agent subAgentID when set, else the current attempt of step stepID when the plan
// has it, else the session's root.
func callParent(id string, st *messages.SessionState, subAgentID, stepID string) trace.SpanContext {
	if sa := st.GetSubAgents()[subAgentID]; sa != nil {
		return spanIn(id, subAgentSpanID(id, subAgentID, sa.GetRuns()))
	}
	if stepID != "" {
		for _, s := range st.GetSteps() {
			if s.GetStep().GetId() == stepID {
				return spanIn(id, stepSpanID(id, stepID, s.GetAttempt()))
			}
		}
	}
	return rootParent(id)
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
		case *messages.Event_SessionFailed:
			g.endRoot(evs, i, prev, st, p.SessionFailed.GetError())
		case *messages.Event_SessionCancelled:
			g.endRoot(evs, i, prev, st, "cancelled: "+p.SessionCancelled.GetReason())
		}
	}
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
	g.emitSpan("session.step", rootParent(g.id), stepSpanID(g.id, stepID, attempt), start, end, errText,
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
	parent := rootParent(g.id)
	for _, s := range st.GetSteps() {
		if s.GetStep().GetId() == sa.GetStepId() {
			parent = spanIn(g.id, stepSpanID(g.id, sa.GetStepId(), s.GetAttempt()))
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
	g.emitSpan("invoke_agent "+orchestratorAgent, trace.SpanContext{}, rootSpanID(g.id), st.GetStartedAtUnixNano(), end, errText,
		semconv.GenAIOperationNameInvokeAgent,
		semconv.GenAIAgentName(orchestratorAgent),
		semconv.GenAIConversationID(g.id),
		semconv.GenAIRequestModel(st.GetConfig().GetModel()),
		semconv.GenAIUsageInputTokensKey.Int64(int64(st.GetUsage().GetInputTokens())),
		semconv.GenAIUsageOutputTokensKey.Int64(int64(st.GetUsage().GetOutputTokens())),
		attribute.String("fathom.session_id", g.id),
		attribute.String("fathom.status", st.GetStatus().String()),
		attribute.Float64("fathom.cost_usd", st.GetCostUsd()),
		attribute.Int("fathom.steps", len(st.GetSteps())),
		attribute.Int("fathom.llm_calls", int(st.GetLlmCalls())),
	)
}

// emitSpan emits a finished span with id sid under parent (the trace's root when parent
// is invalid), from start to end (unix nanos; an unknown start is end).
func (g *Grain) emitSpan(name string, parent trace.SpanContext, sid trace.SpanID, start, end int64, errText string, attrs ...attribute.KeyValue) {
	if start <= 0 || start > end {
		start = end
	}
	ctx := telemetry.WithIDs(withParent(parent), sessionTraceID(g.id), sid)
	opts := []trace.SpanStartOption{trace.WithTimestamp(time.Unix(0, start)), trace.WithAttributes(attrs...)}
	if !parent.IsValid() {
		opts = append(opts, trace.WithNewRoot())
	}
	_, span := g.deps.Tracer.Start(ctx, name, opts...)
	if errText != "" {
		span.SetStatus(codes.Error, errText)
	}
	span.End(trace.WithTimestamp(time.Unix(0, end)))
	if sc := span.SpanContext(); sc.IsValid() && sc.SpanID() != sid && !g.deps.traceIDsWarned.Swap(true) {
		g.log.Warn("the tracer provider does not use telemetry.IDGenerator: a session's long spans (invoke_agent, session.step) get random ids and their children point at parents no backend receives")
	}
}
