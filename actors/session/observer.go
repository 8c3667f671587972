package session

import (
	"errors"
	"log/slog"
	"strings"

	"github.com/fathom-agents/fathom/actors/session/core"
	"github.com/fathom-agents/fathom/memory"
	"github.com/fathom-agents/fathom/messages"
	"github.com/fathom-agents/fathom/persistence"
)

// Commit observers. What follows a durable append (the live feed, the cluster topics, the
// metrics, the quotas' usage, the embedding of messages, the lifecycle log lines, the
// trace, the lease) is not the grain's business: each is an Observer told of the commit.
// The node gives its observers in Deps.Observers; Register puts the grain's own in front
// (the lifecycle log, the quotas' usage); each activation adds its trace and its lease
// (trace.go, lease.go) after them. A new cross-cutting feature is a new observer.
//
// The guarantees are the commit pipeline's (pipeline.go): an observer is told of an
// append only once the journal acknowledged it (fsynced), exactly once, in the order of
// the session's appends, in the grain's mailbox before the grain handles its next
// message, and never of a replayed or a failed append; an activation that ends publishes
// its durable appends before it stops. A fenced activation's failed append reaches no
// observer.

// Commit is one durable append of a session as its observers see it. Nothing in it may
// be modified: the events and the states are the grain's.
type Commit struct {
	// SessionID is the session's id, the journal stream.
	SessionID string
	// Events are the appended events, in order.
	Events []*messages.Event
	// Bytes is the size of their journal records.
	Bytes int
	// Prev is the session's state before Events, State the state after them.
	Prev, State *messages.SessionState
	// Log is the activation's logger (with the ids of its span, trace.go).
	Log *slog.Logger
}

// Observer is told of every durable append of the sessions of a node (Deps.Observers).
// Committed runs in the grain's mailbox: it must not block (work that may wait goes to a
// bounded queue of its own, as the feed, the topics and the embed worker do) and must be
// safe for concurrent use (every grain of the node calls it).
type Observer interface {
	Committed(c Commit)
}

// ActivationObserver is an Observer also told when an activation of a session has loaded
// it (Activated: once per activation, after its first successful load) and when the
// activation ends (Deactivated, with the state it ends with).
type ActivationObserver interface {
	Observer
	Activated(sessionID string, st *messages.SessionState, log *slog.Logger)
	Deactivated(sessionID string, st *messages.SessionState, log *slog.Logger)
}

// publication tells a grain's observers of each durable append, in append order: the
// node's (Deps.Observers), then the activation's own (its snapshot policy counts the
// bytes, its trace, its lease). prev is the state before the next append (Commit.Prev).
type publication struct {
	id        string
	prev      *messages.SessionState
	observers []Observer
}

// publish tells every observer of the durable append of evs (encoded as recs) leading
// to state st, and reports whether evs record an LLM answer (the summarizer may be due).
func (p *publication) publish(evs []*messages.Event, recs []persistence.Record, st *messages.SessionState, log *slog.Logger) (answered bool) {
	c := Commit{SessionID: p.id, Events: evs, Prev: p.prev, State: st, Log: log}
	for i := range recs {
		c.Bytes += len(recs[i].Data)
	}
	for _, o := range p.observers {
		o.Committed(c)
	}
	p.prev = st
	return answers(evs)
}

// Publisher receives events right after they are durably stored, for live subscribers
// (live/feed.Feed). Publish must not block, and must not modify the events.
type Publisher interface {
	Publish(stream string, evs []*messages.Event)
}

// PublishTo is the observer handing every commit's events to p (the node's live feed).
func PublishTo(p Publisher) Observer { return publishObserver{p} }

type publishObserver struct{ p Publisher }

// Committed implements Observer.
func (o publishObserver) Committed(c Commit) { o.p.Publish(c.SessionID, c.Events) }

// lifecycleLog logs each change of a session's lifecycle at info (started, completed,
// failed, cancelled, a follow-up message, awaiting a human).
type lifecycleLog struct{}

