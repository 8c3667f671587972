package main

import (
	"flag"
	"os"
	"strconv"

	"github.com/fathom-agents/fathom/internal/config"
)

// envPprof is --pprof's environment variable.
const envPprof = "FATHOM_PPROF"

// pprofFlags serve the Go runtime's profiles (net/http/pprof) under /debug/pprof/ on the
// metrics listener: --pprof, else env FATHOM_PPROF, else the configuration file's pprof,
// else off.
type pprofFlags struct {
	on setBool
	// envErr is a FATHOM_PPROF that does not parse; reported unless the flag is given.
	envErr error
}

// setBool is a bool flag's value that knows whether the flag or the environment set it.
type setBool struct{ on, set bool }

func (v *setBool) String() string   { return strconv.FormatBool(v.on) }
func (v *setBool) IsBoolFlag() bool { return true }
func (v *setBool) Set(s string) error {
	b, err := strconv.ParseBool(s)
	if err != nil {
		return err
	}
	v.on, v.set = b, true
	return nil
}

func (f *pprofFlags) register(fs *flag.FlagSet) {
	if v := os.Getenv(envPprof); v != "" {
		if err := f.on.Set(v); err != nil {
			f.envErr = usageError("bad %s %q: want true or false", envPprof, v)
		}
	}
	fs.Var(&f.on, "pprof",
		"also serve the Go profiles (net/http/pprof) under /debug/pprof/ on the --metrics-listen address, for operators (env "+envPprof+"=true, config key pprof)")
}

// enabled reports whether the profiles are served, from the flag, the environment or
// file (nil: none); it needs a metrics listener.
func (f *pprofFlags) enabled(file *config.File, metricsListen string) (bool, error) {
	if f.envErr != nil && !f.on.set {
		return false, f.envErr
	}
	on := f.on.on
	if !f.on.set && file != nil && file.PprofSet {
		on = file.Pprof
	}
	if on && metricsListen == "" {
		return false, usageError("--pprof serves on the metrics listener: set --metrics-listen (env FATHOM_METRICS_LISTEN) too")
	}
	return on, nil
}
