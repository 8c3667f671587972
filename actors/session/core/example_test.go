package core_test

import (
	"errors"
	"fmt"

	"github.com/fathom-agents/fathom/actors/session/core"
	"github.com/fathom-agents/fathom/messages"
)

// Folding a session's events gives its state; an event that does not fit is an error,
// and the state stays as it was.
func Example() {
	evs := []*messages.Event{
		{Payload: &messages.Event_SessionStarted{SessionStarted: &messages.SessionStarted{Goal: "write a haiku"}}},
		{Payload: &messages.Event_PlanCreated{PlanCreated: &messages.PlanCreated{PlanId: "p1", Steps: []*messages.PlanStep{
			{Id: "draft", Type: "custom", Description: "draft the haiku"},
		}}}},
		{Payload: &messages.Event_StepStarted{StepStarted: &messages.StepStarted{StepId: "draft", StepIndex: 0, Attempt: 1}}},
		{Payload: &messages.Event_StepCompleted{StepCompleted: &messages.StepCompleted{StepId: "draft", StepIndex: 0, Output: "an old silent pond"}}},
		{Payload: &messages.Event_SessionCompleted{SessionCompleted: &messages.SessionCompleted{Result: "an old silent pond"}}},
	}
	st := core.NewState("s1")
	for i, ev := range evs {
		ev.SessionId, ev.Seq = "s1", uint64(i+1)
		if err := core.Apply(st, ev); err != nil {
			fmt.Println("fold:", err)
			return
		}
	}
	fmt.Println(st.GetStatus(), st.GetSeq(), st.GetSteps()[0].GetStatus(), core.Terminal(st))

	late := &messages.Event{SessionId: "s1", Seq: 9, Payload: &messages.Event_StepStarted{StepStarted: &messages.StepStarted{StepId: "draft"}}}
	err := core.Apply(st, late)
	fmt.Println(errors.Is(err, core.ErrBadEvent), st.GetSeq())
	// Output:
	// SESSION_STATUS_COMPLETED 5 STEP_STATUS_COMPLETED true
	// true 5
}
