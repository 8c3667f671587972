package session

import (
	"context"
	"crypto/sha256"
	"log/slog"
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

// One trace per run of a session.
//
// A session outlives its activations: the grain passivates, its node stops, it moves to
// another member, and every activation makes spans. None of them can hold a long span in
// memory, so the ids are derived instead: the trace id and the span ids of the session's
// long spans — each run's invoke_agent root, each step attempt, each sub-agent run — are
// hashes of the session id (and the run, the step id and attempt, the sub-agent id and
// run). Every short span (an LLM call and its chat span, a tool call) is started under
// the derived id of the long span it belongs to, whichever node makes it. A long span is
// emitted once, with its derived id and its recorded start time, by the activation that
// commits the event ending it (step_completed or step_failed, subagent_completed, the
// run's wait or the session's terminal event): its children were exported long before,
// and a backend joins them when the parent arrives. The span ids reach the SDK through
// telemetry.IDGenerator, which the node's tracer provider uses.
//
// Runs. A session can live for days, mostly waiting for a human, and a span is exported
// only when it ends: one root over the whole session would leave its children without a
// parent in the backend for as long as the session lives, or end before them. So a
// session is one trace per run. A run is the session working: the first starts with the
// session (or the fork) and each later one with the event that makes a stopped session
// (waiting for a human, interrupted, ended) work again or end — a human's answer, an
// approval, a resume, a follow-up message, a cancel while it waits (SessionState's
// run_started_seq and run_started_at_unix_nano, set by core.Apply). A run ends when the
// session stops: at a wait (awaiting_human, interrupted) or at its end. Its root
// invoke_agent orchestrator span covers exactly that, and is emitted then, so no span of
// the run outlives its root. A later run's root is the root of a trace of its own, with
// a link to the first run's root (fathom.run.started_seq says which run it is); the first
// run's trace keeps the session's trace id (a fork's links to its source's first run,
// with fathom.fork.source_session_id and fathom.fork.source_seq). A step attempt or a
// sub-agent run that a wait cuts in two is two spans, one in each run's trace (the first
// with fathom.split_by naming the wait). The activation's span (session.activation, the
// span of its log lines) covers the part of an activation that works on one run. An
// activation that stops while its session works (passivation, node shutdown) emits no
// root: the run goes on in the next activation, which emits it when the run ends. The run
// that ends the session carries the session's totals (fathom.status, tokens, cost).
//
// The shape of one run's trace:
//
//	invoke_agent orchestrator            (the run's root: gen_ai.conversation.id = session id)
//	├── session.activation               (one per activation working on the run, fathom.host)
//	├── session.plan / session.replan    (an orchestrator LLM call) └── chat MODEL
//	└── session.step                     (a plan step attempt, or its part in this run)
//	    ├── session.llm_call └── chat MODEL
//	    ├── execute_tool TOOL            (TRACEPARENT in the sandbox, traceparent in MCP _meta)
//	    └── invoke_agent AGENT_TYPE      (a sub-agent run: gen_ai.agent.name = agent type)
//	        ├── session.llm_call └── chat MODEL
//	        └── execute_tool TOOL

// orchestratorAgent is gen_ai.agent.name of a session's root span.
const orchestratorAgent = "orchestrator"

// sessionTraceID is the trace id of session id's first run.
func sessionTraceID(id string) trace.TraceID { return hashTraceID("fathom/trace\x00" + id) }

// runTraceID is the trace id of session id's run that began at seq run (0: the first).
func runTraceID(id string, run uint64) trace.TraceID {
	if run == 0 {
		return sessionTraceID(id)
	}
	return hashTraceID("fathom/trace\x00" + id + "\x00run\x00" + strconv.FormatUint(run, 10))
}

func hashTraceID(s string) trace.TraceID {
	h := sha256.Sum256([]byte(s))
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

// inRun adds run's name to parts (nothing for the first run: its ids are those of a
// session before runs had traces of their own).
func inRun(run uint64, parts ...string) []string {
	if run == 0 {
		return parts
	}
	return append(parts, "run", strconv.FormatUint(run, 10))
}

func rootSpanID(id string, run uint64) trace.SpanID {
	return sessionSpanID(id, inRun(run, "invoke_agent")...)
}

func stepSpanID(id, stepID string, attempt uint32, run uint64) trace.SpanID {
	return sessionSpanID(id, inRun(run, "step", stepID, strconv.FormatUint(uint64(attempt), 10))...)
}

func subAgentSpanID(id, subAgentID string, saRun uint32, run uint64) trace.SpanID {
	return sessionSpanID(id, inRun(run, "sub_agent", subAgentID, strconv.FormatUint(uint64(saRun), 10))...)
}

// spanIn is the span context of span sid of the trace of session id's run run, as a
// parent. Its sampled flag is the decision of the run's root (Deps.Sampled): every span
// of the run follows the root, whichever node makes it, so a parent-based sampler keeps
// or drops the whole trace.
func spanIn(d *Deps, id string, run uint64, sid trace.SpanID) trace.SpanContext {
	tid := runTraceID(id, run)
	var flags trace.TraceFlags
	if d == nil || d.Sampled == nil || d.Sampled(tid) {
		flags = trace.FlagsSampled
	}
	return trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: flags, Remote: true})
}

