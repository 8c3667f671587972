package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fathom-agents/fathom/internal/testenv"
	"github.com/fathom-agents/fathom/persistence"
)

// clusterMember returns the member_details entry of addr in a GET /v1/cluster body.
func clusterMember(body map[string]any, addr string) map[string]any {
	ds, _ := body["member_details"].([]any)
	for _, d := range ds {
		if m, _ := d.(map[string]any); m["address"] == addr {
			return m
		}
	}
	return nil
}

// TestClusterViewShowsADeadMember: two `fathom node` processes on Consul, built with a
// version (-ldflags -X main.version). Each sees the other with the version and journal
// format it advertises in its Consul service meta, its start time, and the sessions it
// hosts; once A is killed (SIGKILL), B's GET /v1/cluster lists it as departed, dropped
// as dead, with the sessions B took over from it, and no longer among the members.
func TestClusterViewShowsADeadMember(t *testing.T) {
	t.Parallel()
	consul := testenv.ConsulAddr(t)
	dsn := testenv.PostgresDSN(t)
	const token = "t"
	model := startMockLLM(t, `{"rules":[
		{"system_match":"FATHOM-ROLE: orchestrator","response":"{\"steps\":[`+
		`{\"id\":\"a\",\"type\":\"custom\",\"description\":\"one\"},{\"id\":\"b\",\"type\":\"custom\",\"description\":\"two\"},`+
		`{\"id\":\"c\",\"type\":\"custom\",\"description\":\"three\"},{\"id\":\"d\",\"type\":\"custom\",\"description\":\"four\"}]}"},
		{"system_match":"FATHOM-ROLE: executor","response":"done {{.Step}}","delay_ms":1000}]}`)
	env := cleanEnv("OPENAI_BASE_URL="+model, "OPENAI_API_KEY=x")
	common := []string{"--consul", consul, "--postgres", dsn, "--token", token, "--lease-ttl", "60s",
		"--cluster-name", "fathom-clusterview-" + freePort(t)}
	a := startNode(t, env, common...)
	b := startNode(t, env, common...)

	// Start sessions through A until one is hosted by A (identity hashing decides).
	var ids []string
	victim := ""
	testenv.Eventually(t, 60*time.Second, func() bool {
		id := fmt.Sprintf("view-%d-%d", time.Now().UnixNano(), len(ids))
		code, body := httpJSON(t, "POST", a.url+"/v1/sessions", token, map[string]any{"goal": "be seen", "session_id": id, "command_id": "c1"})
		if code != 201 {
			t.Logf("start %s: %d %v", id, code, body)
			return false
		}
		ids = append(ids, id)
		if _, st := httpJSON(t, "GET", a.url+"/v1/sessions/"+id, token, nil); st["host"] == a.member {
			victim = id
		}
		return victim != ""
	}, "no session was placed on node A (%s): %v", a.member, ids)

	var view map[string]any
	testenv.Eventually(t, 30*time.Second, func() bool {
		_, view = httpJSON(t, "GET", b.url+"/v1/cluster", token, nil)
		ma, mb := clusterMember(view, a.member), clusterMember(view, b.member)
		return ma != nil && mb != nil && ma["sessions_hosted"].(float64) >= 1 && ma["leases_held"].(float64) >= 1
	}, "B's cluster view never showed A hosting its session: %v", &view)
	for _, addr := range []string{a.member, b.member} {
		m := clusterMember(view, addr)
		if !strings.HasPrefix(fmt.Sprint(m["version"]), testVersion) || m["journal_format"] != float64(persistence.Format) || m["started_at"] == nil || m["health"] != "passing" {
			t.Fatalf("B sees member %s as %v: want version %s, journal format %d, a start time, passing", addr, m, testVersion, persistence.Format)
		}
	}

	if err := a.cmd.Process.Kill(); err != nil { // SIGKILL: no leave, no lease release
		t.Fatal(err)
	}
	_ = a.cmd.Wait()
	var dep map[string]any
	testenv.Eventually(t, 60*time.Second, func() bool {
		_, view = httpJSON(t, "GET", b.url+"/v1/cluster", token, nil)
		ds, _ := view["departed"].([]any)
		for _, d := range ds {
			if m, _ := d.(map[string]any); m["address"] == a.member && m["sessions_moved"].(float64) >= 1 {
				dep = m
			}
		}
		return dep != nil && clusterMember(view, a.member) == nil
	}, "B's cluster view never listed A as departed with its sessions moved: %v", &view)
	if dep["how"] != "dead" || dep["left_at"] == nil || dep["moved_at"] == nil || !strings.HasPrefix(fmt.Sprint(dep["version"]), testVersion) {
		t.Fatalf("A departed as %v: want dropped as dead, when, its sessions' move and its version", dep)
	}
	if ms := view["members"].([]any); len(ms) != 1 || ms[0] != b.member {
		t.Fatalf("members after the kill = %v, want only B", ms)
	}
}
