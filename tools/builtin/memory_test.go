package builtin_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fathom-agents/fathom/auth"
	"github.com/fathom-agents/fathom/memory/hashembed"
	"github.com/fathom-agents/fathom/persistence/ltm"
	"github.com/fathom-agents/fathom/persistence/ltm/ltmbolt"
	"github.com/fathom-agents/fathom/tools"
	"github.com/fathom-agents/fathom/tools/builtin"
)

func memoryExecutor(t *testing.T) (*tools.Executor, ltm.Store) {
	t.Helper()
	store, err := ltmbolt.Open(filepath.Join(t.TempDir(), ltmbolt.File), 64)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	reg, err := builtin.Registry(builtin.Options{Memory: &builtin.MemoryTools{Store: store, Embedder: hashembed.New(64)}})
	if err != nil {
		t.Fatal(err)
	}
	return &tools.Executor{Registry: reg}, store
}

// memCall runs a memory tool as a session of tenant acme and user runs it.
func memCall(e *tools.Executor, user, key, name, args string) tools.Result {
	ctx := auth.WithTenant(context.Background(), "acme")
	return e.Run(ctx, tools.Call{ID: "c1", Name: name, Args: json.RawMessage(args), SessionID: "s-1", StepID: "st1", IdempotencyKey: key, UserID: user})
}

// TestRememberRecallForget: remember saves a memory of the session's user (reported
// for the memory_saved event, its id derived from its namespace and text, so saving
// the same fact again replaces it), recall finds it by an identifier and lists the newest for an
// empty query, another user's recall never sees it, forget deletes it; an item over the
// size limit is refused with the limit named, and a session without a user is told why.
func TestRememberRecallForget(t *testing.T) {
	e, _ := memoryExecutor(t)
	r := memCall(e, "u1", "s-1/st1/tool-1", "remember", `{"text":"The user's VPN profile is vpn-eu-3","kind":"preference"}`)
	if r.Err != nil || len(r.Memories) != 1 {
		t.Fatalf("remember: %+v", r)
	}
	w := r.Memories[0]
	if w.Tenant != "acme" || w.User != "u1" || w.Text != "The user's VPN profile is vpn-eu-3" || w.Metadata["kind"] != "preference" || w.ID != builtin.MemoryID(ltm.Namespace{Tenant: "acme", User: "u1"}, "the user's  VPN profile is vpn-eu-3") || w.Deleted {
		t.Fatalf("recorded write %+v", w)
	}
	if again := memCall(e, "u1", "s-2/st1/tool-1", "remember", `{"text":"The user's VPN profile is vpn-eu-3"}`); again.Memories[0].ID != w.ID || !again.Memories[0].Replaced {
		t.Fatalf("saving the same fact again saved another memory: %+v", again.Memories)
	}
	memCall(e, "u1", "s-1/st1/tool-2", "remember", `{"text":"The user works from Lisbon"}`)

	if r := memCall(e, "u1", "k", "recall", `{"query":"vpn-eu-3"}`); r.Err != nil || !strings.HasPrefix(r.Output, "- ["+w.ID+", ") || !strings.Contains(r.Output, "vpn-eu-3") {
		t.Fatalf("recall by identifier: %+v", r)
	}
	if r := memCall(e, "u1", "k", "recall", `{"query":"","limit":1}`); r.Err != nil || !strings.Contains(r.Output, "Lisbon") || strings.Contains(r.Output, "vpn") {
		t.Fatalf("recall with an empty query (the newest): %+v", r)
	}
	if r := memCall(e, "u2", "k", "recall", `{"query":"vpn-eu-3 The user's VPN profile"}`); r.Err != nil || r.Output != "No memories found." {
		t.Fatalf("another user's recall: %+v", r)
	}

	big := memCall(e, "u1", "k2", "remember", `{"text":"`+strings.Repeat("x", ltm.MaxTextBytes+1)+`"}`)
	if big.Err == nil || big.Err.Type != tools.ErrValidation || !strings.Contains(big.Err.Message, "4096") || len(big.Memories) != 0 {
		t.Fatalf("remember over the size limit: %+v", big)
	}
	if r := memCall(e, "", "k3", "remember", `{"text":"x"}`); r.Err == nil || !strings.Contains(r.Err.Message, "user_id") {
		t.Fatalf("remember without a user: %+v", r)
	}

	if r := memCall(e, "u2", "k4", "forget", `{"id":"`+w.ID+`"}`); r.Err == nil || len(r.Memories) != 0 {
		t.Fatalf("another user forgets u1's memory: %+v", r)
	}
	r = memCall(e, "u1", "k5", "forget", `{"id":"`+w.ID+`"}`)
	if r.Err != nil || len(r.Memories) != 1 || !r.Memories[0].Deleted || r.Memories[0].ID != w.ID {
		t.Fatalf("forget: %+v", r)
	}
	if r := memCall(e, "u1", "k", "recall", `{"query":"vpn-eu-3"}`); strings.Contains(r.Output, "vpn-eu-3") {
		t.Fatalf("recall after forget: %+v", r)
	}
}

// TestRememberTTL: a memory expires after the node's TTL (--memory-ttl), or after
// remember's ttl_days when the model gives it; an expired memory is not recalled.
func TestRememberTTL(t *testing.T) {
	store, err := ltmbolt.Open(filepath.Join(t.TempDir(), ltmbolt.File), 64)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	now := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	reg, err := builtin.Registry(builtin.Options{Memory: &builtin.MemoryTools{Store: store, Embedder: hashembed.New(64), TTL: time.Hour, Now: clock}})
	if err != nil {
		t.Fatal(err)
	}
	e := &tools.Executor{Registry: reg}
	if r := memCall(e, "u1", "k1", "remember", `{"text":"short-lived fact"}`); r.Err != nil || !r.Memories[0].ExpiresAt.Equal(now.Add(time.Hour)) {
		t.Fatalf("node TTL: %+v", r)
	}
	if r := memCall(e, "u1", "k2", "remember", `{"text":"a fact for a week","ttl_days":7}`); r.Err != nil || !r.Memories[0].ExpiresAt.Equal(now.Add(7*24*time.Hour)) {
		t.Fatalf("ttl_days: %+v", r)
	}
	// Both expiries are in the past of the real clock the store reads with.
	if r := memCall(e, "u1", "k", "recall", `{"query":"fact"}`); r.Output != "No memories found." {
		t.Fatalf("recall of expired memories: %+v", r)
	}
}