// rootParent is the parent of the spans directly under the root of session id's run.
func rootParent(d *Deps, id string, run uint64) trace.SpanContext {
	return spanIn(d, id, run, rootSpanID(id, run))
}

// callParent is the span a call of session id in state st belongs to, in the trace of
// st's run: the current run of sub-agent subAgentID when set, else the current attempt
// of step stepID when the plan has it, else the run's root.
func callParent(d *Deps, id string, st *messages.SessionState, subAgentID, stepID string) trace.SpanContext {
	run := st.GetRunStartedSeq()
	if sa := st.GetSubAgents()[subAgentID]; sa != nil {
		return spanIn(d, id, run, subAgentSpanID(id, subAgentID, sa.GetRuns(), run))
	}
	if stepID != "" {
		for _, s := range st.GetSteps() {
			if s.GetStep().GetId() == stepID {
				return spanIn(d, id, run, stepSpanID(id, stepID, s.GetAttempt(), run))
			}
		}
	}
	return rootParent(d, id, run)
}

// withParent returns a context whose span is parent (none when parent is invalid).
func withParent(parent trace.SpanContext) context.Context {
	if !parent.IsValid() {
		return context.Background()
	}
	return trace.ContextWithRemoteSpanContext(context.Background(), parent)
}

// tracer is an activation's side of its session's trace: the activation's span, whose
// ids its log lines carry while it is open, and the long spans its commits end. It is one
// of the activation's commit observers.
type tracer struct {
	deps *Deps
	id   string
	// host is the node's address.
	host string
	// baseLog is the session's logger without span ids, log the current one; setLog
	// hands the current one to the grain.
	baseLog, log *slog.Logger
	setLog       func(*slog.Logger)
	span         trace.Span
	// run and start (unix nanos) are the run and start of span.
	run   uint64
	start int64
	// seq is the seq of the last state the tracer saw (the span's fathom.seq).
	seq uint64
}

func newTracer(d *Deps, id, host string, log *slog.Logger, setLog func(*slog.Logger)) *tracer {
	return &tracer{deps: d, id: id, host: host, baseLog: log, log: log, setLog: setLog}
}

// ended emits the long spans evs end: st is the state after evs, prev the state
// before them. A run that evs begin gets the activation's span; a run they stop (at a
// wait or the session's end) gets its root, and the parts of the steps and sub-agent
// runs still open.
func (t *tracer) ended(evs []*messages.Event, prev, st *messages.SessionState) {
	if len(evs) == 0 {
		return
	}
	run := st.GetRunStartedSeq()
	began := st.GetStatus() != messages.SessionStatus_SESSION_STATUS_UNSPECIFIED &&
		(prev.GetStatus() == messages.SessionStatus_SESSION_STATUS_UNSPECIFIED || prev.GetRunStartedSeq() != run)
	if began && (t.span == nil || t.run != run) {
		t.endActivation() // an activation's span covers one run
		if core.Working(st.GetStatus()) {
			t.startActivation(run)
		}
	}
	ended := false
	for i, ev := range evs {
		switch p := ev.GetPayload().(type) {
		case *messages.Event_StepCompleted:
			t.endStep(evs, i, st, p.StepCompleted.GetStepId(), "")
		case *messages.Event_StepFailed:
			t.endStep(evs, i, st, p.StepFailed.GetStepId(), p.StepFailed.GetError())
		case *messages.Event_SubagentCompleted:
			c := p.SubagentCompleted
			errText := ""
			if c.GetResult().GetStatus() == "failed" {
				errText = c.GetResult().GetSummary()
			}
			t.endSubAgent(evs, i, st, c.GetSubAgentId(), c.GetResult().GetStatus(), errText)
		case *messages.Event_SessionCompleted:
			t.endRoot(evs, i, prev, st, "")
			ended = true
		case *messages.Event_SessionFailed:
			t.endRoot(evs, i, prev, st, p.SessionFailed.GetError())
			ended = true
		case *messages.Event_SessionCancelled:
			t.endRoot(evs, i, prev, st, "cancelled: "+p.SessionCancelled.GetReason())
			ended = true
		}
	}
	if !ended && !core.Working(st.GetStatus()) && (began || core.Working(prev.GetStatus())) {
		t.stopRun(st, evs[len(evs)-1].GetAtUnixNano())
	}
}

