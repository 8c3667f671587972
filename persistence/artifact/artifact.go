package artifact

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Store keeps the artifacts of sessions: small files (at most a configured size, 10 MiB
// by default) addressed by "{session_id}/{type}/{filename}" within their session's
// tenant. The tenant is part of every physical key (Ref.Key: a path prefix in a
// directory or bucket), so an artifact is reachable only through its own tenant: the
// same session id and path under another tenant is another artifact, or none.
// Implementations are safe for concurrent use, validate every tenant with
// ValidateTenant and every path with ParsePath / Ref.Validate and report failures
// wrapping the sentinels below, so callers branch with errors.Is.
//
// Artifacts stored before tenancy have no tenant prefix (their key is their path, see
// LegacyKey). Read and List fall back to them under any tenant (a session id belongs to
// one tenant, and callers check the session is the caller's before asking), and Delete
// removes them with the tenant's; Write always writes under the tenant.
type Store interface {
	// Write stores content at ref's key (ref.Tenant's prefix and ref's path),
	// replacing what was there. The write is atomic: a reader sees the old content or
	// the new one, never a mix. contentType "" means application/octet-stream. The
	// returned Info says whether the path held an artifact before (Overwrote). Errors:
	// ErrInvalidPath (also for an invalid tenant), ErrTooLarge, ErrInvalidContentType,
	// ErrClosed.
	Write(ctx context.Context, ref Ref, content []byte, contentType string) (Info, error)

	// Read returns tenant's artifact at path ("{session_id}/{type}/{filename}") and its
	// metadata (Size and SHA256 of the content returned). Errors: ErrNotFound,
	// ErrInvalidPath, ErrClosed.
	Read(ctx context.Context, tenant, path string) ([]byte, Info, error)

	// List returns tenant's artifacts of session sessionID, of type typ ("" = every
	// type), ordered by path. A session without artifacts has an empty list, not an
	// error. Errors: ErrInvalidPath (a bad tenant, session id or type), ErrClosed.
	List(ctx context.Context, tenant, sessionID, typ string) ([]Info, error)

	// Delete removes tenant's artifact at path. Errors: ErrNotFound when there is
	// none, ErrInvalidPath, ErrClosed.
	Delete(ctx context.Context, tenant, path string) error

	// Close releases the store's resources. Calls after Close return ErrClosed.
	Close() error
}

// Errors every Store reports (wrapped). Compare with errors.Is.
var (
	// ErrNotFound: no artifact at the path.
	ErrNotFound = errors.New("artifact not found")
	// ErrInvalidPath: the path, session id, type or filename breaks the rules of
	// ParsePath (a *PathError says which rule).
	ErrInvalidPath = errors.New("invalid artifact path")
	// ErrTooLarge: the content is over the store's size limit (a *SizeError says by how
	// much).
	ErrTooLarge = errors.New("artifact too large")
	// ErrInvalidContentType: the content type is not a MIME type (type/subtype).
	ErrInvalidContentType = errors.New("invalid artifact content type")
	// ErrClosed: the store was closed.
	ErrClosed = errors.New("artifact store closed")
	// ErrQuotaExceeded: the write would take its tenant over a quota of artifact bytes
	// (a *QuotaError says which and by how much). Stores themselves never report it;
	// a store wrapped by the node's tenant quotas (internal/quota) does.
	ErrQuotaExceeded = errors.New("artifact quota exceeded")
)

// QuotaError is the error of a write refused by its tenant's quota of artifact bytes.
// It wraps ErrQuotaExceeded.
type QuotaError struct {
	// Quota names the limit, as the configuration file does (max_artifact_bytes).
	Quota string
	// Tenant is the tenant whose limit it is.
	Tenant string
	// Used are the bytes the tenant's artifacts already took in the limit's period,
	// Size the refused write's and Limit the limit's.
	Used, Size, Limit int64
	// Period says over what Used counts, e.g. "today (UTC)".
	Period string
}

// Error implements error.
func (e *QuotaError) Error() string {
	return fmt.Sprintf("%v: tenant %s wrote %s of artifacts %s; this write of %s would pass its %s of %d bytes (%s)",
		ErrQuotaExceeded, e.Tenant, FormatSize(e.Used), e.Period, FormatSize(e.Size), e.Quota, e.Limit, FormatSize(e.Limit))
}

// Unwrap returns ErrQuotaExceeded.
func (e *QuotaError) Unwrap() error { return ErrQuotaExceeded }

// DefaultMaxSize is the default limit of one artifact's content: 10 MiB.
const DefaultMaxSize int64 = 10 << 20

// DefaultContentType is the content type of an artifact written without one.
const DefaultContentType = "application/octet-stream"

// Info describes one stored artifact.
type Info struct {
	Ref
	// Path is Ref.Path(): "{session_id}/{type}/{filename}" (without the tenant).
	Path string `json:"path"`
	// Size is the content's length in bytes.
	Size int64 `json:"size"`
	// ContentType is the MIME type given when it was written.
	ContentType string `json:"content_type"`
	// SHA256 is the content's hex digest.
	SHA256 string `json:"sha256"`
	// ModTime is when it was last written (the store's clock).
	ModTime time.Time `json:"mod_time"`
	// Overwrote is set by Write only: the path held an artifact before this write. With
	// concurrent writers of one path in different processes it is best effort.
	Overwrote bool `json:"overwrote,omitempty"`
}

// SizeError is the error of content over a store's limit. It wraps ErrTooLarge.
type SizeError struct {
	// Size is the content's length; Limit the store's maximum, both in bytes.
	Size, Limit int64
}

// Error implements error.
func (e *SizeError) Error() string {
	return fmt.Sprintf("%v: %s is over the limit of %s", ErrTooLarge, FormatSize(e.Size), FormatSize(e.Limit))
}

// Unwrap returns ErrTooLarge.
func (e *SizeError) Unwrap() error { return ErrTooLarge }

// CheckSize returns a *SizeError when size is over limit (limit <= 0 means
// DefaultMaxSize).
func CheckSize(size, limit int64) error {
	if limit <= 0 {
		limit = DefaultMaxSize
	}
	if size > limit {
		return &SizeError{Size: size, Limit: limit}
	}
	return nil
}

// FormatSize renders n bytes for people: "512 B", "3.2 KiB", "10.0 MiB".
func FormatSize(n int64) string {
	switch {
	case n < 1<<10:
		return fmt.Sprintf("%d B", n)
	case n < 1<<20:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	case n < 1<<30:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
}
