package config

import (
	"fmt"

	"go.yaml.in/yaml/v3"
)

func init() {
	register("pprof", parsePprof)
}

// parsePprof reads pprof: serve net/http/pprof's profiles under /debug/pprof/ on the
// metrics listener (--pprof and env FATHOM_PPROF take precedence).
//
//	pprof: true
func parsePprof(p *parser, f *File, key string, _, v *yaml.Node) error {
	if v.Kind != yaml.ScalarNode {
		return p.err(v, key, "want true or false")
	}
	var b bool
	if err := v.Decode(&b); err != nil {
		return p.err(v, key, fmt.Sprintf("want true or false, not %q", v.Value))
	}
	f.Pprof, f.PprofSet = b, true
	return nil
}