// runStart is when the run of a session in state st began (unix nanos).
func runStart(st *messages.SessionState) int64 {
	if t := st.GetRunStartedAtUnixNano(); t > 0 {
		return t
	}
	return st.GetStartedAtUnixNano()
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

// activated opens the activation's span when the loaded session st is new or working
// (Init, after load): a stopped session's activation has none until a run begins.
func (t *tracer) activated(st *messages.SessionState) {
	t.seq = st.GetSeq()
	if s := st.GetStatus(); s == messages.SessionStatus_SESSION_STATUS_UNSPECIFIED || core.Working(s) {
		t.startActivation(st.GetRunStartedSeq())
	}
}

// Committed implements Observer: the run's span gets the events, and the long spans they
// end are emitted.
func (t *tracer) Committed(c Commit) {
	t.seq = c.State.GetSeq()
	// A run's span (none between runs; an unsampled one drops its events): build none.
	if t.span != nil && t.span.IsRecording() {
		for _, ev := range c.Events {
			t.span.AddEvent(ev.Type(), trace.WithAttributes(attribute.Int64("fathom.seq", int64(ev.GetSeq()))))
		}
	}
	t.ended(c.Events, c.Prev, c.State)
}

// end ends the activation's span, if open (the activation ends at seq): a run still
// working goes on in the next activation, which emits its root.
func (t *tracer) end(seq uint64) {
	t.seq = max(t.seq, seq)
	t.endActivation()
}

// startActivation opens the activation's span under the root of run (if none is open);
// the activation's log lines carry its ids until it ends.
func (t *tracer) startActivation(run uint64) {
	if t.span != nil {
		return
	}
	t.run, t.start = run, t.deps.Now().UnixNano()
	_, t.span = t.deps.Tracer.Start(withParent(rootParent(t.deps, t.id, run)), "session.activation", trace.WithAttributes(
		attribute.String("fathom.session_id", t.id),
		attribute.String("fathom.host", t.host),
		attribute.Int64("fathom.run.started_seq", int64(run)),
	), trace.WithTimestamp(time.Unix(0, t.start)))
	t.log = t.baseLog
	if sc := t.span.SpanContext(); sc.IsValid() {
		for _, a := range telemetry.LogAttrs(sc) {
			t.log = t.log.With(a)
		}
	}
	t.setLog(t.log)
}

// endActivation ends the activation's span, if open, now or, given the end of its run
// (unix nanos), then: the run's root ends at its last event's time, recorded before the
// events were durable, and the span must not outlive it.
func (t *tracer) endActivation(runEnd ...int64) {
	if t.span == nil {
		return
	}
	t.span.SetAttributes(attribute.Int64("fathom.seq", int64(t.seq)))
	var opts []trace.SpanEndOption
	if len(runEnd) > 0 {
		opts = append(opts, trace.WithTimestamp(time.Unix(0, max(runEnd[0], t.start))))
	}
	t.span.End(opts...)
	t.span = nil
	t.log = t.baseLog
	t.setLog(t.log)
}

// stopRun ends the run of st at a wait, at end (unix nanos): the parts of its open steps
// and sub-agent runs, then its root.
func (t *tracer) stopRun(st *messages.SessionState, end int64) {
	by := runEndedBy(st.GetStatus())
	for _, s := range st.GetSteps() {
		if s.GetStatus() == messages.StepStatus_STEP_STATUS_IN_PROGRESS && s.GetAttempt() > 0 {
			t.emitStep(st, s, s.GetStep().GetId(), s.GetAttempt(), s.GetStartedAtUnixNano(), end, "",
				attribute.String("fathom.split_by", by))
		}
	}
	for _, sa := range st.GetSubAgents() {
		if sa.GetRunning() {
			t.emitSubAgent(st, sa, sa.GetRuns(), sa.GetRunStartedAtUnixNano(), end, "", "",
				attribute.String("fathom.split_by", by))
		}
	}
	t.endRun(st, end, by, "")
}

// endRun emits the root of st's run, ending at end (unix nanos), and ends the
// activation's span.
func (t *tracer) endRun(st *messages.SessionState, end int64, endedBy, errText string) {
	run := st.GetRunStartedSeq()
	if !t.records(run) {
		t.endActivation(end)
		return
	}
	attrs := []attribute.KeyValue{
		semconv.GenAIOperationNameInvokeAgent,
		semconv.GenAIAgentName(orchestratorAgent),
		semconv.GenAIConversationID(t.id),
		semconv.GenAIRequestModel(st.GetConfig().GetModel()),
		semconv.GenAIUsageInputTokensKey.Int64(int64(st.GetUsage().GetInputTokens())),
		semconv.GenAIUsageOutputTokensKey.Int64(int64(st.GetUsage().GetOutputTokens())),
		attribute.String("fathom.session_id", t.id),
		attribute.String("fathom.status", st.GetStatus().String()),
		attribute.String("fathom.run.ended_by", endedBy),
		attribute.Int64("fathom.run.started_seq", int64(run)),
		attribute.Float64("fathom.cost_usd", st.GetCostUsd()),
		attribute.Int("fathom.steps", len(st.GetSteps())),
		attribute.Int("fathom.llm_calls", int(st.GetLlmCalls())),
	}
	var opts []trace.SpanStartOption
	if run != 0 {
		first := []attribute.KeyValue{attribute.String("fathom.link", "first_run")}
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: rootParent(t.deps, t.id, 0), Attributes: first}))
	} else if f := st.GetForkedFrom(); f != nil && f.GetSourceSessionId() != "" {
		fork := []attribute.KeyValue{
			attribute.String("fathom.fork.source_session_id", f.GetSourceSessionId()),
			attribute.Int64("fathom.fork.source_seq", int64(f.GetSourceSeq())),
		}
		attrs = append(attrs, fork...)
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: rootParent(t.deps, f.GetSourceSessionId(), 0), Attributes: fork}))
	}
	t.emitSpanWith("invoke_agent "+orchestratorAgent, run, trace.SpanContext{}, rootSpanID(t.id, run), runStart(st), end, errText,
		append(opts, trace.WithAttributes(attrs...))...)
	t.endActivation(end)
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

