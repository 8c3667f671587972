package main

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// retentionFlags configure the node's retention janitor: --retention (env
// FATHOM_RETENTION).
type retentionFlags struct {
	d time.Duration
	// envErr is a FATHOM_RETENTION that does not parse; reported unless --retention is
	// given.
	envErr error
}

func (f *retentionFlags) register(fs *flag.FlagSet) {
	if v := os.Getenv("FATHOM_RETENTION"); v != "" {
		d, err := parseRetention(v)
		if err != nil {
			f.envErr = usageError("bad FATHOM_RETENTION %q: %v", v, err)
		} else {
			f.d = d
		}
	}
	fs.Var((*retentionValue)(f), "retention", "delete completed, failed and cancelled sessions (journal, snapshots, vectors, artifacts) this long after their last event, e.g. 720h or 30d; 0 keeps them forever (env FATHOM_RETENTION)")
}

// value returns the retention, or the environment's parse error.
func (f *retentionFlags) value() (time.Duration, error) {
	if f.envErr != nil {
		return 0, f.envErr
	}
	return f.d, nil
}

// parseRetention reads a Go duration or a whole number of days ("30d"), not negative.
func parseRetention(s string) (time.Duration, error) {
	var d time.Duration
	if n, ok := strings.CutSuffix(s, "d"); ok {
		days, err := strconv.ParseUint(n, 10, 16)
		if err != nil {
			return 0, fmt.Errorf("%q is not a whole number of days", s)
		}
		d = time.Duration(days) * 24 * time.Hour
	} else {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			return 0, err
		}
	}
	if d < 0 {
		return 0, fmt.Errorf("%s must not be negative", s)
	}
	return d, nil
}

// retentionValue is --retention's flag.Value: setting it overrides a bad environment value.
type retentionValue retentionFlags

func (v *retentionValue) String() string {
	if v == nil || v.d == 0 {
		return "0"
	}
	return v.d.String()
}

func (v *retentionValue) Set(s string) error {
	d, err := parseRetention(s)
	if err != nil {
		return err
	}
	v.d, v.envErr = d, nil
	return nil
}
