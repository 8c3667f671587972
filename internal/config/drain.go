package config

import (
	"fmt"
	"time"

	"go.yaml.in/yaml/v3"
)

func init() {
	register("drain_timeout", parseDrainTimeout)
}

// parseDrainTimeout reads drain_timeout: how long a draining member lets its sessions'
// running calls finish before it hands them over anyway (session.Config.DrainTimeout;
// --drain-timeout and env FATHOM_DRAIN_TIMEOUT take precedence).
//
//	drain_timeout: 45s
func parseDrainTimeout(p *parser, f *File, key string, _, v *yaml.Node) error {
	s, err := p.str(v, key)
	if err != nil {
		return err
	}
	d, perr := time.ParseDuration(s)
	if perr != nil || d < 0 {
		return p.err(v, key, fmt.Sprintf("%q is not a duration of 0 or more (30s, 2m)", s))
	}
	f.DrainTimeout, f.DrainTimeoutSet = d, true
	return nil
}
