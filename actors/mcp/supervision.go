package mcp

import (
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// supervisionRule says how the supervisor handles one kind of child, and why.
type supervisionRule struct {
	// child matches the children the rule covers (by name).
	child func(name string) bool
	// strategy builds the Proto.Actor strategy from the configuration.
	strategy func(Config) actor.SupervisorStrategy
	// why is the reason for the choice (documentation that lives with the code).
	why string
}

// supervision is the supervisor's tree, declared as data. The supervisor itself is a
// child of the root guardian (Proto.Actor's default one-for-one strategy): it holds no
// state but its children, so a crash of it is a bug that a restart repairs.
var supervision = []supervisionRule{
	{
		child: func(string) bool { return true },
		strategy: func(c Config) actor.SupervisorStrategy {
			return &backoffStrategy{initial: c.RestartBackoff, max: c.MaxBackoff, window: c.RestartWindow}
		},
		why: "a connection fails when its server died (crashed, exited, or the HTTP session broke) or could not be " +
			"reached again; restarting it at once would spin on a server that crashes at start, so each restart " +
			"waits RestartBackoff doubled per recent failure up to MaxBackoff, the count forgotten after " +
			"RestartWindow without failures; never stop it for good: the tools must come back when the server does",
	},
}

// childStrategy applies the supervision rule matching the failing child's name.
type childStrategy struct {
	rules    []supervisionRule
	built    []actor.SupervisorStrategy
	fallback actor.SupervisorStrategy
}

var _ actor.SupervisorStrategy = (*childStrategy)(nil)

func newSupervisor(cfg Config) *childStrategy {
	s := &childStrategy{rules: supervision, fallback: actor.DefaultSupervisorStrategy()}
	for _, r := range supervision {
		s.built = append(s.built, r.strategy(cfg))
	}
	return s
}

// HandleFailure implements actor.SupervisorStrategy.
func (s *childStrategy) HandleFailure(system *actor.ActorSystem, sup actor.Supervisor, child *actor.PID, rs *actor.RestartStatistics, reason, msg any) {
	name := child.Id[strings.LastIndexByte(child.Id, '/')+1:]
	for i, r := range s.rules {
		if r.child(name) {
			s.built[i].HandleFailure(system, sup, child, rs, reason, msg)
			return
		}
	}
	s.fallback.HandleFailure(system, sup, child, rs, reason, msg)
}

// backoffStrategy restarts a failed child after initial × 2^(recent failures − 1),
// at most max; failures older than window are forgotten. The restart is published as a
// SupervisorEvent, as Proto.Actor's own strategies do.
type backoffStrategy struct {
	initial, max, window time.Duration
}

var _ actor.SupervisorStrategy = (*backoffStrategy)(nil)

// HandleFailure implements actor.SupervisorStrategy.
func (s *backoffStrategy) HandleFailure(system *actor.ActorSystem, sup actor.Supervisor, child *actor.PID, rs *actor.RestartStatistics, reason, _ any) {
	if rs.NumberOfFailures(s.window) == 0 {
		rs.Reset()
	}
	rs.Fail()
	d := s.delay(rs.FailureCount())
	time.AfterFunc(d, func() {
		system.EventStream.Publish(&actor.SupervisorEvent{Child: child, Reason: reason, Directive: actor.RestartDirective})
		sup.RestartChildren(child)
	})
}

// delay is the wait before the restart after the n-th recent failure.
func (s *backoffStrategy) delay(n int) time.Duration {
	d := s.initial
	for i := 1; i < n && d < s.max; i++ {
		d *= 2
	}
	return min(d, s.max)
}
