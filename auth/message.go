package auth

import "github.com/fathom-agents/fathom/messages"

// ToMessage is p as it travels in grain requests and is recorded on events (by).
func ToMessage(p Principal) *messages.Principal {
	m := &messages.Principal{Subject: p.Subject, Tenant: p.Tenant}
	for _, r := range p.Roles {
		m.Roles = append(m.Roles, string(r))
	}
	return m
}

// FromMessage is the Principal m carries (unknown role names are dropped, so a caller
// never gains a role by misspelling one).
func FromMessage(m *messages.Principal) Principal {
	p := Principal{Subject: m.GetSubject(), Tenant: m.GetTenant()}
	for _, r := range m.GetRoles() {
		if ValidRole(Role(r)) {
			p.Roles = append(p.Roles, Role(r))
		}
	}
	return p
}
