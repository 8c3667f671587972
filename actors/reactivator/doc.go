// Package reactivator keeps a cluster's sessions alive without anyone knocking.
//
// Every node runs one reactivator actor under its root (Proto.Actor's default
// one-for-one strategy restarts it on a crash). At start and then every Interval it asks
// the journal's session index (persistence.SessionIndex) for the sessions that need a
// live activation and have none — due time passed, lease lapsed or released — and pokes
// each through normal grain placement with a cheap idempotent request (the node's Poke,
// a session state query). The poke activates the session on the member identity hashing
// picks; the activation reloads from the journal, takes the lease and starts what is due.
//
// Pokes are at-least-once: two nodes may poke one session in the same sweep, and a poke
// may reach an activation that is alive but slow to renew. That is harmless, because a
// poke never writes: the activation decides what to append, and the journal's expected
// sequence lets exactly one activation write.
//
// # Example
//
//	pid, err := reactivator.Spawn(system.Root, "reactivator", reactivator.Config{
//		Index:    journal, // a persistence.SessionStore
//		Poke:     func(ctx context.Context, id string) error { ... GetState ... },
//		Interval: leaseTTL / 2,
//	})
package reactivator
