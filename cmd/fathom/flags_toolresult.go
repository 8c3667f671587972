package main

import (
	"flag"
	"os"
	"strconv"

	"github.com/fathom-agents/fathom/actors/session"
	"github.com/fathom-agents/fathom/actors/session/core"
	"github.com/fathom-agents/fathom/internal/config"
)

// envMaxToolResultBytes names the environment variable of --max-tool-result-bytes.
const envMaxToolResultBytes = "FATHOM_MAX_TOOL_RESULT_BYTES"

// toolResultFlags configure the cap of one tool call's result: --max-tool-result-bytes,
// else env FATHOM_MAX_TOOL_RESULT_BYTES, else the configuration file's
// max_tool_result_bytes, else core.DefaultMaxToolResultBytes.
type toolResultFlags struct {
	n uint64
	// set is true when the flag or the environment gave n.
	set bool
	// envErr is a FATHOM_MAX_TOOL_RESULT_BYTES that does not parse; reported unless the
	// flag is given.
	envErr error
}

func (f *toolResultFlags) register(fs *flag.FlagSet) {
	f.n = core.DefaultMaxToolResultBytes
	if v := os.Getenv(envMaxToolResultBytes); v != "" {
		if n, err := strconv.ParseUint(v, 10, 32); err != nil {
			f.envErr = usageError("bad %s %q: want a whole number of bytes", envMaxToolResultBytes, v)
		} else {
			f.n, f.set = n, true
		}
	}
	fs.Var((*toolResultValue)(f), "max-tool-result-bytes",
		"largest tool result a session records whole, in bytes; a larger one is stored as the session's artifact results/{call_id} and the model reads its head and tail with the artifact's path and size ("+
			strconv.Itoa(core.MinMaxToolResultBytes)+" to "+strconv.Itoa(core.MaxToolResultBytesLimit)+"; env "+envMaxToolResultBytes+", config key max_tool_result_bytes)")
}

// apply sets scfg.MaxToolResultBytes from the flag, the environment or file (nil: none).
func (f *toolResultFlags) apply(scfg *session.Config, file *config.File) error {
	if f.envErr != nil {
		return f.envErr
	}
	n := f.n
	if !f.set && file != nil && file.MaxToolResultBytes > 0 {
		n = uint64(file.MaxToolResultBytes)
	}
	if n < core.MinMaxToolResultBytes || n > core.MaxToolResultBytesLimit {
		return usageError("--max-tool-result-bytes %d: want %d to %d", n, core.MinMaxToolResultBytes, core.MaxToolResultBytesLimit)
	}
	scfg.MaxToolResultBytes = int(n)
	return nil
}

// toolResultValue is --max-tool-result-bytes's flag.Value: setting it overrides the
// environment (a bad value there included) and the file.
type toolResultValue toolResultFlags

func (v *toolResultValue) String() string {
	if v == nil {
		return ""
	}
	return strconv.FormatUint(v.n, 10)
}

func (v *toolResultValue) Set(s string) error {
	n, err := strconv.ParseUint(s, 10, 32)
	if err != nil {
		return err
	}
	v.n, v.set, v.envErr = n, true, nil
	return nil
}