// Committed implements Observer.
func (lifecycleLog) Committed(c Commit) {
	for _, ev := range c.Events {
		switch {
		case ev.GetSessionStarted() != nil:
			c.Log.Info("session started", "seq", ev.GetSeq(), "model", c.State.GetConfig().GetModel())
		case ev.GetSessionCompleted() != nil:
			c.Log.Info("session completed", "seq", ev.GetSeq(), "iterations", c.State.GetIterations())
		case ev.GetSessionFailed() != nil:
			c.Log.Info("session failed", "seq", ev.GetSeq(), "error", ev.GetSessionFailed().GetError())
		case ev.GetSessionCancelled() != nil:
			x := ev.GetSessionCancelled()
			c.Log.Info("session cancelled", "seq", ev.GetSeq(), "reason", x.GetReason(), "by", x.GetBy())
		case ev.GetMessageReceived() != nil:
			c.Log.Info("session message received", "seq", ev.GetSeq(), "turn", ev.GetMessageReceived().GetTurn())
		case ev.GetHitlRequested() != nil:
			h := ev.GetHitlRequested()
			c.Log.Info("session awaiting human", "seq", ev.GetSeq(), "request_id", h.GetRequestId(), "kind", h.GetKind(), "step_id", h.GetStepId())
		}
	}
}

// quotaUsage adds each stored answer's tokens and cost to its tenant's usage and tells
// of each session that ended (Deps.Quotas).
type quotaUsage struct{ q Quotas }

// Committed implements Observer.
func (o quotaUsage) Committed(c Commit) {
	tenant := c.State.GetTenant()
	for _, ev := range c.Events {
		if r := ev.GetLlmResponded(); r != nil {
			o.q.Used(tenant, core.UsageTokens(r.GetUsage()), r.GetCostUsd())
		}
		switch ev.GetPayload().(type) {
		case *messages.Event_SessionCompleted, *messages.Event_SessionFailed, *messages.Event_SessionCancelled:
			o.q.Ended(tenant)
		}
	}
}

// Embedding is the observer feeding the node's embed worker the committed messages that
// have text (stream = session id, seq = the event's seq); w must write into the vector
// store the grains search (Deps.Vectors). cc is the node's context configuration
// (Config.ContextConfig).
//
// Embedding is lazy: the semantic tier is searched only when a call's history does not
// fit its context whole (memory.Input.Search), which most sessions never reach. A
// session's messages are embedded once its history's stored tokens reach embedFrom(cc),
// a quarter of the budget by default, well before that can happen: the commit that
// takes the history there hands the whole history to w at once (embedHistory), and
// every commit after it hands its own messages, as an eager observer would. Whether a
// session is past that point is read from its state (the history's stored counts), so
// the observer keeps nothing per session. The threshold holds for system prompts up to
// half the budget; an answer whose recorded context shows more (or a history that did
// not fit) while the history is below the threshold hands the whole history again
// (crowded).
//
// An activation of a session past the threshold hands its whole history to w again.
// With reembed (a vector store that does not outlive the process, vectormem) every
// message is embedded again (upserts replace by seq), and the session's vectors are
// dropped when the activation ends, so a passivated session holds no memory on the
// node. Without it (a durable store, pgvector) the jobs are IfMissing: only the messages
// the store holds no vector for are embedded (those whose jobs a node lost before w
// stored them, a full queue refused or a failed round dropped), so a session
// catches up at its next activation without paying to embed its history twice. A full
// queue or a closed worker only leaves messages out of semantic retrieval: the observer
// never blocks or fails the session.
func Embedding(w *memory.EmbedWorker, reembed bool, cc memory.ContextConfig) ActivationObserver {
	return embedObserver{w: w, reembed: reembed, from: embedFrom(cc), recent: cc.Ratios.Recent}
}

// embedFrom is the size of a history, in stored tokens (memory.Message.Tokens), from
// which its messages are embedded: half the recent tier's share of the budget (a
// quarter of it with the default ratios). memory.BuildContext fills the recent tier
// first, and that pass reaches at least the recent share of what the system prompt and
// the reply priming leave, whatever the summary takes: a history below the recent
// share of half the budget fits whole for every system prompt up to half the budget,
// so no call searches it. With a usual system prompt (a tenth of the budget) the history
// must then grow to nearly twice that (0.45 of the budget with a summary filling its
// share, 0.72 without one) before a call can search: time for the embed worker to catch
// up with the history handed to it at once.
func embedFrom(cc memory.ContextConfig) int {
	return int(float64(cc.Budget) * cc.Ratios.Recent / 2)
}

type embedObserver struct {
	w       *memory.EmbedWorker
	reembed bool
	// from is embedFrom of the node's context configuration, recent its recent share.
	from   int
	recent float64
}

