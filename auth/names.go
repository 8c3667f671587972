package auth

import (
	"errors"
	"fmt"
)

// MaxTenantLen bounds a tenant name.
const MaxTenantLen = 64

// MaxSubjectLen bounds a principal's subject.
const MaxSubjectLen = 256

// CheckTenant reports whether s may name a tenant: 1 to MaxTenantLen letters, digits,
// '.', '_' or '-', starting with a letter or digit. Tenants end up in store keys and
// path prefixes, so a credential naming any other tenant is refused.
func CheckTenant(s string) error {
	if s == "" {
		return errors.New("empty tenant")
	}
	if len(s) > MaxTenantLen {
		return fmt.Errorf("tenant longer than %d bytes", MaxTenantLen)
	}
	for i, c := range []byte(s) {
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if !alnum && (i == 0 || c != '.' && c != '_' && c != '-') {
			return fmt.Errorf("tenant %q: want letters, digits, '.', '_' or '-', starting with a letter or digit", s)
		}
	}
	return nil
}

// CheckSubject reports whether s may be a principal's subject: 1 to MaxSubjectLen bytes
// without control characters.
func CheckSubject(s string) error {
	if s == "" {
		return errors.New("empty subject")
	}
	if len(s) > MaxSubjectLen {
		return fmt.Errorf("subject longer than %d bytes", MaxSubjectLen)
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return errors.New("subject with a control character")
		}
	}
	return nil
}
