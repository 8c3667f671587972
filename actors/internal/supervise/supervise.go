// Package supervise is the supervision shell shared by the node's supervisors that
// declare their tree as data (the sandbox pool, the MCP supervisor): a table of rules,
// each naming the children it covers, the strategy built from the supervisor's
// configuration and the reason for the choice; a strategy that routes each failure to
// the first rule matching the failing child's name; and Backoff, a restart strategy
// whose delay doubles per recent failure up to a cap.
package supervise

import (
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// Rule says how a supervisor handles one kind of child, and why.
type Rule[C any] struct {
	// Child matches the children the rule covers, by name (the last element of the id).
	Child func(name string) bool
	// Strategy builds the Proto.Actor strategy from the supervisor's configuration.
	Strategy func(C) actor.SupervisorStrategy
	// Why is the reason for the choice (documentation that lives with the code).
	Why string
}

// Prefix matches the children whose name starts with p.
func Prefix(p string) func(string) bool {
	return func(name string) bool { return strings.HasPrefix(name, p) }
}

// Any matches every child.
func Any(string) bool { return true }

// ByChild applies the strategy of the first rule matching the failing child's name, and
// Proto.Actor's default strategy to a child no rule matches.
type ByChild struct {
	match    []func(string) bool
	built    []actor.SupervisorStrategy
	fallback actor.SupervisorStrategy
}

var _ actor.SupervisorStrategy = (*ByChild)(nil)

// New builds every rule's strategy from cfg.
func New[C any](rules []Rule[C], cfg C) *ByChild {
	s := &ByChild{fallback: actor.DefaultSupervisorStrategy()}
	for _, r := range rules {
		s.match = append(s.match, r.Child)
		s.built = append(s.built, r.Strategy(cfg))
	}
	return s
}

// HandleFailure implements actor.SupervisorStrategy.
func (s *ByChild) HandleFailure(system *actor.ActorSystem, sup actor.Supervisor, child *actor.PID, rs *actor.RestartStatistics, reason, msg any) {
	name := child.Id[strings.LastIndexByte(child.Id, '/')+1:]
	for i, match := range s.match {
		if match(name) {
			s.built[i].HandleFailure(system, sup, child, rs, reason, msg)
			return
		}
	}
	s.fallback.HandleFailure(system, sup, child, rs, reason, msg)
}

// Backoff restarts a failed child after Initial × 2^(recent failures − 1), at most Max;
// failures older than Window are forgotten. It never stops the child for good. The
// restart is published as a SupervisorEvent, as Proto.Actor's own strategies do.
type Backoff struct {
	Initial, Max, Window time.Duration
}

var _ actor.SupervisorStrategy = (*Backoff)(nil)

// HandleFailure implements actor.SupervisorStrategy.
func (s *Backoff) HandleFailure(system *actor.ActorSystem, sup actor.Supervisor, child *actor.PID, rs *actor.RestartStatistics, reason, _ any) {
	if rs.NumberOfFailures(s.Window) == 0 {
		rs.Reset()
	}
	rs.Fail()
	d := s.Delay(rs.FailureCount())
	time.AfterFunc(d, func() {
		system.EventStream.Publish(&actor.SupervisorEvent{Child: child, Reason: reason, Directive: actor.RestartDirective})
		sup.RestartChildren(child)
	})
}

// Delay is the wait before the restart after the n-th recent failure.
func (s *Backoff) Delay(n int) time.Duration {
	d := s.Initial
	for i := 1; i < n && d < s.Max; i++ {
		d *= 2
	}
	return min(d, s.Max)
}
