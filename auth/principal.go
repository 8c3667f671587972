package auth

import (
	"context"
	"crypto/subtle"
	"errors"
	"slices"
)

// DefaultTenant is the tenant of the static tokens and of sessions started without a
// principal (the Go API, sessions from before tenancy).
const DefaultTenant = "default"

// Role is what a principal may do within its tenant.
type Role string

// The roles, most powerful first.
const (
	// RoleAdmin acts on every session of every tenant and on node-wide operations (the
	// restarts feed, the cluster page, retention).
	RoleAdmin Role = "admin"
	// RoleOperator acts on every session of its tenant.
	RoleOperator Role = "operator"
	// RoleMember starts sessions, acts on its own and reads its tenant's.
	RoleMember Role = "member"
	// RoleViewer reads its tenant's sessions.
	RoleViewer Role = "viewer"
)

// Roles lists the known roles, most powerful first.
var Roles = []Role{RoleAdmin, RoleOperator, RoleMember, RoleViewer}

// ValidRole reports whether r is one of Roles.
func ValidRole(r Role) bool { return slices.Contains(Roles, r) }

// Principal is who a request acts as.
type Principal struct {
	// Subject identifies the caller within its tenant (a JWT's sub, an API key's name,
	// "token" for the static read+write token).
	Subject string
	// Tenant is the tenant the caller belongs to; never empty for an authenticated
	// principal.
	Tenant string
	// Roles are the caller's roles; empty means RoleMember.
	Roles []Role
}

// Has reports whether p holds role r (a principal without roles is a member).
func (p Principal) Has(r Role) bool {
	if len(p.Roles) == 0 {
		return r == RoleMember
	}
	return slices.Contains(p.Roles, r)
}

// Admin reports whether p is an admin.
func (p Principal) Admin() bool { return p.Has(RoleAdmin) }

// CanWrite reports whether p may start sessions and act on at least its own.
func (p Principal) CanWrite() bool {
	return p.Has(RoleAdmin) || p.Has(RoleOperator) || p.Has(RoleMember)
}

// String names p for logs: subject@tenant.
func (p Principal) String() string { return p.Subject + "@" + p.Tenant }

// Action is what a principal wants to do with one session.
type Action int

// The actions on a session.
const (
	// Read is state, timeline, state_at, events, artifacts, and a fork's source.
	Read Action = iota
	// Act is every command: input, approve, pause, resume, breakpoints, cancel, send,
	// fork into a new session, delete.
	Act
)

// Policy holds the tenancy options that are configuration rather than role.
type Policy struct {
	// MembersReadOwnOnly restricts a member to reading its own sessions (default: a
	// member reads every session of its tenant).
	MembersReadOwnOnly bool
}

// Decision is the answer of Allowed.
type Decision int

// The decisions. Hidden must be answered exactly like a session that does not exist.
const (
	// Allow lets the request through.
	Allow Decision = iota
	// Hidden: the session is not the caller's to see (another tenant's, or another
	// member's under MembersReadOwnOnly). Answer as for a missing session.
	Hidden
	// Denied: the caller sees the session but may not do this to it (403).
	Denied
)

// Allowed decides whether p may do a to a session of tenant owned by owner. A session
// recorded without a tenant (before tenancy) belongs to DefaultTenant.
func (pol Policy) Allowed(p Principal, a Action, tenant, owner string) Decision {
	if tenant == "" {
		tenant = DefaultTenant
	}
	if p.Admin() {
		return Allow
	}
	if p.Tenant != tenant {
		return Hidden
	}
	own := owner != "" && owner == p.Subject
	if pol.MembersReadOwnOnly && !own && !p.Has(RoleOperator) && !p.Has(RoleViewer) {
		return Hidden
	}
	switch {
	case a == Read:
		return Allow
	case p.Has(RoleOperator):
		return Allow
	case p.Has(RoleMember) && own:
		return Allow
	}
	return Denied
}

// Visible is the part of the session index p may see: the sessions of tenant (and, when
// owner is not empty, only those owned by owner). An admin sees every tenant: tenant "".
func (pol Policy) Visible(p Principal) (tenant, owner string) {
	if p.Admin() {
		return "", ""
	}
	if pol.MembersReadOwnOnly && !p.Has(RoleOperator) && !p.Has(RoleViewer) {
		return p.Tenant, p.Subject
	}
	return p.Tenant, ""
}

// ErrUnauthenticated is what an Authenticator answers for a credential it does not
// accept (unknown, expired, badly signed). Callers answer 401 and never say which.
var ErrUnauthenticated = errors.New("missing or invalid credential")

// ErrNotMine is what an Authenticator of a Chain answers for a credential that is not
// its kind (an opaque token for the JWT verifier): the chain tries the next one.
var ErrNotMine = errors.New("credential of another kind")

// Authenticator turns a bearer credential into the Principal it stands for.
type Authenticator interface {
	// Authenticate returns the credential's principal, or an error wrapping
	// ErrUnauthenticated (refused) or ErrNotMine (not this authenticator's kind).
	Authenticate(ctx context.Context, credential string) (Principal, error)
}

// Static authenticates the node's two static tokens: Token as an admin and ReadToken
// as a viewer, both of DefaultTenant.
type Static struct {
	// Token is the read+write token ("" for none).
	Token string
	// ReadToken is the read-only token ("" for none).
	ReadToken string
}

// Authenticate implements Authenticator in constant time per token.
func (s Static) Authenticate(_ context.Context, cred string) (Principal, error) {
	switch {
	case s.Token != "" && subtle.ConstantTimeCompare([]byte(cred), []byte(s.Token)) == 1:
		return Principal{Subject: "token", Tenant: DefaultTenant, Roles: []Role{RoleAdmin}}, nil
	case s.ReadToken != "" && subtle.ConstantTimeCompare([]byte(cred), []byte(s.ReadToken)) == 1:
		return Principal{Subject: "read-token", Tenant: DefaultTenant, Roles: []Role{RoleViewer}}, nil
	}
	return Principal{}, ErrNotMine
}

// Chain tries each authenticator in order: the first that does not answer ErrNotMine
// decides. A credential nobody recognises is ErrUnauthenticated.
type Chain []Authenticator

// Authenticate implements Authenticator.
func (c Chain) Authenticate(ctx context.Context, cred string) (Principal, error) {
	for _, a := range c {
		p, err := a.Authenticate(ctx, cred)
		if errors.Is(err, ErrNotMine) {
			continue
		}
		if err != nil {
			return Principal{}, err
		}
		return p, nil
	}
	return Principal{}, ErrUnauthenticated
}

// Anonymous is the principal of every request to a gateway without credentials
// configured (development on loopback): an admin of DefaultTenant.
var Anonymous = Principal{Subject: "anonymous", Tenant: DefaultTenant, Roles: []Role{RoleAdmin}}

type principalKey struct{}

// WithPrincipal returns ctx carrying p.
func WithPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// FromContext returns the principal ctx carries, if any.
func FromContext(ctx context.Context) (Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(Principal)
	return p, ok
}

type tenantKey struct{}

// WithTenant returns ctx naming the tenant whose work it carries (a session's LLM and
// tool calls): fair shares and per-tenant limits read it with TenantOf.
func WithTenant(ctx context.Context, tenant string) context.Context {
	return context.WithValue(ctx, tenantKey{}, tenant)
}

// TenantOf returns the tenant ctx's work is for, DefaultTenant when none is named.
func TenantOf(ctx context.Context) string {
	if t, ok := ctx.Value(tenantKey{}).(string); ok && t != "" {
		return t
	}
	return DefaultTenant
}
