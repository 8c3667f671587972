package core

import (
	"strings"
	"testing"

	"github.com/fathom-agents/fathom/messages"
)

// replannedRun is a session whose first plan call fails retryably, whose step f fails
// once retryably and then for good, and whose plan is revised (f and p replaced by n).
func replannedRun() []*messages.Event {
	step := func(id string, deps ...string) *messages.PlanStep {
		return &messages.PlanStep{Id: id, Type: "custom", Description: "do " + id, Dependencies: deps}
	}
	evs := []*messages.Event{
		{Payload: &messages.Event_SessionStarted{SessionStarted: &messages.SessionStarted{Goal: "g"}}},
		{Payload: &messages.Event_LlmRequested{LlmRequested: &messages.LlmRequested{CallId: "plan-1", Purpose: "plan"}}},
		{Payload: &messages.Event_PlanFailed{PlanFailed: &messages.PlanFailed{CallId: "plan-1", Error: "503", Retryable: true, RetryAtUnixNano: 1, Attempt: 1}}},
		{Payload: &messages.Event_LlmRequested{LlmRequested: &messages.LlmRequested{CallId: "plan-2", Purpose: "plan"}}},
		{Payload: &messages.Event_LlmResponded{LlmResponded: &messages.LlmResponded{CallId: "plan-2", CostUsd: 0.01,
			Usage: &messages.Usage{InputTokens: 80, OutputTokens: 20, TotalTokens: 100}}}},
		{Payload: &messages.Event_PlanCreated{PlanCreated: &messages.PlanCreated{PlanId: "plan-1", Steps: []*messages.PlanStep{step("a"), step("f", "a"), step("p", "f")}}}},
		{Payload: &messages.Event_StepStarted{StepStarted: &messages.StepStarted{StepId: "a", StepIndex: 0, StepType: "custom", Attempt: 1}}},
		{Payload: &messages.Event_StepCompleted{StepCompleted: &messages.StepCompleted{StepId: "a", StepIndex: 0, Output: "ok"}}},
		{Payload: &messages.Event_StepStarted{StepStarted: &messages.StepStarted{StepId: "f", StepIndex: 1, StepType: "custom", Attempt: 1}}},
		{Payload: &messages.Event_StepFailed{StepFailed: &messages.StepFailed{StepId: "f", StepIndex: 1, Error: "boom", Retryable: true, RetryAtUnixNano: 1, Attempt: 1}}},
		{Payload: &messages.Event_StepStarted{StepStarted: &messages.StepStarted{StepId: "f", StepIndex: 1, StepType: "custom", Attempt: 2}}},
		{Payload: &messages.Event_StepFailed{StepFailed: &messages.StepFailed{StepId: "f", StepIndex: 1, Error: "boom again", Attempt: 2}}},
		{Payload: &messages.Event_PlanRevised{PlanRevised: &messages.PlanRevised{PlanId: "plan-2", Revision: 1, Reason: "boom again", FailedStepId: "f",
			ReplacedStepIds: []string{"f", "p"}, Steps: []*messages.PlanStep{step("n", "a")}}}},
		{Payload: &messages.Event_StepStarted{StepStarted: &messages.StepStarted{StepId: "n", StepIndex: 1, StepType: "custom", Attempt: 1}}},
		{Payload: &messages.Event_StepCompleted{StepCompleted: &messages.StepCompleted{StepId: "n", StepIndex: 1, Output: "done"}}},
		{Payload: &messages.Event_SessionCompleted{SessionCompleted: &messages.SessionCompleted{Result: "done"}}},
	}
	for i, ev := range evs {
		ev.Seq, ev.SessionId, ev.AtUnixNano = uint64(i+1), "g1", int64(i+1)*1e9
	}
	return evs
}

func spansOf(g *Gantt, kind, step string) []Span {
	var out []Span
	for _, s := range g.Spans {
		if s.Kind == kind && s.StepID == step {
			out = append(out, s)
		}
	}
	return out
}

func nodes(v PlanVersion) string {
	var out []string
	for _, n := range v.Steps {
		out = append(out, n.ID+"="+n.Status+"<"+strings.Join(n.Dependencies, "+"))
	}
	return strings.Join(out, " ")
}