// embeds reports whether session state st's history has reached o.from stored tokens:
// its messages are embedded.
func (o embedObserver) embeds(st *messages.SessionState) bool { return o.history(st) >= o.from }

// history is the stored tokens of session state st's history (core.History's messages,
// counted without building them), read only until they reach o.from: at least o.from
// when the history is that large, else exact.
func (o embedObserver) history(st *messages.SessionState) int {
	n := 0
	if o.from <= 0 {
		return n
	}
	for _, m := range st.GetThread() {
		if n += int(m.GetTokens()); n >= o.from {
			return n
		}
	}
	for _, s := range st.GetSteps() {
		// core.InHistory, asked only of steps not completed (it compares the step's
		// type with the sub-agents' on each call: most of this loop's cost).
		if s.GetStartedSeq() == 0 || (s.GetStatus() != messages.StepStatus_STEP_STATUS_COMPLETED && !core.InHistory(s)) {
			continue
		}
		if n += int(s.GetOpeningTokens()); n >= o.from {
			return n
		}
		for _, m := range s.GetTranscript() {
			if n += int(m.GetTokens()); n >= o.from {
				return n
			}
		}
	}
	return n
}

// Activated implements ActivationObserver: it hands the history of a session past the
// threshold to the embed worker again: all of it to be embedded (reembed), else only
// what the store misses (memory.EmbedJob.IfMissing).
func (o embedObserver) Activated(id string, st *messages.SessionState, log *slog.Logger) {
	if o.embeds(st) {
		o.embedHistory(id, st, !o.reembed, log)
	}
}

// embedHistory hands session id's whole history (state st) to the embed worker: every
// message of core.History with text, and the opening message of each started step not
// yet in it (a sub-agent's step until it completes), which an eager observer would
// have embedded when the step started. With ifMissing the worker skips the messages
// the store holds (memory.EmbedJob.IfMissing).
func (o embedObserver) embedHistory(id string, st *messages.SessionState, ifMissing bool, log *slog.Logger) {
	tenant := tenantOf(st)
	var jobs []memory.EmbedJob
	add := func(seq uint64, text, role string) {
		jobs = append(jobs, memory.EmbedJob{Tenant: tenant, Stream: id, Seq: seq, Text: text, Meta: roleMeta(role), IfMissing: ifMissing})
	}
	for _, m := range core.History(st) {
		if m.Content != "" {
			add(m.Seq, m.Content, m.Role)
		}
	}
	for _, s := range st.GetSteps() {
		if s.GetStartedSeq() == 0 || core.InHistory(s) {
			continue
		}
		if text := core.OpeningMessage(st.GetGoal(), s.GetStep().GetDescription()); text != "" {
			add(s.GetStartedSeq(), text, "user")
		}
	}
	// A catch-up never crowds out the messages being recorded (many activations at once,
	// a node's reactivation after a restart, would otherwise fill the queue with histories
	// that are mostly stored already): the worker takes it when no job is queued.
	if ifMissing {
		if !o.w.CatchUp(jobs) {
			log.Debug("history catch-up deferred to the next activation: too many histories wait", "messages", len(jobs))
		}
		return
	}
	for _, j := range jobs {
		if err := o.w.Enqueue(j); err != nil {
			if !errors.Is(err, memory.ErrWorkerClosed) {
				log.Warn("history not embedded", "seq", j.Seq, "error", err)
			}
			return
		}
	}
}

// Deactivated implements ActivationObserver: it drops the session's vectors (reembed),
// queued behind the session's own embedding jobs; a full queue leaves them until the
// next activation replaces them.
func (o embedObserver) Deactivated(id string, st *messages.SessionState, log *slog.Logger) {
	if !o.reembed || st.GetSeq() == 0 {
		return
	}
	if err := o.w.Enqueue(memory.EmbedJob{Tenant: tenantOf(st), Stream: id, Drop: true}); err != nil && !errors.Is(err, memory.ErrWorkerClosed) {
		log.Debug("vectors not dropped at passivation", "error", err)
	}
}

