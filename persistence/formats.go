package persistence

import (
	"context"
	"errors"
	"fmt"
)

// ErrFormatGated means an append held an event of a type newer than the lowest journal
// format any member of the cluster advertises: a member of that format could not decode
// it, so it is not written while such a member is in the cluster (a rolling upgrade is
// under way). Nothing of the append was stored. It is not a fault of the journal: the
// append succeeds once every member is upgraded, so the caller retries later (the
// session grain answers unavailable and reloads). Compare with errors.Is; a
// *FormatGateError says which event.
var ErrFormatGated = errors.New("journal: event newer than the cluster's lowest journal format")

// EventFormats is the journal format (Format) that introduced each event type: the
// oldest format whose builds decode it. It is the one place an event type's format is
// declared: a release that adds an event type raises Format and enters the type here
// with the new value, and members write it only once every member of the cluster
// advertises that format (FormatGate). Keys are Record.Type, the payload's snake_case
// name; persistence's tests check that every payload type of messages.Event is here.
//
// Format 2 (the first release that advertises a format, v0.3.0) is where the table
// starts: every event type of that release is format 2's.
var EventFormats = map[string]int{
	"session_started":     2,
	"plan_created":        2,
	"step_started":        2,
	"llm_requested":       2,
	"llm_responded":       2,
	"step_completed":      2,
	"step_failed":         2,
	"session_completed":   2,
	"session_failed":      2,
	"tool_called":         2,
	"tool_result":         2,
	"plan_failed":         2,
	"summary_updated":     2,
	"plan_revised":        2,
	"breakpoint_set":      2,
	"breakpoints_cleared": 2,
	"interrupt_triggered": 2,
	"interrupt_resumed":   2,
	"hitl_requested":      2,
	"hitl_received":       2,
	"session_forked":      2,
	"session_cancelled":   2,
	"subagent_started":    2,
	"subagent_completed":  2,
	"artifact_written":    2,
	"memory_saved":        2,
	"memory_deleted":      2,
	"message_received":    2,
	"webhook_delivered":   2,
	"webhook_failed":      2,
	"message_queued":      2,
	"push_config_set":     3,
	"push_config_deleted": 3,
}

// EventFormat is the journal format that introduced event type typ (EventFormats);
// Format for a type the table does not name (this build wrote it, so this build's
// format reads it).
func EventFormat(typ string) int {
	if f, ok := EventFormats[typ]; ok {
		return f
	}
	return Format
}

// FormatGateError is the error of an append refused by FormatGate: record Index of the
// append to Stream is an event of type Type, introduced by journal format Introduced,
// while a member of the cluster advertises format Lowest. It wraps ErrFormatGated.
type FormatGateError struct {
	// Stream is the stream appended to.
	Stream string
	// Index is the record's position in the append; Type its event type.
	Index int
	Type  string
	// Introduced is the format that introduced Type (EventFormat).
	Introduced int
	// Lowest is the lowest format a member of the cluster advertises.
	Lowest int
}

// Error implements error.
func (e *FormatGateError) Error() string {
	return fmt.Sprintf("%v: event %s (record %d of stream %s) needs journal format %d and a member of the cluster reads only format %d; it is written once every member is upgraded: retry later",
		ErrFormatGated, e.Type, e.Index, e.Stream, e.Introduced, e.Lowest)
}

// Unwrap returns ErrFormatGated.
func (e *FormatGateError) Unwrap() error { return ErrFormatGated }

// CheckFormats returns a *FormatGateError for the first record of recs whose event type
// was introduced by a format above lowest, nil when every member of format lowest
// decodes them all.
func CheckFormats(stream string, recs []Record, lowest int) error {
	for i, r := range recs {
		if f := EventFormat(r.Type); f > lowest {
			return &FormatGateError{Stream: stream, Index: i, Type: r.Type, Introduced: f, Lowest: lowest}
		}
	}
	return nil
}

// FormatGate returns s with Append, AppendIndexed and AppendIndexedAsync refusing (before
// they reach s) an append that holds an event type newer than lowest(), the lowest
// journal format the cluster's members advertise: a *FormatGateError, nothing stored.
// lowest is called on every append and must be cheap. Everything else is s's own (the
// gate is an AsyncIndexAppender whatever s is: an s that is not one appends on a
// goroutine of its own, AppendIndexedAsync).
//
// It is the lowest-version gate of a rolling upgrade: a member of a newer build never
// writes an event an older member still in the cluster cannot decode.
func FormatGate(s SessionStore, lowest func() int) SessionStore {
	return &formatGate{SessionStore: s, lowest: lowest}
}

// FormatGated is implemented by a journal FormatGate returned: the lowest journal
// format of the cluster, as the gate uses it. A release whose sessions should go on
// during the upgrade that introduces an event type asks it and decides an event older
// members understand (its fallback) while it is below the new type's format.
type FormatGated interface {
	// LowestFormat is the lowest journal format a member of the cluster advertises.
	LowestFormat() int
}

type formatGate struct {
	SessionStore
	lowest func() int
}

var (
	_ FormatGated        = (*formatGate)(nil)
	_ AsyncIndexAppender = (*formatGate)(nil)
)

// LowestFormat implements FormatGated.
func (g *formatGate) LowestFormat() int { return g.lowest() }

// Append implements Journal.
func (g *formatGate) Append(ctx context.Context, stream string, expectedSeq uint64, recs []Record) (uint64, error) {
	if err := CheckFormats(stream, recs, g.lowest()); err != nil {
		return 0, err
	}
	return g.SessionStore.Append(ctx, stream, expectedSeq, recs)
}

// AppendIndexed implements SessionIndex.
func (g *formatGate) AppendIndexed(ctx context.Context, stream string, expectedSeq uint64, recs []Record, entry IndexEntry) (uint64, error) {
	if err := CheckFormats(stream, recs, g.lowest()); err != nil {
		return 0, err
	}
	return g.SessionStore.AppendIndexed(ctx, stream, expectedSeq, recs, entry)
}

// AppendIndexedAsync implements AsyncIndexAppender.
func (g *formatGate) AppendIndexedAsync(ctx context.Context, stream string, expectedSeq uint64, recs []Record, entry IndexEntry, done func(last uint64, err error)) {
	if err := CheckFormats(stream, recs, g.lowest()); err != nil {
		go done(0, err)
		return
	}
	AppendIndexedAsync(ctx, g.SessionStore, stream, expectedSeq, recs, entry, done)
}
