package config

import (
	"fmt"
	"strconv"

	"go.yaml.in/yaml/v3"

	"github.com/fathom-agents/fathom/actors/session/core"
)

func init() {
	register("max_tool_result_bytes", parseMaxToolResultBytes) // the cap of one tool call's result
}

// parseMaxToolResultBytes reads max_tool_result_bytes: the cap of one tool call's
// result in bytes (core.Config.MaxToolResultBytes; --max-tool-result-bytes and env
// FATHOM_MAX_TOOL_RESULT_BYTES take precedence).
//
//	max_tool_result_bytes: 262144
func parseMaxToolResultBytes(p *parser, f *File, key string, _, v *yaml.Node) error {
	s, err := p.str(v, key)
	if err != nil {
		return err
	}
	n, perr := strconv.ParseUint(s, 10, 32)
	if perr != nil || n < core.MinMaxToolResultBytes || n > core.MaxToolResultBytesLimit {
		return p.err(v, key, fmt.Sprintf("%q is not a whole number of bytes from %d to %d", s, core.MinMaxToolResultBytes, core.MaxToolResultBytesLimit))
	}
	f.MaxToolResultBytes = int(n)
	return nil
}
