package main

import (
	"strings"
	"testing"

	"github.com/fathom-agents/fathom/messages"
)

// TestPrinterShowsARevisedPlan: a re-plan is shown with the steps it replaced and the
// new ones numbered after the kept steps, and later steps count against the new total.
func TestPrinterShowsARevisedPlan(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	p := newPrinter(&b, false)
	steps := func(ids ...string) []*messages.PlanStep {
		var out []*messages.PlanStep
		for _, id := range ids {
			out = append(out, &messages.PlanStep{Id: id, Type: "research", Description: "do " + id})
		}
		return out
	}
	for _, ev := range []*messages.Event{
		{Seq: 2, Payload: &messages.Event_PlanCreated{PlanCreated: &messages.PlanCreated{PlanId: "plan-1", Steps: steps("a", "r", "w")}}},
		{Seq: 9, Payload: &messages.Event_LlmRequested{LlmRequested: &messages.LlmRequested{CallId: "replan-1", StepId: "r", Purpose: "replan"}}},
		{Seq: 11, Payload: &messages.Event_PlanRevised{PlanRevised: &messages.PlanRevised{PlanId: "plan-2", Revision: 1, FailedStepId: "r",
			ReplacedStepIds: []string{"r", "w"}, Steps: steps("r2", "w2", "v2")}}},
		{Seq: 12, Payload: &messages.Event_StepStarted{StepStarted: &messages.StepStarted{StepId: "r2", StepIndex: 1, StepType: "research", Description: "do r2"}}},
	} {
		if err := p.print(ev); err != nil {
			t.Fatal(err)
		}
	}
	for _, want := range []string{
		"… re-planning the remaining work after step r failed\n",
		"↻ plan revised (plan-2) after step r failed: r, w replaced by 3 new step(s), 4 in all\n  2. [research] do r2\n  3. [research] do w2\n  4. [research] do v2\n",
		"… step 2/4 (research): do r2\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Fatalf("output lacks %q:\n%s", want, b.String())
		}
	}
}

// TestPrinterShowsMemoryWrites: fathom run's text output shows what a session
// remembered and forgot.
func TestPrinterShowsMemoryWrites(t *testing.T) {
	var b strings.Builder
	p := newPrinter(&b, false)
	for _, ev := range []*messages.Event{
		{Seq: 7, Payload: &messages.Event_MemorySaved{MemorySaved: &messages.MemorySaved{MemoryId: "mem-1", UserId: "U", Text: "The locker code is LOCK-4417"}}},
		{Seq: 8, Payload: &messages.Event_MemoryDeleted{MemoryDeleted: &messages.MemoryDeleted{MemoryId: "mem-0", UserId: "U"}}},
	} {
		if err := p.print(ev); err != nil {
			t.Fatal(err)
		}
	}
	for _, want := range []string{"◆ remembered mem-1 for user U: The locker code is LOCK-4417\n", "◇ forgot mem-0 of user U\n"} {
		if !strings.Contains(b.String(), want) {
			t.Fatalf("output lacks %q:\n%s", want, b.String())
		}
	}
}
