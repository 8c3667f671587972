package messages

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// MaxSessionIDBytes bounds a session id (the common file system limit of a name: a
// session id is the first segment of its artifacts' paths).
const MaxSessionIDBytes = 255

// ErrInvalidSessionID is wrapped by every error of ValidateSessionID.
var ErrInvalidSessionID = errors.New("invalid session id")

// SessionIDError says which rule of ValidateSessionID a session id breaks. It wraps
// ErrInvalidSessionID.
type SessionIDError struct {
	// ID is the id as given.
	ID string
	// Rule is the rule it breaks, in words ("contains U+202E, a format character ...").
	Rule string
}

// Error implements error.
func (e *SessionIDError) Error() string {
	id := e.ID
	if len(id) > 64 {
		n := 64
		for n > 0 && !utf8.RuneStart(id[n]) {
			n--
		}
		id = id[:n] + "…"
	}
	return fmt.Sprintf("%v %q: %s", ErrInvalidSessionID, id, e.Rule)
}

// Unwrap returns ErrInvalidSessionID.
func (e *SessionIDError) Unwrap() error { return ErrInvalidSessionID }

// ValidateSessionID checks the rules every session id follows, wherever it enters (the
// gateway, the session grain's Start and Fork, the fathom Go API): a session id is
// non-empty, at most MaxSessionIDBytes bytes of valid UTF-8 in Unicode normalization form
// NFC, does not start with "." and contains no "/", "\", white space, control character
// (category Cc), format character (Cf: invisible and bidi controls such as U+202E), line
// separator (Zl) or paragraph separator (Zp). So the id a client sees is the id stored,
// and it is always a valid artifact path segment. The error is a *SessionIDError that
// names the rule.
func ValidateSessionID(id string) error {
	fail := func(format string, args ...any) error {
		return &SessionIDError{ID: id, Rule: fmt.Sprintf(format, args...)}
	}
	switch {
	case id == "":
		return fail("is empty")
	case len(id) > MaxSessionIDBytes:
		return fail("is %d bytes, the limit is %d", len(id), MaxSessionIDBytes)
	case !utf8.ValidString(id):
		return fail("is not valid UTF-8")
	case strings.HasPrefix(id, "."):
		return fail(`starts with "." (names starting with "." are reserved)`)
	}
	for _, r := range id {
		switch {
		case r == '/' || r == '\\':
			return fail("contains %q: a session id is one path segment", r)
		case unicode.Is(unicode.Cc, r):
			return fail("contains %U, a control character (Unicode category Cc)", r)
		case unicode.Is(unicode.Cf, r):
			return fail("contains %U, a format character (Unicode category Cf: invisible and bidi characters are not allowed)", r)
		case unicode.Is(unicode.Zl, r):
			return fail("contains %U, a line separator (Unicode category Zl)", r)
		case unicode.Is(unicode.Zp, r):
			return fail("contains %U, a paragraph separator (Unicode category Zp)", r)
		case unicode.IsSpace(r):
			return fail("contains %U, white space", r)
		}
	}
	if !norm.NFC.IsNormalString(id) {
		return fail("is not in Unicode normalization form NFC (send its NFC form %q)", norm.NFC.String(id))
	}
	return nil
}
