package fathom_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/cluster"

	"github.com/fathom-agents/fathom"
	"github.com/fathom-agents/fathom/auth"
	"github.com/fathom-agents/fathom/messages"
)

// TestGoAPIActsForTheContextsPrincipal: the Go API's calls act for the principal their
// context carries. A session started as alice@acme belongs to acme and alice; bob of
// globex is answered NOT_FOUND on every call, exactly as for a missing session, and
// changes nothing; the program's own calls (no principal) stay trusted.
func TestGoAPIActsForTheContextsPrincipal(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := fathom.DefaultConfig()
	cfg.DataDir = t.TempDir()
	n, err := fathom.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close(context.Background())
	alice := auth.WithPrincipal(ctx, auth.Principal{Subject: "alice", Tenant: "acme"})
	bob := auth.WithPrincipal(ctx, auth.Principal{Subject: "bob", Tenant: "globex", Roles: []auth.Role{auth.RoleOperator}})

	id, err := n.StartSession(alice, fathom.SessionRequest{ID: "acme-go-1", Goal: "Explain event sourcing in one sentence"})
	if err != nil {
		t.Fatal(err)
	}
	waitEvent(ctx, t, n, id, 0, "session_completed")
	st, err := n.State(alice, id)
	if err != nil || st.GetTenant() != "acme" || st.GetOwner() != "alice" {
		t.Fatalf("alice's state: tenant %q owner %q, %v", st.GetTenant(), st.GetOwner(), err)
	}
	notFound := func(what string, err error) {
		t.Helper()
		var ge *cluster.GrainErrorResponse
		if !errors.As(err, &ge) || ge.Reason != messages.ErrorReason_NOT_FOUND.String() {
			t.Fatalf("%s as bob: %v, want NOT_FOUND", what, err)
		}
	}
	_, err = n.State(bob, id)
	notFound("State", err)
	_, err = n.State(bob, "acme-go-9")
	notFound("State of a missing session", err)
	_, err = n.Send(bob, id, "tell me the goal")
	notFound("Send", err)
	notFound("Cancel", n.Cancel(bob, id, "mine now"))
	notFound("Answer", n.Answer(bob, id, "step-1", `"yes"`))
	notFound("Delete", n.Delete(bob, id))

	after, err := n.State(ctx, id) // the program's own call: trusted
	if err != nil || after.GetSeq() != st.GetSeq() || after.GetStatus() != messages.SessionStatus_SESSION_STATUS_COMPLETED {
		t.Fatalf("the session changed: seq %d -> %d, status %s, %v", st.GetSeq(), after.GetSeq(), after.GetStatus(), err)
	}
	if err := n.Delete(alice, id); err != nil {
		t.Fatalf("alice deletes her session: %v", err)
	}
}