// Committed implements Observer: below the threshold it embeds nothing (unless the
// commit records a crowded call); the commit that reaches it
// embeds the whole history; every commit after it embeds its own messages.
func (o embedObserver) Committed(c Commit) {
	if h := o.history(c.State); h < o.from {
		if o.crowded(c.Events, h) {
			o.embedHistory(c.SessionID, c.State, false, c.Log)
		}
		return
	}
	if !o.embeds(c.Prev) {
		o.embedHistory(c.SessionID, c.State, false, c.Log)
		return
	}
	for _, ev := range c.Events {
		text, role := embedText(c.State, ev)
		if text == "" {
			continue
		}
		err := o.w.Enqueue(memory.EmbedJob{Tenant: tenantOf(c.State), Stream: c.SessionID, Seq: ev.GetSeq(), Text: text, Meta: roleMeta(role)})
		if err != nil && !errors.Is(err, memory.ErrWorkerClosed) {
			c.Log.Warn("message not embedded", "seq", ev.GetSeq(), "error", err)
		}
	}
}

// crowded reports whether evs record an answer to one of the orchestrator's calls (a
// step's or a follow-up's: the calls that may search) showing that a history of h
// stored tokens, below the threshold, may stop fitting before it reaches it: the
// history did not fit that call's context whole, or what the context spent besides the
// history (system prompt, summary, reply priming) is over half the budget and the
// history has reached half the recent share of what that leaves (the threshold's own
// margin, for that call's system prompt).
func (o embedObserver) crowded(evs []*messages.Event, h int) bool {
	for _, ev := range evs {
		r := ev.GetLlmResponded()
		c := r.GetContext()
		if c.GetBudget() == 0 || r.GetSubAgentId() != "" {
			continue
		}
		if c.GetRecentCount() < c.GetHistoryCount() {
			return true
		}
		// The call's history was h less the answer recorded with it.
		budget, over := int(c.GetBudget()), int(c.GetTotalTokens())-max(h-int(r.GetTokens()), 0)
		if 2*over > budget && float64(2*h) >= o.recent*float64(budget-over) {
			return true
		}
	}
	return false
}

// roleMetas are the metadata of embedded messages of the usual roles, shared by every
// job: a map of its own per job cost each message queued for the embed worker more than
// the job's other fields. Read only: the embed worker and the vector stores never modify
// a job's metadata (vectormem interns it the same way).
var roleMetas = map[string]map[string]string{
	"user": {"role": "user"}, "assistant": {"role": "assistant"}, "tool": {"role": "tool"}, "system": {"role": "system"},
}

// roleMeta is the metadata of an embedded message of role (shared: never modify it).
func roleMeta(role string) map[string]string {
	if m, ok := roleMetas[role]; ok {
		return m
	}
	return map[string]string{"role": role}
}

// embedText is the history message ev records, with its role, in a session whose state
// is st ("" when ev records none with text).
func embedText(st *messages.SessionState, ev *messages.Event) (text, role string) {
	switch p := ev.GetPayload().(type) {
	case *messages.Event_MessageReceived:
		return p.MessageReceived.GetContent(), "user"
	case *messages.Event_StepStarted:
		return core.OpeningMessage(st.GetGoal(), p.StepStarted.GetDescription()), "user"
	case *messages.Event_LlmResponded:
		// A sub-agent's messages are its own context, not the orchestrator's history, and
		// a re-plan answer (step_id: the failed step) is not the step's ("{step}/llm-N").
		if r := p.LlmResponded; r.GetStepId() != "" && r.GetSubAgentId() == "" && strings.HasPrefix(r.GetCallId(), r.GetStepId()+"/") {
			return r.GetContent(), "assistant"
		}
	case *messages.Event_StepCompleted:
		// The output is a history message of its own: a sub-agent's hand-off or a
		// human's answer (Apply gives it the same role).
		if p.StepCompleted.GetOutputTokens() > 0 {
			role = "assistant"
			if i, ok := core.StepIndexByID(st, p.StepCompleted.GetStepId()); ok && st.GetSteps()[i].GetStep().GetType() == core.StepTypeHumanInput {
				role = "user"
			}
			return p.StepCompleted.GetOutput(), role
		}
	case *messages.Event_ToolResult:
		if p.ToolResult.GetSubAgentId() != "" {
			return "", ""
		}
		if e := p.ToolResult.GetError(); e != nil {
			return e.GetLlmText(), "tool"
		}
		return p.ToolResult.GetResult(), "tool"
	}
	return "", ""
}

// answers reports whether evs record an LLM answer (the summarizer may be due).
func answers(evs []*messages.Event) bool {
	for _, ev := range evs {
		if ev.GetLlmResponded() != nil {
			return true
		}
	}
	return false
}
