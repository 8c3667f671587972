package mcp

import (
	"github.com/asynkron/protoactor-go/actor"

	"github.com/fathom-agents/fathom/actors/internal/supervise"
)

// supervision is the supervisor's tree, declared as data. The supervisor itself is a
// child of the root guardian (Proto.Actor's default one-for-one strategy): it holds no
// state but its children, so a crash of it is a bug that a restart repairs.
var supervision = []supervise.Rule[Config]{
	{
		Child: supervise.Any,
		Strategy: func(c Config) actor.SupervisorStrategy {
			return &supervise.Backoff{Initial: c.RestartBackoff, Max: c.MaxBackoff, Window: c.RestartWindow}
		},
		Why: "a connection fails when its server died (crashed, exited, or the HTTP session broke) or could not be " +
			"reached again; restarting it at once would spin on a server that crashes at start, so each restart " +
			"waits RestartBackoff doubled per recent failure up to MaxBackoff, the count forgotten after " +
			"RestartWindow without failures; never stop it for good: the tools must come back when the server does",
	},
}

func newSupervisor(cfg Config) *supervise.ByChild { return supervise.New(supervision, cfg) }
