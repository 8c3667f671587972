package builtin

import (
	"context"

	"github.com/fathom-agents/fathom/tools"
)

// CodeArgs are code_execute's arguments (the fields of an FSP v1 execute request).
type CodeArgs struct {
	// Language is the interpreter.
	Language string `json:"language" jsonschema:"enum=python,enum=javascript,enum=shell,enum=elixir" jsonschema_description:"The language of the code."`
	// Code is the program.
	Code string `json:"code" jsonschema:"minLength=1,maxLength=1048576" jsonschema_description:"The complete program to run. Print what you want to see."`
	// Stdin is fed to the program.
	Stdin string `json:"stdin,omitempty" jsonschema:"maxLength=1048576" jsonschema_description:"Standard input for the program."`
	// TimeoutMS bounds the run.
	TimeoutMS int `json:"timeout_ms,omitempty" jsonschema:"minimum=1,maximum=300000" jsonschema_description:"Time limit in milliseconds (default: the sandbox's)."`
}

// CodeExecute returns the code_execute tool. It runs in the external sandbox: the
// executor hands it to its ExternalRunner (the sandbox pool) and never calls Execute
// for it; Execute refuses in case something does.
func CodeExecute() tools.Tool {
	return tools.MustNew("code_execute",
		"Run a program in an isolated sandbox (no network, a fresh temporary directory, time and memory limits) "+
			"and get its exit code, stdout and stderr. Use it to compute, check or transform data instead of guessing. "+
			"Each call starts from scratch: nothing persists between calls.",
		tools.SandboxExternal, func(context.Context, CodeArgs) (any, error) {
			return nil, tools.SandboxError("code_execute", "code_execute runs only in the external sandbox; no sandbox handled this call", false).NotConfigured()
		})
}
