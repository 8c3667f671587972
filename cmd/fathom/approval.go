package main

import (
	"errors"
	"fmt"

	fathomapi "github.com/fathom-agents/fathom"
	"github.com/fathom-agents/fathom/actors/session/core"
)

// startError is err, a failed node start, placed in the configuration file when it is
// a tool the node does not have that the file names: an approval tool ("FILE:LINE:
// approval.tools[i]: ...") or an agent's tool that no MCP server lists ("FILE:LINE:
// agents[i].tools[j]: ..."), a usage error like every other mistake in the file.
func (f *nodeFlags) startError(err error) error {
	// The commands report the cause: "fathom: " is printed by main already.
	if fe := (*fathomapi.Error)(nil); errors.As(err, &fe) {
		err = fe.Err
	}
	if f.file == nil {
		return err
	}
	var unknown *core.UnknownApprovalToolError
	if errors.As(err, &unknown) {
		if ferr := f.file.ToolError(unknown.Tool, unknown.Error()); ferr != nil {
			return usageError("--config: %v", ferr)
		}
	}
	var agentTool *core.UnknownAgentToolError
	if errors.As(err, &agentTool) {
		msg := fmt.Sprintf("tool %q: the node has no such tool (no MCP server lists it)", agentTool.Tool)
		if ferr := f.file.AgentToolError(agentTool.Agent, agentTool.Tool, msg); ferr != nil {
			return usageError("--config: %v", ferr)
		}
	}
	return err
}
