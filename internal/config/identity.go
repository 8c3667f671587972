package config

import (
	"fmt"
	"path/filepath"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/fathom-agents/fathom/auth"
)

// Identity is who the gateway accepts besides its static tokens: JWTs of an OIDC
// issuer (each key has its flag and variable, which take precedence) and the static
// API keys, hashed, of api_keys.
//
//	oidc_issuer: https://login.example.com/realms/fathom
//	oidc_audience: fathom
//	tenant_claim: tenant
//	roles_claim: roles
//	console_oidc_client_id: fathom-console
//	api_keys:
//	  - id: 5f0c2a9d41e7b386
//	    name: ci-bot
//	    tenant: acme
//	    roles: [operator]
//	    hash: '$argon2id$v=19$m=19456,t=2,p=1$...$...'
type Identity struct {
	// OIDCIssuer is oidc_issuer (--oidc-issuer).
	OIDCIssuer string
	// JWKSURL is jwks_url (--jwks-url).
	JWKSURL string
	// JWTKeyFile is jwt_key_file (--jwt-key-file), resolved next to the file.
	JWTKeyFile string
	// OIDCAudience is oidc_audience (--oidc-audience).
	OIDCAudience string
	// TenantClaim is tenant_claim (--tenant-claim).
	TenantClaim string
	// RolesClaim is roles_claim (--roles-claim).
	RolesClaim string
	// ConsoleOIDCClientID is console_oidc_client_id (--console-oidc-client-id): the web
	// console's client id at the OIDC issuer.
	ConsoleOIDCClientID string
	// APIKeys are the api_keys entries, in file order.
	APIKeys []auth.APIKey
}

func init() { // identities besides the static tokens
	register("oidc_issuer", identityString(func(i *Identity) *string { return &i.OIDCIssuer }, true))
	register("jwks_url", identityString(func(i *Identity) *string { return &i.JWKSURL }, true))
	register("jwt_key_file", parseJWTKeyFile)
	register("oidc_audience", identityString(func(i *Identity) *string { return &i.OIDCAudience }, false))
	register("tenant_claim", identityString(func(i *Identity) *string { return &i.TenantClaim }, false))
	register("roles_claim", identityString(func(i *Identity) *string { return &i.RolesClaim }, false))
	register("console_oidc_client_id", identityString(func(i *Identity) *string { return &i.ConsoleOIDCClientID }, false))
	register("api_keys", parseAPIKeys)
}

// identityString returns the section parser of a string key of Identity.
func identityString(field func(*Identity) *string, url bool) section {
	return func(p *parser, f *File, key string, _, v *yaml.Node) error {
		s, err := p.str(v, key)
		if err != nil {
			return err
		}
		if s == "" {
			return p.err(v, key, "must not be empty (leave the key out instead)")
		}
		if url && !strings.HasPrefix(s, "https://") && !strings.HasPrefix(s, "http://") {
			return p.err(v, key, fmt.Sprintf("%q is not an http:// or https:// URL", s))
		}
		*field(&f.Identity) = s
		return nil
	}
}

// parseJWTKeyFile reads jwt_key_file, a path relative to the configuration file.
func parseJWTKeyFile(p *parser, f *File, key string, _, v *yaml.Node) error {
	s, err := p.str(v, key)
	if err != nil {
		return err
	}
	if s == "" {
		return p.err(v, key, "must not be empty (leave the key out instead)")
	}
	if !filepath.IsAbs(s) {
		s = filepath.Join(filepath.Dir(p.file), s)
	}
	f.Identity.JWTKeyFile = s
	return nil
}

// apiKeyKeys are the keys of one api_keys entry.
var apiKeyKeys = map[string]func(k *auth.APIKey, p *parser, path string, v *yaml.Node) error{
	"id": func(k *auth.APIKey, p *parser, path string, v *yaml.Node) (err error) {
		if k.ID, err = p.str(v, path); err == nil {
			if cerr := auth.CheckAPIKeyID(k.ID); cerr != nil {
				return p.err(v, path, cerr.Error())
			}
		}
		return err
	},
	"name": func(k *auth.APIKey, p *parser, path string, v *yaml.Node) (err error) {
		if k.Name, err = p.str(v, path); err == nil {
			if cerr := auth.CheckSubject(k.Name); cerr != nil {
				return p.err(v, path, cerr.Error())
			}
		}
		return err
	},
	"tenant": func(k *auth.APIKey, p *parser, path string, v *yaml.Node) (err error) {
		if k.Tenant, err = p.str(v, path); err == nil {
			if cerr := auth.CheckTenant(k.Tenant); cerr != nil {
				return p.err(v, path, cerr.Error())
			}
		}
		return err
	},
	"roles": func(k *auth.APIKey, p *parser, path string, v *yaml.Node) error {
		names, err := p.strList(v, path)
		if err != nil {
			return err
		}
		for i, n := range names {
			if !auth.ValidRole(auth.Role(n)) {
				return p.err(v.Content[i], fmt.Sprintf("%s[%d]", path, i), fmt.Sprintf("unknown role %q (want admin, operator, member or viewer)", n))
			}
			k.Roles = append(k.Roles, auth.Role(n))
		}
		return nil
	},
	"hash": func(k *auth.APIKey, p *parser, path string, v *yaml.Node) (err error) {
		if k.Hash, err = p.str(v, path); err == nil {
			if cerr := auth.CheckKeyHash(k.Hash); cerr != nil {
				return p.err(v, path, cerr.Error())
			}
		}
		return err
	},
}

// parseAPIKeys reads the api_keys section: each entry's id, name, tenant, roles and
// hash (the key itself is never in the file).
func parseAPIKeys(p *parser, f *File, key string, _, v *yaml.Node) error {
	if v.Kind == yaml.ScalarNode && v.Tag == "!!null" {
		return nil
	}
	if v.Kind != yaml.SequenceNode {
		return p.err(v, key, "must be a list of keys (- id: ..., name: ..., tenant: ..., hash: ...)")
	}
	ids := map[string]int{}
	for i, item := range v.Content {
		path := fmt.Sprintf("%s[%d]", key, i)
		var k auth.APIKey
		err := p.mapping(item, path, func(name string, kn, vn *yaml.Node) error {
			parse, ok := apiKeyKeys[name]
			if !ok {
				return p.err(kn, join(path, name), "unknown key (want "+keyList(apiKeyKeys)+")")
			}
			return parse(&k, p, join(path, name), vn)
		})
		if err != nil {
			return err
		}
		for _, req := range []struct{ name, val string }{{"id", k.ID}, {"name", k.Name}, {"tenant", k.Tenant}, {"hash", k.Hash}} {
			if req.val == "" {
				return p.err(item, path, "set "+req.name+" (every key has id, name, tenant and hash; `fathom apikey new` prints one)")
			}
		}
		if first, dup := ids[k.ID]; dup {
			return p.err(item, join(path, "id"), fmt.Sprintf("duplicate id %q (first at line %d)", k.ID, first))
		}
		ids[k.ID] = item.Line
		f.Identity.APIKeys = append(f.Identity.APIKeys, k)
	}
	return nil
}
