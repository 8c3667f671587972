package mcp

import (
	"fmt"

	"github.com/asynkron/protoactor-go/actor"
)

// supervisor spawns one connection actor per server, named after the server, and
// supervises them (supervision.go).
type supervisor struct {
	cfg     Config
	servers []*server
}

// Receive implements actor.Actor.
func (s *supervisor) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *actor.Started:
		s.onStarted(ctx)
	case *actor.Stopping, *actor.Stopped, *actor.Restarting, *actor.Restart, *actor.Terminated:
	default:
		s.cfg.Logger.Warn("mcp supervisor: unexpected message", "type", fmt.Sprintf("%T", msg))
	}
}

func (s *supervisor) onStarted(ctx actor.Context) {
	for _, srv := range s.servers {
		if _, err := ctx.SpawnNamed(newConnectionProps(s.cfg, srv), srv.cfg.Name); err != nil {
			srv.reportFirst(fmt.Errorf("mcp server %s: spawn connection: %w", srv.cfg.Name, err))
		}
	}
}
