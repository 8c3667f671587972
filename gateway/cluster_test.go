package gateway_test

import (
	"testing"
	"time"

	"github.com/fathom-agents/fathom/internal/buildinfo"
	"github.com/fathom-agents/fathom/internal/testenv"
)

// TestClusterDescribesItsMembers: GET /v1/cluster keeps "members" as addresses and
// describes each member in "member_details": its build version and journal format (as
// it advertises them), its start time, the sessions it hosts and the leases it holds
// (while a session runs on it), and its health; "departed" is a list (empty on a single
// member).
func TestClusterDescribesItsMembers(t *testing.T) {
	g := startGW(t, gwOpts{delayMS: 1500})
	if code, body := call(t, g.srv, "POST", "/v1/sessions", token, []byte(`{"goal":"Print copies of a haiku","session_id":"cluster-1"}`)); code != 201 {
		t.Fatalf("start: %d %v", code, body)
	}
	var out map[string]any
	var self map[string]any
	testenv.Eventually(t, 30*time.Second, func() bool {
		var code int
		code, out = call(t, g.srv, "GET", "/v1/cluster", token, nil)
		if code != 200 {
			t.Fatalf("GET /v1/cluster = %d %v", code, out)
		}
		ds, _ := out["member_details"].([]any)
		if len(ds) != 1 {
			t.Fatalf("member_details = %v", out["member_details"])
		}
		self = ds[0].(map[string]any)
		return self["sessions_hosted"] == 1.0 && self["leases_held"] == 1.0
	}, "the member never showed the running session hosted and its lease held: %v", &out)
	if ms := out["members"].([]any); len(ms) != 1 || ms[0] != out["node"] || self["address"] != out["node"] {
		t.Fatalf("members %v / node %v / the member's address %v", ms, out["node"], self["address"])
	}
	if self["self"] != true || self["version"] != buildinfo.String() || self["journal_format"] != float64(buildinfo.Format) || self["health"] != "passing" {
		t.Fatalf("member %v, want self, version %q, journal format %d, passing", self, buildinfo.String(), buildinfo.Format)
	}
	if out["version"] != buildinfo.String() || out["journal_format"] != float64(buildinfo.Format) {
		t.Fatalf("the node's version %v, format %v", out["version"], out["journal_format"])
	}
	started, err := time.Parse(time.RFC3339Nano, self["started_at"].(string))
	if err != nil || time.Since(started) < 0 || time.Since(started) > time.Minute {
		t.Fatalf("started_at %v: %v", self["started_at"], err)
	}
	if d, ok := out["departed"].([]any); !ok || len(d) != 0 {
		t.Fatalf("departed = %v, want an empty list", out["departed"])
	}
}
