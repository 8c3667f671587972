package gateway_test

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"slices"
	"testing"

	"github.com/fathom-agents/fathom/gateway"
	"github.com/fathom-agents/fathom/gateway/a2a"
)

// TestA2AListTasksPageTokens: ListTasks' pages (pageSize 2 over three tasks) cover the
// caller's tasks once, newest first, and the last page's nextPageToken is ""; a
// pageToken ListTasks did not return (not base64, a base64 of another text, a
// GET /v1/sessions cursor of the same session) answers invalid params (-32602).
func TestA2AListTasksPageTokens(t *testing.T) {
	g := startGW(t, gwOpts{script: a2aScript(), cfg: func(c *gateway.Config) { c.Authenticator = tenantTokens{} }})
	a2a.Mount(g.h, a2a.Config{})
	var sent []string
	for _, goal := range []string{"Write a haiku about rain", "Write a haiku about snow", "Write a haiku about fog"} {
		res, e := a2aCall(t, g, "acme", "SendMessage", map[string]any{"message": map[string]any{"messageId": goal, "role": "ROLE_USER",
			"parts": []any{map[string]any{"text": goal}}}})
		if e != nil {
			t.Fatalf("send %q: %v", goal, e)
		}
		sent = append(sent, res["task"].(map[string]any)["id"].(string))
	}
	slices.Reverse(sent) // newest first
	var paged []string
	tok, pages := "", 0
	for {
		res, e := a2aCall(t, g, "acme", "ListTasks", map[string]any{"pageSize": 2, "pageToken": tok})
		if e != nil {
			t.Fatalf("list page %d (token %q): %v", pages+1, tok, e)
		}
		pages++
		for _, task := range res["tasks"].([]any) {
			paged = append(paged, task.(map[string]any)["id"].(string))
		}
		tok = res["nextPageToken"].(string)
		if tok == "" || pages > len(sent) {
			break
		}
	}
	if pages != 2 || !slices.Equal(paged, sent) {
		t.Fatalf("%d pages listed %q, want 2 pages listing %q", pages, paged, sent)
	}

	status, _, body := fetch(t, g, "GET", "/v1/sessions?limit=1", "acme", "")
	var page struct {
		NextCursor string `json:"next_cursor"`
	}
	if err := json.Unmarshal(body, &page); status != http.StatusOK || err != nil || page.NextCursor == "" {
		t.Fatalf("GET /v1/sessions?limit=1: %d %s (%v), want a next_cursor", status, body, err)
	}
	for _, bad := range []string{"not a token!", base64.RawURLEncoding.EncodeToString([]byte("t1.soon." + sent[0])), page.NextCursor} {
		if res, e := a2aCall(t, g, "acme", "ListTasks", map[string]any{"pageSize": 2, "pageToken": bad}); e == nil || e["code"] != float64(a2a.CodeInvalidParams) {
			t.Errorf("pageToken %q: result %v error %v, want invalid params (%d)", bad, res, e, a2a.CodeInvalidParams)
		}
	}
}
