package session

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/fathom-agents/fathom/actors/session/core"
	"github.com/fathom-agents/fathom/messages"
)

// resumeMsg asks the grain to reload if needed and start the pending call. It never
// leaves the process.
type resumeMsg struct{}

// timers are the grain's timers. The times they fire at are in the state (a retry's
// retry_at, an interrupt's deadline, the human-input requests' deadlines), so a new
// activation arms them again (arm); the reload after a failure is the activation's own
// (retryLater). Each sends the grain a message when it fires.
type timers struct {
	self *actor.PID
	root *actor.RootContext
	// retry reloads and resumes after a failure, after retryDelay (growing up to
	// maxDelay, Config.RetryBackoffMax).
	retry      *time.Timer
	retryDelay time.Duration
	maxDelay   time.Duration
	// step fires when a retryably failed plan or step is due (retry_at stepAt).
	step   *time.Timer
	stepAt int64
	// interrupt fires at the current interrupt's deadline (interruptAt).
	interrupt   *time.Timer
	interruptAt int64
	// hitl fires at the earliest open human-input request's deadline (hitlAt).
	hitl   *time.Timer
	hitlAt int64
}

// arm sets the timers of what st has due: a retry, an interrupt's deadline, the
// earliest human-input deadline. A timer already set for the same time is left alone.
func (t *timers) arm(st *messages.SessionState) {
	self, root := t.self, t.root
	due := core.DueOf(st)
	if at := due.RetryAt; at != 0 && at != t.stepAt {
		t.stepAt = at
		t.step = resetTimer(t.step, time.Until(time.Unix(0, at)), func() { root.Send(self, core.RetryDue{}) })
	}
	if at := due.InterruptAt; at != 0 && at != t.interruptAt {
		t.interruptAt = at
		t.interrupt = resetTimer(t.interrupt, time.Until(time.Unix(0, at)), func() { root.Send(self, core.InterruptDue{}) })
	}
	if at := due.HumanAt; at != 0 && at != t.hitlAt {
		t.hitlAt = at
		t.hitl = resetTimer(t.hitl, time.Until(time.Unix(0, at)), func() { root.Send(self, core.HumanDue{}) })
	}
}

// fired notes that the timer that sent msg fired: arm sets it again when its time is
// still due.
func (t *timers) fired(msg any) {
	switch msg.(type) {
	case core.RetryDue:
		t.stepAt = 0
	case core.InterruptDue:
		t.interruptAt = 0
	case core.HumanDue:
		t.hitlAt = 0
	}
}

// retryLater sends a resumeMsg (reload and resume) after a growing delay of at most
// maxDelay.
func (t *timers) retryLater() {
	t.retryDelay = min(max(2*t.retryDelay, 100*time.Millisecond), t.maxDelay)
	self, root := t.self, t.root
	t.retry = resetTimer(t.retry, t.retryDelay, func() { root.Send(self, &resumeMsg{}) })
}

// stop stops every timer.
func (t *timers) stop() {
	for _, x := range []*time.Timer{t.retry, t.step, t.interrupt, t.hitl} {
		if x != nil {
			x.Stop()
		}
	}
}

func resetTimer(t *time.Timer, d time.Duration, f func()) *time.Timer {
	if t != nil {
		t.Stop()
	}
	return time.AfterFunc(d, f)
}