// TestGanttBarsVersionsAndCost: the Gantt's bars start and end at the events that
// opened and closed them (a retried step has a bar per attempt, the retry marked), the
// plan's versions carry their steps' dependencies and the statuses they had when they
// were replaced, and the cost adds up per agent and in total.
func TestGanttBarsVersionsAndCost(t *testing.T) {
	evs := replannedRun()
	g, err := GanttOf("g1", evs)
	if err != nil {
		t.Fatal(err)
	}
	if g.Seq != 16 || g.Status != "completed" || g.StartUnixNano != 1e9 || g.EndUnixNano != 16e9 {
		t.Fatalf("gantt head: seq %d status %s axis %d..%d", g.Seq, g.Status, g.StartUnixNano, g.EndUnixNano)
	}
	if a := spansOf(g, SpanStep, "a"); len(a) != 1 || a[0].StartUnixNano != 7e9 || a[0].EndUnixNano != 8e9 || a[0].Status != "completed" {
		t.Fatalf("step a's bars: %+v", a)
	}
	f := spansOf(g, SpanStep, "f")
	if len(f) != 2 || f[0].Retry || !f[1].Retry || f[1].Attempt != 2 || f[0].Status != "failed" || f[1].StartSeq != 11 || f[1].EndSeq != 12 {
		t.Fatalf("step f's bars: %+v", f)
	}
	if p := spansOf(g, SpanPlan, ""); len(p) != 1 || p[0].StartSeq != 2 || p[0].EndSeq != 6 {
		t.Fatalf("the plan's bar: %+v", p)
	}
	llm := spansOf(g, SpanLLM, "")
	if len(llm) != 2 || llm[0].Status != "failed" || llm[1].Tokens != 100 || llm[1].CostUSD != 0.01 {
		t.Fatalf("the plan calls: %+v", llm)
	}
	var kinds []string
	for _, m := range g.Marks {
		kinds = append(kinds, m.Kind)
	}
	if strings.Join(kinds, ",") != "retry,retry,replan,end" {
		t.Fatalf("marks %v", g.Marks)
	}
	if len(g.Plans) != 2 {
		t.Fatalf("plan versions: %+v", g.Plans)
	}
	if got := nodes(g.Plans[0]); got != "a=completed< f=failed<a p=pending<f" {
		t.Fatalf("version 1: %s", got)
	}
	if got := nodes(g.Plans[1]); got != "a=completed< n=completed<a" || g.Plans[1].PlanID != "plan-2" || g.Plans[1].Seq != 13 {
		t.Fatalf("version 2: %s (%+v)", got, g.Plans[1])
	}
	if len(g.Agents) != 1 || g.Agents[0].Agent != "orchestrator" || g.Agents[0].LLMCalls != 2 || g.Agents[0].TotalTokens != 100 ||
		g.Total.TotalTokens != 100 || g.Total.CostUSD != 0.01 {
		t.Fatalf("agents %+v total %+v", g.Agents, g.Total)
	}

	// Through seq 10 (f's first attempt failed): nothing later, f's retry not yet run,
	// one version whose statuses are those at seq 10.
	past, err := GanttOf("g1", evs[:10])
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range past.Spans {
		if s.StartSeq > 10 || s.EndSeq > 10 {
			t.Fatalf("a bar from after seq 10: %+v", s)
		}
	}
	if len(past.Plans) != 1 || nodes(past.Plans[0]) != "a=completed< f=failed<a p=pending<f" || past.Status != "executing" {
		t.Fatalf("at seq 10: %s, %+v", past.Status, past.Plans)
	}
	if _, err := GanttOf("g1", evs[1:]); err == nil {
		t.Fatal("a stream that does not start at seq 1 was folded")
	}
}

// TestGanttOfTheDemo: the recorded demo run has a bar per step with the times of its
// step_started and step_completed, a sub-agent bar inside each, and one plan version
// with the demo's dependency edges.
func TestGanttOfTheDemo(t *testing.T) {
	id, evs := readDemo(t)
	g, err := GanttOf(id, evs)
	if err != nil {
		t.Fatal(err)
	}
	at := map[uint64]int64{}
	for _, ev := range evs {
		at[ev.GetSeq()] = ev.GetAtUnixNano()
	}
	steps := 0
	for _, s := range g.Spans {
		if s.EndSeq == 0 || s.Status == "open" {
			t.Fatalf("open bar in a completed run: %+v", s)
		}
		if s.StartUnixNano != at[s.StartSeq] || s.EndUnixNano != at[s.EndSeq] {
			t.Fatalf("bar %s: times %d..%d, events' %d..%d", s.ID, s.StartUnixNano, s.EndUnixNano, at[s.StartSeq], at[s.EndSeq])
		}
		if s.Kind == SpanStep {
			steps++
			if sa := spansOf(g, SpanSubagent, s.StepID); len(sa) != 1 || sa[0].StartSeq < s.StartSeq || sa[0].EndSeq > s.EndSeq {
				t.Fatalf("step %s's sub-agent bars: %+v", s.StepID, sa)
			}
		}
	}
	if steps != 4 || len(g.Plans) != 1 || nodes(g.Plans[0]) != "s1=completed< s2=completed<s1 s3=completed<s1 s4=completed<s2+s3" {
		t.Fatalf("%d step bars, plans %+v", steps, g.Plans)
	}
	var sum Cost
	for _, a := range g.Agents {
		sum.add(a.Cost)
	}
	if sum.LLMCalls != g.Total.LLMCalls || sum.TotalTokens != g.Total.TotalTokens {
		t.Fatalf("agents add up to %+v, total %+v", sum, g.Total)
	}
}
