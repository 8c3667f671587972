package session_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/cluster"
	"google.golang.org/protobuf/proto"

	"github.com/fathom-agents/fathom/actors/session"
	"github.com/fathom-agents/fathom/actors/session/core"
	"github.com/fathom-agents/fathom/actors/session/replay"
	"github.com/fathom-agents/fathom/messages"
	"github.com/fathom-agents/fathom/messages/sessiongrain"
)

// TestStateAtEqualsTheStateAfterEachStep checks, for several snapshot intervals, that
// the grain's StateAt(n) equals the state the session had right after its n-th step
// ended (n = 0: after planning), computed independently by folding the journal event by
// event from the start with no snapshot; and that the timeline points at those events.
func TestStateAtEqualsTheStateAfterEachStep(t *testing.T) {
	for _, every := range []uint64{1, 3, 7, 20} {
		t.Run(fmt.Sprintf("snapshot_every_%d", every), func(t *testing.T) {
			h := startHarness(t, harnessOpts{cfg: func(c *session.Config) { c.SnapshotEvery = every }})
			if _, err := h.start("tt", "c1", "time travel"); err != nil {
				t.Fatal(err)
			}
			evs := waitTerminal(t, h.j, "tt", 20*time.Second)
			// The states after each step, folded from scratch.
			// want[n] is the state right after the n-th plan step (plan order) ended; the
			// demo's code and write steps run side by side and may end in either order.
			want := make([]*messages.SessionState, 5) // plan + the demo's four steps
			s := core.NewState("tt")
			for _, ev := range evs {
				if err := core.Apply(s, ev); err != nil {
					t.Fatal(err)
				}
				switch p := ev.GetPayload().(type) {
				case *messages.Event_PlanCreated:
					want[0] = proto.Clone(s).(*messages.SessionState)
				case *messages.Event_StepCompleted:
					want[p.StepCompleted.GetStepIndex()+1] = proto.Clone(s).(*messages.SessionState)
				}
			}
			for n, w := range want {
				if w == nil {
					t.Fatalf("no state after step boundary %d", n)
				}
			}
			g := h.node.Session("tt")
			tl, err := g.Timeline(&messages.TimelineRequest{}, cluster.WithTimeout(10*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			if tl.GetPlanSeq() != want[0].GetSeq() || len(tl.GetEntries()) != 4 {
				t.Fatalf("timeline %v", tl)
			}
			for n := range want {
				got, err := g.StateAt(&messages.StateAtRequest{StepIndex: uint32(n)}, cluster.WithTimeout(10*time.Second))
				if err != nil {
					t.Fatalf("StateAt(%d): %v", n, err)
				}
				if !proto.Equal(got.GetState(), want[n]) {
					t.Fatalf("StateAt(%d) differs from the fold:\n got %v\nwant %v", n, got.GetState(), want[n])
				}
				if n > 0 {
					e := tl.GetEntries()[n-1]
					if e.GetEndedSeq() != want[n].GetSeq() || e.GetStatus() != messages.StepStatus_STEP_STATUS_COMPLETED || e.GetStartedSeq() == 0 || e.GetStartedSeq() >= e.GetEndedSeq() {
						t.Fatalf("timeline entry %d = %v, want ended at %d", n, e, want[n].GetSeq())
					}
				}
				// The journal-reading helper gives the same answer.
				direct, err := replay.StateAtStep(context.Background(), h.j, "tt", uint32(n))
				if err != nil || !proto.Equal(direct, want[n]) {
					t.Fatalf("StateAtStep(%d) = %v, %v", n, direct, err)
				}
			}
			if _, err := g.StateAt(&messages.StateAtRequest{StepIndex: uint32(len(want))}, cluster.WithTimeout(10*time.Second)); !sessiongrain.IsFailedPrecondition(err) {
				t.Fatalf("StateAt past the plan: err = %v, want FAILED_PRECONDITION", err)
			}
		})
	}
	h := startHarness(t, harnessOpts{})
	if _, err := h.node.Session("nobody").StateAt(&messages.StateAtRequest{}, cluster.WithTimeout(10*time.Second)); !sessiongrain.IsNotFound(err) {
		t.Fatalf("StateAt of an unknown session: err = %v, want NOT_FOUND", err)
	}
}
