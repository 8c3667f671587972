package live

import "time"

// Restart is one supervision event (an actor restarted, stopped or escalated, or a
// member that left the cluster), as operators see it: the record the node's observer
// (actors/observer) keeps and the gateway streams (subscribe_restarts) and serves.
type Restart struct {
	// Seq numbers the records this member keeps, its own and other members', in the order
	// it saw them, from 1 (a reader follows with "after Seq").
	Seq uint64 `json:"seq"`
	// Node is the address of the member the actor ran on.
	Node string `json:"node"`
	// NodeSeq numbers the records of Node from 1, as Node published them.
	NodeSeq uint64 `json:"node_seq"`
	// Actor is the actor's path on that node.
	Actor string `json:"actor"`
	// Kind classifies the actor (actors/observer's Kind* constants).
	Kind string `json:"kind"`
	// SessionID is the session the actor belongs to ("" when none).
	SessionID string `json:"session_id,omitempty"`
	// Reason is what the actor failed with.
	Reason string `json:"reason"`
	// Directive is the supervisor's decision: restart, stop, escalate or resume ("left"
	// for a member record).
	Directive string `json:"directive"`
	// Count is how many supervision events this actor path has had on this node.
	Count int `json:"count"`
	// At is when the observer saw the event.
	At time.Time `json:"at"`
}
