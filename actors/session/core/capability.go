package core

import (
	"slices"
	"strings"

	"github.com/fathom-agents/fathom/messages"
)

// MissingOnNode refuses (FAILED_PRECONDITION) a command that would continue session s
// on a node that cannot serve it: a running sub-agent's agent, or a tool it was given
// (an MCP server's {server}__{tool} included), is not configured on this node. The
// command then changes nothing and the session keeps waiting for a node that has them
// (for fathom, the --config the session was started with). nil when the node can serve
// it, and for an ended session.
func MissingOnNode(s *messages.SessionState, cfg Config) error {
	if s.GetSeq() == 0 || Terminal(s) {
		return nil
	}
	var missing []string
	ids := make([]string, 0, len(s.GetSubAgents()))
	for id := range s.GetSubAgents() {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		sa := s.GetSubAgents()[id]
		if !sa.GetRunning() {
			continue
		}
		if _, ok := cfg.Registry().ByName(sa.GetAgentType()); !ok {
			missing = append(missing, "agent "+sa.GetAgentType()+" (sub-agent "+id+")")
			continue
		}
		if cfg.toolNames == nil { // tools unknown: not checked
			continue
		}
		for _, t := range sa.GetTools() {
			if !cfg.hasTool(t) {
				missing = append(missing, "tool "+t+" (sub-agent "+id+")")
			}
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return refuse(messages.ErrorReason_FAILED_PRECONDITION,
		"session %s needs %s, which this node does not have: nothing was changed and the session keeps waiting. "+
			"Send the command to a node configured as the one that started it (for fathom: the same --config)",
		s.GetSessionId(), strings.Join(missing, ", "))
}
