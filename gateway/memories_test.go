package gateway_test

import (
	"context"
	"encoding/json"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/fathom-agents/fathom/auth"
	"github.com/fathom-agents/fathom/gateway"
	"github.com/fathom-agents/fathom/internal/testenv"
	"github.com/fathom-agents/fathom/llm/mock"
)

// memberTokens authenticates alice and bob, members of acme, eve, a member of globex,
// and ops, an operator of acme.
type memberTokens struct{}

func (memberTokens) Authenticate(_ context.Context, cred string) (auth.Principal, error) {
	switch cred {
	case "alice", "bob":
		return auth.Principal{Subject: cred, Tenant: "acme", Roles: []auth.Role{auth.RoleMember}}, nil
	case "eve":
		return auth.Principal{Subject: "alice", Tenant: "globex", Roles: []auth.Role{auth.RoleMember}}, nil
	case "ops":
		return auth.Principal{Subject: "ops", Tenant: "acme", Roles: []auth.Role{auth.RoleOperator}}, nil
	}
	return auth.Principal{}, auth.ErrNotMine
}

// rememberScript plans one step; the step saves what follows "REMEMBER " in the goal
// with the remember tool, then answers "noted".
func rememberScript(t *testing.T) *mock.Script {
	t.Helper()
	s, err := mock.ParseScript([]byte(`{"rules":[
 {"system_match":"FATHOM-ROLE: orchestrator","response":"{\"steps\":[{\"id\":\"s1\",\"type\":\"custom\",\"description\":\"note it\"}]}"},
 {"system_match":"FATHOM-ROLE: executor","tool_match":".","response":"noted"},
 {"system_match":"FATHOM-ROLE: executor","match":"REMEMBER","tool_calls":[{"name":"remember","arguments":"{\"text\":{{json (find \"REMEMBER (.*)\" .Goal)}}}"}]},
 {"system_match":"FATHOM-ROLE: executor","response":"nothing to note"}
]}`))
	if err != nil {
		t.Fatal(err)
	}
	return &s
}

func memoriesOf(t *testing.T, body []byte) []gateway.Memory {
	t.Helper()
	var l gateway.MemoryList
	if err := json.Unmarshal(body, &l); err != nil {
		t.Fatalf("memory list %s: %v", body, err)
	}
	return l.Memories
}

