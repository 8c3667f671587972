package session

import (
	"time"

	"github.com/asynkron/protoactor-go/cluster"

	"github.com/fathom-agents/fathom/actors/session/core"
	"github.com/fathom-agents/fathom/messages"
	"github.com/fathom-agents/fathom/webhooks"
)

// Webhook delivery. The notifications due are in the state (core/webhook.go); the grain
// hands the ones whose time came to the node's sender (Deps.Webhooks), one attempt of
// each at a time, and records each outcome as webhook_delivered or webhook_failed. A
// timer wakes it for the next attempt while it is active; once passivated, the session
// index's due time (core.DueAt) has the reactivator activate it again, on this node or
// another, which resumes from the journal.

// Messages of webhook delivery. They never leave the process.
type (
	// webhookDueMsg fires when a pending notification's next attempt is due.
	webhookDueMsg struct{}
	// webhookDone reports an attempt.
	webhookDone struct {
		id      string
		attempt uint32
		outcome webhooks.Outcome
	}
)

// webhookState is a grain's side of its session's webhook delivery.
type webhookState struct {
	// inflight are the attempts handed to the sender, by webhook id.
	inflight map[string]uint32
	timer    *time.Timer
	timerAt  int64
}

// busyRetry is the wait before asking a full sender queue again.
const busyRetry = time.Second

// kickWebhooks submits the pending notifications that are due and not in flight, and
// sets the timer of the next one.
func (g *Grain) kickWebhooks(ctx cluster.GrainContext) {
	s := g.deps.Webhooks
	pending := g.state.GetWebhooks()
	if s == nil || len(pending) == 0 {
		return
	}
	now := g.deps.Now().UnixNano()
	self, root := ctx.Self(), ctx.ActorSystem().Root
	var next int64
	later := func(at int64) {
		if next == 0 || at < next {
			next = at
		}
	}
	for _, w := range pending {
		if _, busy := g.hooks.inflight[w.GetWebhookId()]; busy {
			continue
		}
		if at := w.GetNextAttemptUnixNano(); at > now {
			later(at)
			continue
		}
		id, attempt := w.GetWebhookId(), w.GetAttempts()+1
		a, due := core.WebhookAttempt(g.state, w)
		if !due {
			continue
		}
		ok := s.Submit(a, func(o webhooks.Outcome) {
			root.Send(self, &webhookDone{id: id, attempt: attempt, outcome: o})
		})
		if !ok {
			later(now + int64(busyRetry))
			continue
		}
		if g.hooks.inflight == nil {
			g.hooks.inflight = map[string]uint32{}
		}
		g.hooks.inflight[id] = attempt
	}
	if next != 0 && next != g.hooks.timerAt {
		g.hooks.timerAt = next
		g.hooks.timer = resetTimer(g.hooks.timer, time.Until(time.Unix(0, next)), func() { root.Send(self, &webhookDueMsg{}) })
	}
}

// onWebhookMsg handles the messages of webhook delivery; it reports false for others.
func (g *Grain) onWebhookMsg(ctx cluster.GrainContext) bool {
	switch msg := ctx.Message().(type) {
	case *webhookDueMsg:
		g.hooks.timerAt = 0
		g.onDecision(ctx, "webhook due", func() []*messages.Event { return nil })
	case *webhookDone:
		delete(g.hooks.inflight, msg.id)
		if msg.outcome.Err != nil {
			g.log.Info("webhook attempt failed", "webhook_id", msg.id, "attempt", msg.attempt, "status", msg.outcome.StatusCode, "error", msg.outcome.Err)
		}
		g.onDecision(ctx, "webhook "+msg.id, func() []*messages.Event {
			return core.DecideWebhookOutcome(g.state, msg.id, msg.attempt, msg.outcome, g.deps.Webhooks.Config(), g.deps.Now())
		})
	default:
		return false
	}
	return true
}

// webhooksBusy reports whether an attempt is in flight (its outcome must find the
// activation).
func (g *Grain) webhooksBusy() bool { return len(g.hooks.inflight) > 0 }

// stopWebhooks stops the timer of the next attempt.
func (g *Grain) stopWebhooks() {
	if g.hooks.timer != nil {
		g.hooks.timer.Stop()
	}
	g.hooks.timerAt = 0
}
