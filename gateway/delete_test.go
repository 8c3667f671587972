package gateway_test

import (
	"context"
	"testing"
	"time"

	"github.com/fathom-agents/fathom/actors/session"
	"github.com/fathom-agents/fathom/internal/testenv"
)

// TestDeleteSession: DELETE /v1/sessions/{id} refuses a running session with 409 (and
// removes nothing), needs the write token, and removes a terminal session's events,
// snapshots, index row, vectors and artifacts; the session is then unknown (404) and
// a second delete is 404 too.
func TestDeleteSession(t *testing.T) {
	// No recent share: the node embeds every message of the (short) session, so it has
	// vectors to delete (session.Embedding embeds a history from half the recent share).
	g := startGW(t, gwOpts{delayMS: 300, session: func(c *session.Config) {
		c.ContextRatios.Recent, c.ContextRatios.Summary, c.ContextRatios.Semantic = 0, 0.5, 0.5
	}})
	ctx := context.Background()
	const id = "del-1"
	if status, out := call(t, g.srv, "POST", "/v1/sessions", token, []byte(`{"goal":"Write a haiku about the sea","session_id":"del-1"}`)); status != 201 {
		t.Fatalf("start = %d %v", status, out)
	}
	status, out := call(t, g.srv, "DELETE", "/v1/sessions/"+id, token, nil)
	if status != 409 || out["error"].(map[string]any)["code"] != "failed_precondition" {
		t.Fatalf("delete of a running session = %d %v", status, out)
	}
	if len(g.journal(id)) == 0 {
		t.Fatal("a refused delete removed the journal")
	}
	if status, out := call(t, g.srv, "DELETE", "/v1/sessions/"+id, readToken, nil); status != 403 {
		t.Fatalf("delete with the read token = %d %v", status, out)
	}
	testenv.Eventually(t, 60*time.Second, func() bool {
		return len(listIDs(t, g, "status=completed")) == 1
	}, "the session did not complete")
	arts, err := g.n.Artifacts().List(ctx, "default", id, "")
	if err != nil || len(arts) == 0 {
		t.Fatalf("the completed session has no artifacts to delete: %v %v", arts, err)
	}
	// Messages are embedded in the background: the last ones may land after completion.
	testenv.Eventually(t, 10*time.Second, func() bool {
		hits, err := g.n.Vectors().Search(ctx, "default", id, unitVector(g.n.Vectors().Dimensions()), 5)
		return err == nil && len(hits) > 0
	}, "the completed session has no vectors to delete")

	if status, out := call(t, g.srv, "DELETE", "/v1/sessions/"+id, token, nil); status != 200 || out["deleted"] != true || out["session_id"] != id {
		t.Fatalf("delete = %d %v", status, out)
	}
	if evs := g.journal(id); len(evs) != 0 {
		t.Fatalf("%d events left", len(evs))
	}
	if _, ok, err := g.n.Journal().LoadSnapshot(ctx, id, ^uint64(0)); ok || err != nil {
		t.Fatalf("snapshot left: %v %v", ok, err)
	}
	if arts, err := g.n.Artifacts().List(ctx, "default", id, ""); err != nil || len(arts) != 0 {
		t.Fatalf("artifacts left: %v %v", arts, err)
	}
	if hits, err := g.n.Vectors().Search(ctx, "default", id, unitVector(g.n.Vectors().Dimensions()), 5); err != nil || len(hits) != 0 {
		t.Fatalf("vectors left: %v %v", hits, err)
	}
	if ids := listIDs(t, g, ""); len(ids) != 0 {
		t.Fatalf("listed after delete: %v", ids)
	}
	if status, out := call(t, g.srv, "GET", "/v1/sessions/"+id, readToken, nil); status != 404 {
		t.Fatalf("state after delete = %d %v", status, out)
	}
	if status, out := call(t, g.srv, "DELETE", "/v1/sessions/"+id, token, nil); status != 404 || out["error"].(map[string]any)["code"] != "not_found" {
		t.Fatalf("second delete = %d %v", status, out)
	}
}

func unitVector(dims int) []float32 {
	v := make([]float32, dims)
	v[0] = 1
	return v
}
