package main

import (
	"flag"
	"os"
	"strconv"

	"github.com/fathom-agents/fathom/actors/session"
	"github.com/fathom-agents/fathom/internal/config"
)

// envMembersReadOwnOnly is --members-read-own-only's environment variable.
const envMembersReadOwnOnly = "FATHOM_MEMBERS_READ_OWN_ONLY"

// tenancyFlags are the tenancy policy's flags (auth.Policy; docs/security.md):
// --members-read-own-only, else env FATHOM_MEMBERS_READ_OWN_ONLY, else the
// configuration file's members_read_own_only, else false.
type tenancyFlags struct {
	membersReadOwnOnly readOwnOnly
	// envErr is a FATHOM_MEMBERS_READ_OWN_ONLY that does not parse; reported unless the
	// flag is given.
	envErr error
}

// readOwnOnly is --members-read-own-only's value: a bool that knows whether the flag or
// the environment set it.
type readOwnOnly struct{ on, set bool }

func (v *readOwnOnly) String() string   { return strconv.FormatBool(v.on) }
func (v *readOwnOnly) IsBoolFlag() bool { return true }
func (v *readOwnOnly) Set(s string) error {
	b, err := strconv.ParseBool(s)
	if err != nil {
		return err
	}
	v.on, v.set = b, true
	return nil
}

func (f *tenancyFlags) register(fs *flag.FlagSet) {
	if v := os.Getenv(envMembersReadOwnOnly); v != "" {
		if err := f.membersReadOwnOnly.Set(v); err != nil {
			f.envErr = usageError("bad %s %q: want true or false", envMembersReadOwnOnly, v)
		}
	}
	fs.Var(&f.membersReadOwnOnly, "members-read-own-only",
		"a member sees only the sessions it started (by default a member reads every session of its tenant and acts on its own) (env "+envMembersReadOwnOnly+"=true, config key members_read_own_only)")
}

// apply sets scfg's tenancy policy from the flag, the environment or file (nil: none).
func (f *tenancyFlags) apply(scfg *session.Config, file *config.File) error {
	if f.envErr != nil && !f.membersReadOwnOnly.set {
		return f.envErr
	}
	scfg.Tenancy.MembersReadOwnOnly = f.membersReadOwnOnly.on
	if !f.membersReadOwnOnly.set && file != nil && file.MembersReadOwnOnlySet {
		scfg.Tenancy.MembersReadOwnOnly = file.MembersReadOwnOnly
	}
	return nil
}
