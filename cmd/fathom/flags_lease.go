package main

import (
	"flag"
	"os"
	"time"

	"github.com/fathom-agents/fathom/actors/session"
)

// leaseFlags configure session leases and the node's reactivator: --lease-ttl (env
// FATHOM_LEASE_TTL).
type leaseFlags struct {
	ttl time.Duration
	// envErr is a FATHOM_LEASE_TTL that does not parse; reported unless --lease-ttl is
	// given.
	envErr error
}

func (f *leaseFlags) register(fs *flag.FlagSet) {
	f.ttl = session.DefaultLeaseTTL
	if v := os.Getenv("FATHOM_LEASE_TTL"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			f.envErr = usageError("bad FATHOM_LEASE_TTL %q: %v", v, err)
		} else {
			f.ttl = d
		}
	}
	fs.Var((*leaseTTLValue)(f), "lease-ttl", "how long a running session's lease lasts unless its node renews it; a node activates sessions whose lease lapsed (their node died) every lease-ttl/2; 0 turns leases and reactivation off (env FATHOM_LEASE_TTL)")
}

// apply sets the session configuration's lease TTL.
func (f *leaseFlags) apply(scfg *session.Config) error {
	if f.envErr != nil {
		return f.envErr
	}
	if f.ttl < 0 {
		return usageError("--lease-ttl %s must not be negative", f.ttl)
	}
	scfg.LeaseTTL = f.ttl
	return nil
}

// leaseTTLValue is --lease-ttl's flag.Value: setting it overrides a bad environment value.
type leaseTTLValue leaseFlags

func (v *leaseTTLValue) String() string {
	if v == nil {
		return session.DefaultLeaseTTL.String()
	}
	return v.ttl.String()
}

func (v *leaseTTLValue) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	v.ttl, v.envErr = d, nil
	return nil
}
