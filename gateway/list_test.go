package gateway_test

import (
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/fathom-agents/fathom/internal/testenv"
)

// TestListSessionsFromTheIndex: GET /v1/sessions answers from the session index, newest
// first, filtered by status, user, creation time and goal text, paged by an opaque
// cursor; every row carries its goal, user, creation time and cost; bad parameters get a
// clear 400.
func TestListSessionsFromTheIndex(t *testing.T) {
	g := startGW(t, gwOpts{})
	type start struct{ id, user, goal string }
	starts := []start{{"list-a", "ann", "Write a haiku about the sea"}, {"list-b", "bob", "Plan a trip"}, {"list-c", "ann", "Summarise the SEA report"}}
	for _, s := range starts {
		body := fmt.Sprintf(`{"goal":%q,"session_id":%q,"user_id":%q}`, s.goal, s.id, s.user)
		if status, out := call(t, g.srv, "POST", "/v1/sessions", token, []byte(body)); status != 201 {
			t.Fatalf("start %s = %d %v", s.id, status, out)
		}
		// Creation times must differ for since/until: wait for this session's row.
		testenv.Eventually(t, 30*time.Second, func() bool {
			return len(listIDs(t, g, "goal="+url.QueryEscape(s.goal))) == 1
		}, "%s is not listed", s.id)
	}
	// page walks the pages of a query and returns the ids.
	page := func(q string) []string {
		var got []string
		cursor := ""
		for i := 0; i < 10; i++ {
			status, out := call(t, g.srv, "GET", "/v1/sessions?limit=2&"+q+"&cursor="+url.QueryEscape(cursor), readToken, nil)
			if status != 200 {
				t.Fatalf("list ?%s = %d %v", q, status, out)
			}
			for _, s := range out["sessions"].([]any) {
				got = append(got, s.(map[string]any)["session_id"].(string))
			}
			next, _ := out["next_cursor"].(string)
			if next == "" {
				break
			}
			cursor = next
		}
		return got
	}
	testenv.Eventually(t, 30*time.Second, func() bool {
		return fmt.Sprint(page("status=completed")) == "[list-c list-b list-a]"
	}, "completed sessions by page: %v, want newest first", page("status=completed"))

	status, out := call(t, g.srv, "GET", "/v1/sessions", readToken, nil)
	if status != 200 {
		t.Fatalf("list = %d %v", status, out)
	}
	rows := map[string]map[string]any{}
	for _, s := range out["sessions"].([]any) {
		m := s.(map[string]any)
		rows[m["session_id"].(string)] = m
	}
	for _, s := range starts {
		m := rows[s.id]
		if m == nil || m["goal"] != s.goal || m["user_id"] != s.user || m["status"] != "completed" || m["seq"].(float64) < 1 || m["due_at"] != nil {
			t.Fatalf("row of %s = %v", s.id, m)
		}
		if _, ok := m["cost_usd"].(float64); !ok {
			t.Fatalf("row of %s has no cost_usd: %v", s.id, m)
		}
	}
	createdB := rows["list-b"]["created_at"].(string)
	createdC := rows["list-c"]["created_at"].(string)
	for q, want := range map[string]string{
		"user_id=ann":                        "[list-c list-a]",
		"goal=sea":                           "[list-c list-a]",
		"goal=SEA&user_id=bob":               "[]",
		"since=" + url.QueryEscape(createdB): "[list-c list-b]",
		"until=" + url.QueryEscape(createdB): "[list-a]",
		"since=" + url.QueryEscape(createdB) + "&until=" + url.QueryEscape(createdC): "[list-b]",
		"status=running": "[]",
	} {
		if got := fmt.Sprint(page(q)); got != want {
			t.Errorf("?%s = %s, want %s", q, got, want)
		}
	}
	for _, q := range []string{"status=sleeping", "limit=0", "limit=x", "limit=1001", "cursor=%25%25", "cursor=bm9wZQ",
		"since=yesterday", "until=2026-13-01", "since=2026-11-24T00:00:00Z&until=2026-11-23T00:00:00Z", "goal=" + strings.Repeat("x", 201)} {
		if status, out := call(t, g.srv, "GET", "/v1/sessions?"+q, readToken, nil); status != 400 || out["error"].(map[string]any)["code"] != "invalid_argument" {
			t.Fatalf("?%s = %d %v", q, status, out)
		}
	}
	if status, _ := call(t, g.srv, "GET", "/v1/sessions", "", nil); status != 401 {
		t.Fatalf("list without a token = %d", status)
	}
}

// listIDs returns the session ids of one GET /v1/sessions?q.
func listIDs(t *testing.T, g *gw, q string) []string {
	t.Helper()
	status, out := call(t, g.srv, "GET", "/v1/sessions?"+q, readToken, nil)
	if status != 200 {
		t.Fatalf("list ?%s = %d %v", q, status, out)
	}
	var ids []string
	for _, s := range out["sessions"].([]any) {
		ids = append(ids, s.(map[string]any)["session_id"].(string))
	}
	return ids
}
