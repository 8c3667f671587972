package sandbox

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/fathom-agents/fathom/actors/internal/supervise"
)

// supervision is the pool's supervision tree, declared as data. The pool itself is a
// child of the root guardian (Proto.Actor's default one-for-one strategy): a pool crash
// is a bug, and restarting it rebuilds every connection.
var supervision = []supervise.Rule[Config]{
	{
		Child: supervise.Prefix(connChildPrefix),
		Strategy: func(c Config) actor.SupervisorStrategy {
			return actor.NewExponentialBackoffStrategy(c.RestartWindow, c.RestartBackoff)
		},
		Why: "a connection fails only after MaxRetries reconnection attempts in a row (or on a bug); " +
			"restarting it at once would hammer a sandbox that is down, so each restart waits " +
			"RestartBackoff × its recent failures, and the count is forgotten after RestartWindow; " +
			"never stop it for good: the pool must come back when the sandbox does",
	},
	{
		Child: supervise.Prefix(tokenChild),
		Strategy: func(Config) actor.SupervisorStrategy {
			return actor.NewOneForOneStrategy(10, time.Minute, actor.DefaultDecider)
		},
		Why: "the token manager fails only on a bug (refresh errors are messages, retried on a timer); " +
			"restart it alone, keeping the current token in the shared store, and give up " +
			"after 10 crashes a minute rather than loop",
	},
}

func newSupervisor(cfg Config) *supervise.ByChild { return supervise.New(supervision, cfg) }
