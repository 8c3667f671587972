package auth

import (
	"context"
	"errors"
	"testing"
)

func TestAllowedByRoleAndTenant(t *testing.T) {
	admin := Principal{Subject: "root", Tenant: "ops", Roles: []Role{RoleAdmin}}
	opA := Principal{Subject: "op", Tenant: "a", Roles: []Role{RoleOperator}}
	alice := Principal{Subject: "alice", Tenant: "a"} // no role: a member
	bob := Principal{Subject: "bob", Tenant: "a", Roles: []Role{RoleMember}}
	viewA := Principal{Subject: "v", Tenant: "a", Roles: []Role{RoleViewer}}
	mallory := Principal{Subject: "alice", Tenant: "b", Roles: []Role{RoleOperator}} // same subject, other tenant
	cases := []struct {
		name  string
		pol   Policy
		p     Principal
		a     Action
		owner string
		want  Decision
	}{
		{"admin reads any tenant", Policy{}, admin, Read, "alice", Allow},
		{"admin acts on any tenant", Policy{}, admin, Act, "alice", Allow},
		{"operator acts on its tenant", Policy{}, opA, Act, "alice", Allow},
		{"member acts on its own", Policy{}, alice, Act, "alice", Allow},
		{"member reads another member's", Policy{}, bob, Read, "alice", Allow},
		{"member may not act on another member's", Policy{}, bob, Act, "alice", Denied},
		{"own-only hides another member's", Policy{MembersReadOwnOnly: true}, bob, Read, "alice", Hidden},
		{"own-only still shows the member its own", Policy{MembersReadOwnOnly: true}, alice, Read, "alice", Allow},
		{"viewer reads", Policy{}, viewA, Read, "alice", Allow},
		{"viewer may not act", Policy{}, viewA, Act, "alice", Denied},
		{"another tenant is hidden, even for a same-named subject", Policy{}, mallory, Read, "alice", Hidden},
		{"another tenant is hidden for acts too", Policy{}, mallory, Act, "alice", Hidden},
		{"a session without a tenant is the default tenant's", Policy{}, Principal{Subject: "x", Tenant: DefaultTenant}, Read, "", Allow},
	}
	for _, c := range cases {
		tenant := "a"
		if c.name == "a session without a tenant is the default tenant's" {
			tenant = ""
		}
		if got := c.pol.Allowed(c.p, c.a, tenant, c.owner); got != c.want {
			t.Errorf("%s: Allowed = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestStaticAndChain(t *testing.T) {
	ctx := context.Background()
	c := Chain{Static{Token: "w", ReadToken: "r"}}
	p, err := c.Authenticate(ctx, "w")
	if err != nil || !p.Admin() || p.Tenant != DefaultTenant {
		t.Fatalf("write token: %+v, %v; want an admin of %s", p, err, DefaultTenant)
	}
	p, err = c.Authenticate(ctx, "r")
	if err != nil || !p.Has(RoleViewer) || p.CanWrite() {
		t.Fatalf("read token: %+v, %v; want a viewer who cannot write", p, err)
	}
	if _, err := c.Authenticate(ctx, "nope"); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("unknown token: %v, want ErrUnauthenticated", err)
	}
	if _, err := c.Authenticate(ctx, ""); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("empty token: %v, want ErrUnauthenticated", err)
	}
}
