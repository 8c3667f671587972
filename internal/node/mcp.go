package node

import (
	"context"
	"fmt"

	"github.com/asynkron/protoactor-go/actor"

	mcpactor "github.com/fathom-agents/fathom/actors/mcp"
	"github.com/fathom-agents/fathom/tools"
)

// startMCP connects the configured MCP servers (actors/mcp) and registers their tools in
// reg before the session grains are registered, so the models are offered them. A server
// that cannot be started or reached fails the start.
func (n *Node) startMCP(ctx context.Context, system *actor.ActorSystem, reg *tools.Registry) error {
	if len(n.cfg.MCPServers) == 0 {
		return nil
	}
	cfg := mcpactor.DefaultConfig()
	cfg.Servers, cfg.Registry, cfg.Logger = n.cfg.MCPServers, reg, n.log.With("component", "mcp")
	s, err := mcpactor.Start(ctx, system, cfg)
	if err != nil {
		return fmt.Errorf("mcp servers: %w", err)
	}
	n.mcp = s
	for _, st := range s.Status() {
		n.log.Info("mcp server connected", "mcp_server", st.Name, "transport", st.Transport, "tools", st.Tools)
	}
	return nil
}

// MCPServers reports the node's MCP servers (none without Config.MCPServers).
func (n *Node) MCPServers() []mcpactor.Status {
	if n.mcp == nil {
		return nil
	}
	return n.mcp.Status()
}
