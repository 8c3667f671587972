package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/fathom-agents/fathom/auth"
	"github.com/fathom-agents/fathom/gateway"
	"github.com/fathom-agents/fathom/internal/config"
)

// identityFlags configure who the gateway accepts besides --token and --read-token:
// JWTs of an OIDC issuer and the configuration file's api_keys. Each flag takes
// precedence over its variable, which takes precedence over its config key; an empty
// value is unset.
type identityFlags struct {
	issuer, jwksURL, keyFile, audience, tenantClaim, rolesClaim string
	consoleClientID                                             string
}

func (f *identityFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.issuer, "oidc-issuer", os.Getenv("FATHOM_OIDC_ISSUER"),
		"OIDC issuer `URL` whose JWTs the gateway accepts as bearer tokens: every token's iss must equal it, and its keys are found by discovery (URL/.well-known/openid-configuration, fetched at start) unless --jwks-url or --jwt-key-file gives them (env FATHOM_OIDC_ISSUER, config key oidc_issuer)")
	fs.StringVar(&f.jwksURL, "jwks-url", os.Getenv("FATHOM_JWKS_URL"),
		"`URL` of the JWT issuer's JSON Web Key Set, without discovery: keys are cached and fetched again for a token whose key id is unknown (3 fetches in a row at most, then one every 5s); iss is checked only when --oidc-issuer is set (env FATHOM_JWKS_URL, config key jwks_url)")
	fs.StringVar(&f.keyFile, "jwt-key-file", os.Getenv("FATHOM_JWT_KEY_FILE"),
		"`FILE` of the JWT issuer's public keys, PEM (PUBLIC KEY, RSA PUBLIC KEY, CERTIFICATE blocks) or a JWKS, read at start, instead of fetching them; iss is checked only when --oidc-issuer is set (env FATHOM_JWT_KEY_FILE, config key jwt_key_file)")
	fs.StringVar(&f.audience, "oidc-audience", os.Getenv("FATHOM_OIDC_AUDIENCE"),
		"audience a JWT's aud must contain; unset: aud is not checked (env FATHOM_OIDC_AUDIENCE, config key oidc_audience)")
	fs.StringVar(&f.tenantClaim, "tenant-claim", os.Getenv("FATHOM_TENANT_CLAIM"),
		"JWT `claim` naming the principal's tenant, default "+auth.DefaultTenantClaim+"; a token without it is refused; a dotted name (org.id) reaches into nested objects unless a claim has the whole name (env FATHOM_TENANT_CLAIM, config key tenant_claim)")
	fs.StringVar(&f.rolesClaim, "roles-claim", os.Getenv("FATHOM_ROLES_CLAIM"),
		"JWT `claim` listing the principal's roles (admin, operator, member, viewer; a list or one string; other names are ignored; none: member), default "+auth.DefaultRolesClaim+"; dotted like --tenant-claim (env FATHOM_ROLES_CLAIM, config key roles_claim)")
	fs.StringVar(&f.consoleClientID, "console-oidc-client-id", os.Getenv("FATHOM_CONSOLE_OIDC_CLIENT_ID"),
		"the web console's client `id` at the --oidc-issuer (a public client, redirect URI the console's URL, e.g. https://fathom.example.com/console/): the console offers to sign in there with the authorization-code flow with PKCE; requires --oidc-issuer (env FATHOM_CONSOLE_OIDC_CLIENT_ID, config key console_oidc_client_id)")
}

// consoleOIDC returns the console's OIDC sign-in the flags, the environment and file
// (nil: none) configure; nil when no client id is set.
func (f *identityFlags) consoleOIDC(file *config.File) (*gateway.ConsoleOIDC, error) {
	var id config.Identity
	if file != nil {
		id = file.Identity
	}
	clientID := firstSet(f.consoleClientID, id.ConsoleOIDCClientID)
	if clientID == "" {
		return nil, nil
	}
	issuer := firstSet(f.issuer, id.OIDCIssuer)
	if issuer == "" {
		return nil, usageError("--console-oidc-client-id signs the console in at the OIDC issuer: set --oidc-issuer too")
	}
	return &gateway.ConsoleOIDC{Issuer: issuer, ClientID: clientID}, nil
}

// firstSet returns v, else the file's value.
func firstSet(v, file string) string {
	if v != "" {
		return v
	}
	return file
}

// authenticator returns the JWT verifier and the API keys the flags, the environment
// and file (nil: none) configure, as one chain; nil when none is. With an issuer to
// discover, it fetches the issuer's configuration (bounded by auth.DefaultHTTPTimeout).
func (f *identityFlags) authenticator(ctx context.Context, file *config.File) (auth.Authenticator, error) {
	var id config.Identity
	if file != nil {
		id = file.Identity
	}
	cfg := auth.JWTConfig{
		Issuer: firstSet(f.issuer, id.OIDCIssuer), JWKSURL: firstSet(f.jwksURL, id.JWKSURL), KeyFile: firstSet(f.keyFile, id.JWTKeyFile),
		Audience: firstSet(f.audience, id.OIDCAudience), TenantClaim: firstSet(f.tenantClaim, id.TenantClaim), RolesClaim: firstSet(f.rolesClaim, id.RolesClaim),
	}
	var chain auth.Chain
	switch {
	case cfg.Issuer != "" || cfg.JWKSURL != "" || cfg.KeyFile != "":
		if cfg.JWKSURL != "" && cfg.KeyFile != "" {
			return nil, usageError("--jwks-url and --jwt-key-file both give the JWT issuer's keys: set one")
		}
		j, err := auth.NewJWT(ctx, cfg)
		if err != nil {
			return nil, fmt.Errorf("JWT issuer: %w", err)
		}
		chain = append(chain, j)
	case cfg.Audience != "" || f.tenantClaim != "" || f.rolesClaim != "" || id.TenantClaim != "" || id.RolesClaim != "":
		return nil, usageError("--oidc-audience, --tenant-claim and --roles-claim configure JWTs: set --oidc-issuer, --jwks-url or --jwt-key-file too")
	}
	if len(id.APIKeys) > 0 {
		keys, err := auth.NewAPIKeys(id.APIKeys)
		if err != nil {
			return nil, usageError("--config api_keys: %v", err)
		}
		chain = append(chain, keys)
	}
	if len(chain) == 0 {
		return nil, nil
	}
	return chain, nil
}