// TestMemoriesRoutes: /v1/memories lists, searches (?q=), gets, edits (PATCH) and
// deletes the memories sessions saved with remember, per principal: a member reaches
// their own memories only (another user's are refused, another tenant's user of the
// same name is another namespace), an operator names any user of the tenant; every
// answer matches openapi.json.
func TestMemoriesRoutes(t *testing.T) {
	g := openAPIGW(t, gwOpts{longTerm: true, script: rememberScript(t), cfg: func(c *gateway.Config) { c.Authenticator = memberTokens{} }})
	s := loadOpenAPISchemas(t, g)
	start := func(tok, goal string) {
		t.Helper()
		body, _ := json.Marshal(map[string]string{"goal": goal, "user_id": map[string]string{"alice": "alice", "bob": "bob", "eve": "alice"}[tok]})
		status, _, raw := fetch(t, g, "POST", "/v1/sessions", tok, string(body))
		var started struct {
			SessionID string `json:"session_id"`
		}
		if err := json.Unmarshal(raw, &started); status != 201 || err != nil {
			t.Fatalf("start %q: %d %s", goal, status, raw)
		}
		testenv.Eventually(t, 30*time.Second, func() bool {
			status, _, raw := fetch(t, g, "GET", "/v1/sessions/"+started.SessionID, tok, "")
			return status == 200 && strings.Contains(string(raw), "SESSION_STATUS_COMPLETED")
		}, "session %q did not complete", goal)
	}
	start("alice", "REMEMBER Alice's locker code is LOCK-4417")
	start("alice", "REMEMBER Alice prefers tea over coffee")
	start("bob", "REMEMBER Bob's locker code is LOCK-9001")
	start("eve", "REMEMBER The globex alice likes LOCK-4417 too")

	status, ctype, body := fetch(t, g, "GET", "/v1/memories", "alice", "")
	s.check("GET", "/v1/memories", status, ctype, body)
	list := memoriesOf(t, body)
	if status != 200 || len(list) != 2 || list[0].Text != "Alice prefers tea over coffee" || list[0].User != "alice" || list[0].Tenant != "acme" || list[0].SessionID == "" {
		t.Fatalf("alice's list: %d %s", status, body)
	}
	status, ctype, body = fetch(t, g, "GET", "/v1/memories?q="+url.QueryEscape("LOCK-4417"), "alice", "")
	s.check("GET", "/v1/memories", status, ctype, body)
	hits := memoriesOf(t, body)
	if len(hits) == 0 || hits[0].Text != "Alice's locker code is LOCK-4417" || hits[0].Score == nil {
		t.Fatalf("alice's search: %s", body)
	}
	for _, h := range hits {
		if h.User != "alice" || h.Tenant != "acme" {
			t.Fatalf("alice's search returned another namespace's memory: %+v", h)
		}
	}
	lockerID := hits[0].ID

	// Another member: bob sees his own only, and may not name alice.
	if status, _, body = fetch(t, g, "GET", "/v1/memories?q=LOCK-4417", "bob", ""); len(memoriesOf(t, body)) != 1 || strings.Contains(string(body), "4417") {
		t.Fatalf("bob's search: %d %s", status, body)
	}
	for _, path := range []string{"/v1/memories?user=alice", "/v1/memories/" + lockerID + "?user=alice"} {
		status, ctype, body = fetch(t, g, "GET", path, "bob", "")
		if status != 403 {
			t.Fatalf("bob reads alice's memories %s: %d %s", path, status, body)
		}
	}
	s.check("GET", "/v1/memories/{id}", status, ctype, body)
	if status, _, body = fetch(t, g, "DELETE", "/v1/memories/"+lockerID+"?user=alice", "bob", ""); status != 403 {
		t.Fatalf("bob deletes alice's memory: %d %s", status, body)
	}
	// Another tenant's user of the same name: another namespace.
	status, _, body = fetch(t, g, "GET", "/v1/memories/"+lockerID, "eve", "")
	s.check("GET", "/v1/memories/{id}", status, "application/json", body)
	if status != 404 {
		t.Fatalf("globex's alice reads acme's alice's memory: %d %s", status, body)
	}
	if _, _, body = fetch(t, g, "GET", "/v1/memories", "eve", ""); len(memoriesOf(t, body)) != 1 || !strings.Contains(string(body), "globex alice") {
		t.Fatalf("globex's alice's list: %s", body)
	}

	// An operator names any user of the tenant.
	status, ctype, body = fetch(t, g, "GET", "/v1/memories/"+lockerID+"?user=alice", "ops", "")
	s.check("GET", "/v1/memories/{id}", status, ctype, body)
	if status != 200 || !strings.Contains(string(body), "LOCK-4417") {
		t.Fatalf("operator gets alice's memory: %d %s", status, body)
	}

	// Edit: the text (found by its new words), the expiry.
	status, ctype, body = fetch(t, g, "PATCH", "/v1/memories/"+lockerID, "alice", `{"text":"Alice's locker code is LOCK-5520","expires_at":"2099-01-01T00:00:00Z"}`)
	s.check("PATCH", "/v1/memories/{id}", status, ctype, body)
	var edited gateway.Memory
	if err := json.Unmarshal(body, &edited); err != nil || status != 200 || edited.Text != "Alice's locker code is LOCK-5520" || edited.ExpiresAt == nil || edited.ExpiresAt.Year() != 2099 {
		t.Fatalf("edit: %d %s", status, body)
	}
	if _, _, body = fetch(t, g, "GET", "/v1/memories?q=LOCK-5520", "alice", ""); !strings.Contains(string(body), lockerID) {
		t.Fatalf("the edited text is not found: %s", body)
	}
	status, ctype, body = fetch(t, g, "PATCH", "/v1/memories/"+lockerID, "alice", `{"text":"`+strings.Repeat("x", 5000)+`"}`)
	s.check("PATCH", "/v1/memories/{id}", status, ctype, body)
	if status != 400 || !strings.Contains(string(body), "4096") {
		t.Fatalf("an edit over the size limit: %d %s", status, body)
	}

	// Delete one, then every memory of the user.
	status, ctype, body = fetch(t, g, "DELETE", "/v1/memories/"+lockerID, "alice", "")
	s.check("DELETE", "/v1/memories/{id}", status, ctype, body)
	if status != 200 {
		t.Fatalf("delete: %d %s", status, body)
	}
	if status, _, _ = fetch(t, g, "GET", "/v1/memories/"+lockerID, "alice", ""); status != 404 {
		t.Fatalf("deleted memory: %d", status)
	}
	status, ctype, body = fetch(t, g, "DELETE", "/v1/memories?user=alice", "alice", "")
	s.check("DELETE", "/v1/memories", status, ctype, body)
	if status != 200 || !strings.Contains(string(body), `"deleted":1`) {
		t.Fatalf("delete alice's memories: %d %s", status, body)
	}
	if _, _, body = fetch(t, g, "GET", "/v1/memories", "alice", ""); len(memoriesOf(t, body)) != 0 {
		t.Fatalf("alice's memories after deleting them: %s", body)
	}
	if _, _, body = fetch(t, g, "GET", "/v1/memories", "bob", ""); len(memoriesOf(t, body)) != 1 {
		t.Fatalf("bob's memories after alice's were deleted: %s", body)
	}
}

// TestMemoriesWithoutLongTermMemory: a node without long-term memory answers
// /v1/memories with 501 unsupported.
func TestMemoriesWithoutLongTermMemory(t *testing.T) {
	g := startGW(t, gwOpts{})
	status, _, body := fetch(t, g, "GET", "/v1/memories?user=u", token, "")
	if status != 501 || !strings.Contains(string(body), "long-term memory is off") {
		t.Fatalf("GET /v1/memories: %d %s", status, body)
	}
}