func (t *tracer) endStep(evs []*messages.Event, i int, st *messages.SessionState, stepID, errText string) {
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
	t.emitStep(st, step, stepID, attempt, start, evs[i].GetAtUnixNano(), errText)
}

// emitStep emits the part of a step attempt in st's run: from start (or the run's
// start, if later) to end.
func (t *tracer) emitStep(st *messages.SessionState, step *messages.StepState, stepID string, attempt uint32, start, end int64, errText string, extra ...attribute.KeyValue) {
	run := st.GetRunStartedSeq()
	if !t.records(run) {
		return
	}
	t.emitSpan("session.step", run, rootParent(t.deps, t.id, run), stepSpanID(t.id, stepID, attempt, run), max(start, runStart(st)), end, errText,
		append([]attribute.KeyValue{
			semconv.GenAIConversationID(t.id),
			attribute.String("fathom.session_id", t.id),
			attribute.String("fathom.step_id", stepID),
			attribute.String("fathom.step_type", step.GetStep().GetType()),
			attribute.Int("fathom.step.attempt", int(attempt)),
		}, extra...)...)
}

func (t *tracer) endSubAgent(evs []*messages.Event, i int, st *messages.SessionState, subID, status, errText string) {
	sa := st.GetSubAgents()[subID]
	saRun, start := runOf(evs, i, func(ev *messages.Event) bool {
		return ev.GetSubagentStarted() != nil && ev.GetSubagentStarted().GetSubAgentId() == subID
	},
		sa.GetRuns(), sa.GetRunStartedAtUnixNano())
	t.emitSubAgent(st, sa, saRun, start, evs[i].GetAtUnixNano(), status, errText)
}

