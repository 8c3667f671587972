package main

import (
	"flag"
	"os"
	"time"
)

// envDuration is a duration flag whose default an environment variable may set
// (--lease-ttl / FATHOM_LEASE_TTL, --pause-grace / FATHOM_PAUSE_GRACE). A variable that
// does not parse is a usage error when the value is read, unless the flag is given:
// setting the flag overrides it.
type envDuration struct {
	def    time.Duration
	d      time.Duration
	envErr error
}

// register defines flag name on fs with default def, overridden by env when set;
// usage gets " (env ENV)" appended.
func (f *envDuration) register(fs *flag.FlagSet, name, env string, def time.Duration, usage string) {
	f.def, f.d = def, def
	if v := os.Getenv(env); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			f.envErr = usageError("bad %s %q: %v", env, v, err)
		} else {
			f.d = d
		}
	}
	fs.Var(f, name, usage+" (env "+env+")")
}

// value is the duration set, or the usage error of a bad environment value.
func (f *envDuration) value() (time.Duration, error) {
	if f.envErr != nil {
		return 0, f.envErr
	}
	return f.d, nil
}

// String implements flag.Value.
func (f *envDuration) String() string {
	if f == nil {
		return ""
	}
	return f.d.String()
}

// Set implements flag.Value.
func (f *envDuration) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	f.d, f.envErr = d, nil
	return nil
}
