// Package persistence owns Fathom's durable state: the event journal and its snapshots.
//
// # Journal
//
// [Journal] is an append-only store of ordered records per stream with optimistic
// concurrency: every Append names the sequence number it expects to follow, and a second
// writer racing for the same position gets [ErrConflict]. That conflict is the fence that
// stops a duplicate activation of a session grain from forking its history.
//
// Implementations live in subpackages and pass one conformance suite
// (persistence/journaltest):
//
//   - persistence/bolt: a single-file embedded journal (bbolt), the default for `fathom run`.
//   - persistence/postgres: PostgreSQL through pgx v5, the production store; its schema is in
//     the top-level migrations/ folder.
//   - persistence/memjournal: in memory, not durable (tests, `fathom run --journal memory`).
//
// A node's journal is a [SessionStore]: the Journal and every capability the node builds
// on (the session index with its leases, deletes, counts, tenants' usage, the append
// observer), declared in that one interface and checked at start ([CheckSessionStore]).
// One capability is optional: [AsyncIndexAppender], an indexed append whose outcome is
// passed to a callback so that nothing waits on the commit (PostgreSQL);
// [AppendIndexedAsync] uses it, or runs AppendIndexed on a goroutine of its own.
//
// persistence/protoactor adapts any Journal to Proto.Actor's persistence.Provider so plain
// actors that use the standard persistence Mixin are stored in the same place.
//
// # Example
//
//	j, err := bolt.Open(filepath.Join(dir, "journal.db"), bolt.Options{})
//	if err != nil { ... }
//	defer j.Close()
//	last, err := j.Append(ctx, "session-1", 0, []persistence.Record{{Type: "session_started", Data: b}})
//	if errors.Is(err, persistence.ErrConflict) { ... another writer won ... }
package persistence
