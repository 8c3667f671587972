package persistence

import (
	"fmt"
	"strings"
)

// SessionStore is the whole contract of a node's journal, in one place: the event
// journal and every capability the node builds on. A journal backend implements all of
// it (and declares so with `var _ persistence.SessionStore = (*Journal)(nil)`); the
// conformance suite (persistence/journaltest) runs every capability; a node refuses to
// start on a journal that lacks one (CheckSessionStore), so no node silently runs
// without leases, reactivation, delete or listing.
type SessionStore interface {
	// Journal stores the events and snapshots.
	Journal
	// SessionIndex keeps the session index: listing (GET /v1/sessions), the due times
	// the reactivator reads, and the leases (renew, release, BreakLeases of a dead member).
	SessionIndex
	// LeaseCounter counts the live leases per member (GET /v1/cluster).
	LeaseCounter
	// SessionDeleter deletes terminal sessions (DELETE /v1/sessions/{id}, the retention
	// janitor) and keeps their tombstones.
	SessionDeleter
	// StatusCounter counts the indexed sessions by status (the fathom_sessions gauge).
	StatusCounter
	// TenantIndex answers the tenants' quotas (internal/quota).
	TenantIndex
	// AppendObservable reports every append (fathom_journal_append_duration_seconds).
	AppendObservable
}

// Capability is one part of SessionStore, as CheckSessionStore names it.
type Capability struct {
	// Name is the interface's name ("persistence.SessionIndex").
	Name string
	// For says what the node does with it.
	For string
	has func(Journal) bool
}

// Capabilities lists the parts of SessionStore beyond Journal, in the order
// CheckSessionStore reports them missing.
var Capabilities = []Capability{
	{Name: "persistence.SessionIndex", For: "session listing, reactivation and leases, BreakLeases included", has: func(j Journal) bool { _, ok := j.(SessionIndex); return ok }},
	{Name: "persistence.LeaseCounter", For: "the live leases per member, GET /v1/cluster", has: func(j Journal) bool { _, ok := j.(LeaseCounter); return ok }},
	{Name: "persistence.SessionDeleter", For: "deleting sessions: DELETE /v1/sessions/{id} and retention", has: func(j Journal) bool { _, ok := j.(SessionDeleter); return ok }},
	{Name: "persistence.StatusCounter", For: "the sessions-by-status gauge", has: func(j Journal) bool { _, ok := j.(StatusCounter); return ok }},
	{Name: "persistence.TenantIndex", For: "the tenants' quotas", has: func(j Journal) bool { _, ok := j.(TenantIndex); return ok }},
	{Name: "persistence.AppendObservable", For: "the append-duration metric", has: func(j Journal) bool { _, ok := j.(AppendObservable); return ok }},
}

// MissingCapabilityError is CheckSessionStore's error: journal Journal lacks the
// capabilities Missing.
type MissingCapabilityError struct {
	// Journal names the journal (a backend's name, or its Go type).
	Journal string
	// Missing are the capabilities it lacks, in Capabilities order.
	Missing []Capability
}

// Error implements error.
func (e *MissingCapabilityError) Error() string {
	parts := make([]string, len(e.Missing))
	for i, c := range e.Missing {
		parts[i] = c.Name + " (" + c.For + ")"
	}
	return fmt.Sprintf("journal %s is not a persistence.SessionStore: it lacks %s", e.Journal, strings.Join(parts, ", "))
}

// CheckSessionStore returns j as a SessionStore, or a *MissingCapabilityError naming
// j (as name) and every capability it lacks. A node calls it at start on the journal it
// was given.
func CheckSessionStore(name string, j Journal) (SessionStore, error) {
	if s, ok := j.(SessionStore); ok {
		return s, nil
	}
	e := &MissingCapabilityError{Journal: name}
	for _, c := range Capabilities {
		if j == nil || !c.has(j) {
			e.Missing = append(e.Missing, c)
		}
	}
	return nil, e
}
