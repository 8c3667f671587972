// Package auth owns who is asking: the Principal a request acts as (subject, tenant,
// roles), the Authenticator that turns a bearer credential into one, and the rules of
// what each role may do with a session (Allowed).
//
// Authenticators in this package: Static (the node's --token and --read-token, admin and
// viewer of DefaultTenant) and Chain (the first authenticator that recognises a
// credential decides). JWTs verified against an issuer's keys and hashed per-tenant API
// keys plug in as further Authenticators.
//
// A Principal travels with a request in its context (WithPrincipal, FromContext) and,
// across the cluster, inside each session grain request (messages.Caller), so the
// session grain itself refuses what the caller may not do.
package auth
