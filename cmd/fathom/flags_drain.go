package main

import (
	"flag"
	"os"
	"time"

	"github.com/fathom-agents/fathom/actors/session"
	"github.com/fathom-agents/fathom/internal/config"
)

// envDrainTimeout names the environment variable of --drain-timeout.
const envDrainTimeout = "FATHOM_DRAIN_TIMEOUT"

// drainFlags configure how long a draining member (fathom node drain, SIGTERM) lets its
// sessions' running calls finish: --drain-timeout, else env FATHOM_DRAIN_TIMEOUT, else
// the configuration file's drain_timeout, else session.DefaultDrainTimeout.
type drainFlags struct {
	d time.Duration
	// set is true when the flag or the environment gave d.
	set bool
	// envErr is a FATHOM_DRAIN_TIMEOUT that does not parse; reported unless the flag is
	// given.
	envErr error
}

func (f *drainFlags) register(fs *flag.FlagSet) {
	f.d = session.DefaultDrainTimeout
	if v := os.Getenv(envDrainTimeout); v != "" {
		if d, err := time.ParseDuration(v); err != nil {
			f.envErr = usageError("bad %s %q: %v", envDrainTimeout, v, err)
		} else {
			f.d, f.set = d, true
		}
	}
	fs.Var((*drainValue)(f), "drain-timeout",
		"how long a draining member (fathom node drain, SIGTERM within --shutdown-timeout), and a session moving to a member that joined, let the running LLM and tool calls finish before the sessions are handed over anyway; a call cut then runs again on the member continuing the session; 0 hands over at once (env "+
			envDrainTimeout+", config key drain_timeout)")
}

// apply sets scfg.DrainTimeout from the flag, the environment or file (nil: none).
func (f *drainFlags) apply(scfg *session.Config, file *config.File) error {
	if f.envErr != nil {
		return f.envErr
	}
	d := f.d
	if !f.set && file != nil && file.DrainTimeoutSet {
		d = file.DrainTimeout
	}
	if d < 0 {
		return usageError("--drain-timeout %s must not be negative", d)
	}
	scfg.DrainTimeout = d
	return nil
}

// drainValue is --drain-timeout's flag.Value: setting it overrides the environment (a
// bad value there included) and the file.
type drainValue drainFlags

func (v *drainValue) String() string {
	if v == nil {
		return ""
	}
	return v.d.String()
}

func (v *drainValue) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	v.d, v.set, v.envErr = d, true, nil
	return nil
}
