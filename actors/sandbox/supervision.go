package sandbox

import (
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// supervisionRule says how the pool supervises one kind of child, and why.
type supervisionRule struct {
	// child is the prefix of the children's names the rule covers.
	child string
	// strategy builds the Proto.Actor strategy from the configuration.
	strategy func(Config) actor.SupervisorStrategy
	// why is the reason for the choice (documentation that lives with the code).
	why string
}

// supervision is the pool's supervision tree, declared as data. The pool itself is a
// child of the root guardian (Proto.Actor's default one-for-one strategy): a pool crash
// is a bug, and restarting it rebuilds every connection.
var supervision = []supervisionRule{
	{
		child: connChildPrefix,
		strategy: func(c Config) actor.SupervisorStrategy {
			return actor.NewExponentialBackoffStrategy(c.RestartWindow, c.RestartBackoff)
		},
		why: "a connection fails only after MaxRetries reconnection attempts in a row (or on a bug); " +
			"restarting it at once would hammer a sandbox that is down, so each restart waits " +
			"RestartBackoff × its recent failures, and the count is forgotten after RestartWindow; " +
			"never stop it for good: the pool must come back when the sandbox does",
	},
	{
		child: tokenChild,
		strategy: func(Config) actor.SupervisorStrategy {
			return actor.NewOneForOneStrategy(10, time.Minute, actor.DefaultDecider)
		},
		why: "the token manager fails only on a bug (refresh errors are messages, retried on a timer); " +
			"restart it alone, keeping the current token in the shared store, and give up " +
			"after 10 crashes a minute rather than loop",
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
		if strings.HasPrefix(name, r.child) {
			s.built[i].HandleFailure(system, sup, child, rs, reason, msg)
			return
		}
	}
	s.fallback.HandleFailure(system, sup, child, rs, reason, msg)
}
