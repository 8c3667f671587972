package main

import (
	"errors"

	fathomapi "github.com/fathom-agents/fathom"
	"github.com/fathom-agents/fathom/actors/session/core"
)

// startError is err, a failed node start, placed in the configuration file when it is
// an approval tool the node does not have ("FILE:LINE: approval.tools[i]: ...", a usage
// error like every other mistake in the file).
func (f *nodeFlags) startError(err error) error {
	// The commands report the cause: "fathom: " is printed by main already.
	if fe := (*fathomapi.Error)(nil); errors.As(err, &fe) {
		err = fe.Err
	}
	var unknown *core.UnknownApprovalToolError
	if f.file == nil || !errors.As(err, &unknown) {
		return err
	}
	if ferr := f.file.ToolError(unknown.Tool, unknown.Error()); ferr != nil {
		return usageError("--config: %v", ferr)
	}
	return err
}