// emitSubAgent emits the part of a sub-agent's run saRun in st's run: from start (or the
// run's start, if later) to end.
func (t *tracer) emitSubAgent(st *messages.SessionState, sa *messages.SubagentState, saRun uint32, start, end int64, status, errText string, extra ...attribute.KeyValue) {
	run := st.GetRunStartedSeq()
	if !t.records(run) {
		return
	}
	parent := rootParent(t.deps, t.id, run)
	for _, s := range st.GetSteps() {
		if s.GetStep().GetId() == sa.GetStepId() {
			parent = spanIn(t.deps, t.id, run, stepSpanID(t.id, sa.GetStepId(), s.GetAttempt(), run))
		}
	}
	attrs := []attribute.KeyValue{
		semconv.GenAIOperationNameInvokeAgent,
		semconv.GenAIAgentName(sa.GetAgentType()),
		semconv.GenAIAgentID(sa.GetId()),
		semconv.GenAIConversationID(t.id),
		semconv.GenAIRequestModel(st.GetConfig().GetModel()),
		attribute.String("fathom.session_id", t.id),
		attribute.String("fathom.sub_agent_id", sa.GetId()),
		attribute.String("fathom.step_id", sa.GetStepId()),
		attribute.Int("fathom.sub_agent.run", int(saRun)),
	}
	if status != "" {
		attrs = append(attrs, attribute.String("fathom.sub_agent.status", status))
	}
	if saRun == sa.GetRuns() {
		attrs = append(attrs,
			semconv.GenAIUsageInputTokensKey.Int64(int64(sa.GetRunUsage().GetInputTokens())),
			semconv.GenAIUsageOutputTokensKey.Int64(int64(sa.GetRunUsage().GetOutputTokens())))
	}
	t.emitSpan("invoke_agent "+sa.GetAgentType(), run, parent, subAgentSpanID(t.id, sa.GetId(), saRun, run), max(start, runStart(st)), end, errText,
		append(attrs, extra...)...)
}

// endRoot emits the root of the session's last run, ended by terminal event evs[i], and
// the spans of the steps and sub-agent runs the end cut short (running in prev, the
// state before evs, or started by evs, and not ended before evs[i]).
func (t *tracer) endRoot(evs []*messages.Event, i int, prev, st *messages.SessionState, errText string) {
	end := evs[i].GetAtUnixNano()
	for _, s := range st.GetSteps() {
		if s.GetStatus() == messages.StepStatus_STEP_STATUS_IN_PROGRESS && s.GetAttempt() > 0 {
			t.emitStep(st, s, s.GetStep().GetId(), s.GetAttempt(), s.GetStartedAtUnixNano(), end, "the session ended")
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
			t.emitSubAgent(st, sa, sa.GetRuns(), sa.GetRunStartedAtUnixNano(), end, "", "the session ended")
		}
	}
	t.endRun(st, end, runEndedBy(st.GetStatus()), errText)
}

// records reports whether the spans of the session's run are sampled (Deps.Sampled
// decides the run's root, and every span of the run follows it). A long span of a run
// nothing records is not built: its attributes, options and span object were a step's
// garbage for nothing (no exporter configured samples none).
func (t *tracer) records(run uint64) bool {
	return t.deps.Sampled == nil || t.deps.Sampled(runTraceID(t.id, run))
}

// emitSpan emits a finished span with id sid in the trace of run, under parent (the
// trace's root when parent is invalid), from start to end (unix nanos; an unknown start
// is end).
func (t *tracer) emitSpan(name string, run uint64, parent trace.SpanContext, sid trace.SpanID, start, end int64, errText string, attrs ...attribute.KeyValue) {
	t.emitSpanWith(name, run, parent, sid, start, end, errText, trace.WithAttributes(attrs...))
}

// emitSpanWith is emitSpan with start options (attributes, links); an invalid sid gets a
// random span id.
func (t *tracer) emitSpanWith(name string, run uint64, parent trace.SpanContext, sid trace.SpanID, start, end int64, errText string, extra ...trace.SpanStartOption) {
	if start <= 0 || start > end {
		start = end
	}
	ctx := telemetry.WithIDs(withParent(parent), runTraceID(t.id, run), sid)
	opts := append([]trace.SpanStartOption{trace.WithTimestamp(time.Unix(0, start))}, extra...)
	if !parent.IsValid() {
		opts = append(opts, trace.WithNewRoot())
	}
	_, span := t.deps.Tracer.Start(ctx, name, opts...)
	if errText != "" {
		span.SetStatus(codes.Error, errText)
	}
	span.End(trace.WithTimestamp(time.Unix(0, end)))
	if sc := span.SpanContext(); sc.IsValid() && sid.IsValid() && sc.SpanID() != sid && !t.deps.traceIDsWarned.Swap(true) {
		t.log.Warn("the tracer provider does not use telemetry.IDGenerator: a session's long spans (invoke_agent, session.step) get random ids and their children point at parents no backend receives")
	}
}
