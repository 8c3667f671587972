package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/fathom-agents/fathom/auth"
)

// roleList is a repeatable --role flag.
type roleList []auth.Role

func (r *roleList) String() string {
	if r == nil {
		return ""
	}
	s := make([]string, len(*r))
	for i, x := range *r {
		s[i] = string(x)
	}
	return strings.Join(s, ",")
}

func (r *roleList) Set(v string) error {
	for n := range strings.SplitSeq(v, ",") {
		role := auth.Role(strings.TrimSpace(n))
		if !auth.ValidRole(role) {
			return fmt.Errorf("unknown role %q: want admin, operator, member or viewer", n)
		}
		*r = append(*r, role)
	}
	return nil
}

// runAPIKey runs `fathom apikey new`: it prints a fresh API key once and the
// api_keys entry, with the key's hash, that makes the node accept it.
func runAPIKey(_ context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "new" {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
			fmt.Fprintln(stdout, "Usage: fathom apikey new --tenant T --name N [--role R]... [--hash argon2id|bcrypt]\n\nRun 'fathom apikey new -h' for its flags.")
			return nil
		}
		return usageError("want a subcommand: new")
	}
	fs := newFlagSet("apikey new", "--tenant T --name N [--role R]... [--hash argon2id|bcrypt]", stderr)
	tenant := fs.String("tenant", "", "tenant of the key's principal (letters, digits, '.', '_', '-')")
	name := fs.String("name", "", "name of the key's principal: its subject, as sessions and the audit trail show it")
	var roles roleList
	fs.Var(&roles, "role", "role of the key's principal: admin, operator, member or viewer; repeat or comma-separate for several (default: member)")
	hash := fs.String("hash", auth.HashArgon2id, "hash the configuration file stores: argon2id or bcrypt")
	pos, err := parseFlags(fs, args[1:])
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageError("apikey new takes no arguments, got %q", pos[0])
	}
	if *tenant == "" || *name == "" {
		return usageError("apikey new needs --tenant and --name")
	}
	if err := auth.CheckTenant(*tenant); err != nil {
		return usageError("--tenant: %v", err)
	}
	if err := auth.CheckSubject(*name); err != nil {
		return usageError("--name: %v", err)
	}
	if *hash != auth.HashArgon2id && *hash != auth.HashBcrypt {
		return usageError("--hash %q: want %s or %s", *hash, auth.HashArgon2id, auth.HashBcrypt)
	}
	key, e, err := auth.NewAPIKey(*tenant, *name, roles, *hash)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "API key (shown only now; give it to its holder, who sends it as \"Authorization: Bearer KEY\"):\n\n  %s\n\n", key)
	fmt.Fprintf(stdout, "Add this entry to the api_keys list of the node's configuration file (--config) and restart the node:\n\napi_keys:\n")
	fmt.Fprintf(stdout, "  - id: %s\n    name: %s\n    tenant: %s\n", e.ID, yamlQuote(e.Name), e.Tenant)
	if len(e.Roles) > 0 {
		fmt.Fprintf(stdout, "    roles: [%s]\n", roles.String())
	}
	fmt.Fprintf(stdout, "    hash: '%s'\n", e.Hash)
	return nil
}

// yamlQuote quotes s as a single-quoted YAML scalar.
func yamlQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
