package gateway_test

import (
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/fathom-agents/fathom/internal/testenv"
)

// TestListSessionsFromTheIndex: GET /v1/sessions answers from the session index,
// filtered by status and paged by cursor; bad parameters get a clear 400.
func TestListSessionsFromTheIndex(t *testing.T) {
	g := startGW(t, gwOpts{})
	ids := []string{"list-a", "list-b", "list-c"}
	for _, id := range ids {
		if status, out := call(t, g.srv, "POST", "/v1/sessions", token, []byte(fmt.Sprintf(`{"goal":"g","session_id":%q}`, id))); status != 201 {
			t.Fatalf("start %s = %d %v", id, status, out)
		}
	}
	var got []string
	testenv.Eventually(t, 30*time.Second, func() bool {
		got = nil
		cursor := ""
		for page := 0; page < 5; page++ {
			status, out := call(t, g.srv, "GET", "/v1/sessions?status=completed&limit=2&cursor="+url.QueryEscape(cursor), readToken, nil)
			if status != 200 {
				t.Fatalf("list = %d %v", status, out)
			}
			for _, s := range out["sessions"].([]any) {
				m := s.(map[string]any)
				if m["status"] != "completed" || m["seq"].(float64) < 1 || m["due_at"] != nil {
					t.Fatalf("listed %v", m)
				}
				got = append(got, m["session_id"].(string))
			}
			next, _ := out["next_cursor"].(string)
			if next == "" {
				break
			}
			cursor = next
		}
		return fmt.Sprint(got) == fmt.Sprint(ids)
	}, "completed sessions by page: %v, want %v", got, ids)
	if status, out := call(t, g.srv, "GET", "/v1/sessions?status=running", readToken, nil); status != 200 || len(out["sessions"].([]any)) != 0 {
		t.Fatalf("running sessions = %d %v", status, out)
	}
	for _, q := range []string{"status=sleeping", "limit=0", "limit=x", "limit=1001", "cursor=%25%25"} {
		if status, out := call(t, g.srv, "GET", "/v1/sessions?"+q, readToken, nil); status != 400 || out["error"].(map[string]any)["code"] != "invalid_argument" {
			t.Fatalf("?%s = %d %v", q, status, out)
		}
	}
	if status, _ := call(t, g.srv, "GET", "/v1/sessions", "", nil); status != 401 {
		t.Fatalf("list without a token = %d", status)
	}
}
