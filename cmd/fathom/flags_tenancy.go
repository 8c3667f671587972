package main

import (
	"flag"
	"os"

	"github.com/fathom-agents/fathom/actors/session"
)

// envMembersReadOwnOnly is --members-read-own-only's environment variable.
const envMembersReadOwnOnly = "FATHOM_MEMBERS_READ_OWN_ONLY"

// tenancyFlags are the tenancy policy's flags (auth.Policy; docs/security.md).
type tenancyFlags struct {
	membersReadOwnOnly bool
}

func (f *tenancyFlags) register(fs *flag.FlagSet) {
	v := os.Getenv(envMembersReadOwnOnly)
	fs.BoolVar(&f.membersReadOwnOnly, "members-read-own-only", v == "true" || v == "1",
		"a member sees only the sessions it started (by default a member reads every session of its tenant and acts on its own) (env "+envMembersReadOwnOnly+"=true)")
}

func (f *tenancyFlags) apply(scfg *session.Config) {
	scfg.Tenancy.MembersReadOwnOnly = f.membersReadOwnOnly
}
