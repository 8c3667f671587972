package main

import (
	"flag"
	"os"
	"time"
)

// defaultPauseGrace is --pause-grace's default (the Consul provider's own default).
const defaultPauseGrace = 60 * time.Second

// pauseGraceFlag is --pause-grace (env FATHOM_PAUSE_GRACE): how long, with Consul, a
// member whose health check stopped passing but whose port still answers (a paused
// process: a long GC pause, SIGSTOP, a partition) stays in the other members' topology
// before they treat it as gone and move its sessions. Setting the flag overrides a bad
// environment value.
type pauseGraceFlag struct {
	d      time.Duration
	envErr error
}

func (f *pauseGraceFlag) register(fs *flag.FlagSet) {
	f.d = defaultPauseGrace
	if v := os.Getenv("FATHOM_PAUSE_GRACE"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			f.envErr = usageError("bad FATHOM_PAUSE_GRACE %q: %v", v, err)
		} else {
			f.d = d
		}
	}
	fs.Var(f, "pause-grace", "with Consul: how long a member whose health check lapsed while its port still answers (paused, not dead) stays in the cluster before its sessions move elsewhere; shorter moves sessions of a frozen node sooner, longer rides out longer pauses (env FATHOM_PAUSE_GRACE)")
}

// value is the grace to configure, or the usage error of a bad setting.
func (f *pauseGraceFlag) value() (time.Duration, error) {
	switch {
	case f.envErr != nil:
		return 0, f.envErr
	case f.d <= 0:
		return 0, usageError("--pause-grace %s must be positive", f.d)
	}
	return f.d, nil
}

func (f *pauseGraceFlag) String() string {
	if f == nil || f.d == 0 {
		return defaultPauseGrace.String()
	}
	return f.d.String()
}

func (f *pauseGraceFlag) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	f.d, f.envErr = d, nil
	return nil
}
