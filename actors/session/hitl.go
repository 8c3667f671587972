package session

import (
	"time"

	"github.com/asynkron/protoactor-go/cluster"

	"github.com/fathom-agents/fathom/actors/session/core"
	"github.com/fathom-agents/fathom/messages"
)

// hitlTimer is the grain's timer for the earliest open request's deadline.
type hitlTimer struct {
	timer *time.Timer
	at    int64
}

// hitlDeadlineMsg fires when a human-input request's deadline passed.
type hitlDeadlineMsg struct{}

// kickHitl arms the timer of the earliest open request's deadline (kept in state, so a
// new activation arms it again).
func (g *Grain) kickHitl(ctx cluster.GrainContext) {
	at := core.NextHumanDeadline(g.state)
	if at == 0 || at == g.hitl.at {
		return
	}
	g.hitl.at = at
	self, root := ctx.Self(), ctx.ActorSystem().Root
	g.hitl.timer = resetTimer(g.hitl.timer, time.Until(time.Unix(0, at)), func() { root.Send(self, &hitlDeadlineMsg{}) })
}

func (g *Grain) onHitlDeadline(ctx cluster.GrainContext) {
	g.hitl.at = 0
	g.onDecision(ctx, "human input deadline", func() []*messages.Event { return core.DecideHitlDeadline(g.state, g.deps.Config, g.deps.Now()) })
}

// ProvideInput answers an open human-input request (a human_input step or an
// ask_human call). A bad answer is refused with INVALID_ARGUMENT and the request keeps
// waiting. Idempotent by command id.
func (g *Grain) ProvideInput(req *messages.ProvideInputRequest, ctx cluster.GrainContext) (*messages.CommandResponse, error) {
	defer g.guard(ctx, "ProvideInput")
	return g.continuing(ctx, req, func() ([]*messages.Event, error) {
		return core.DecideProvideInput(g.state, req, g.deps.Config, g.deps.Now())
	})
}
