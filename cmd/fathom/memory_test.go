package main

import (
	"encoding/json"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fathom-agents/fathom/gateway"
	"github.com/fathom-agents/fathom/internal/testenv"
	"github.com/fathom-agents/fathom/llm/mock"
)

// memoryModel serves a model whose sessions show what their first call knew: a goal
// "REMEMBER fact" plans a step that saves the fact with the remember tool; any other
// goal plans one step whose description says whether the plan call's context (the
// session's first model call) held a locker code: "answer KNOWN-LOCK-n" or "answer
// UNKNOWN". The step answers its description, which is the session's result.
func memoryModel(t *testing.T) []string {
	t.Helper()
	script, err := mock.ParseScript([]byte(`{"rules":[
		{"system_match":"FATHOM-ROLE: orchestrator","match":"REMEMBER","response":"{\"steps\":[{\"id\":\"a\",\"type\":\"custom\",\"description\":\"note the fact\"}]}"},
		{"system_match":"FATHOM-ROLE: orchestrator","context_match":"LOCK-[0-9]+","response":"{\"steps\":[{\"id\":\"a\",\"type\":\"custom\",\"description\":\"answer KNOWN-{{find \"(LOCK-[0-9]+)\" .All}}\"}]}"},
		{"system_match":"FATHOM-ROLE: orchestrator","response":"{\"steps\":[{\"id\":\"a\",\"type\":\"custom\",\"description\":\"answer UNKNOWN\"}]}"},
		{"system_match":"FATHOM-ROLE: executor","tool_match":".","response":"noted"},
		{"system_match":"FATHOM-ROLE: executor","match":"REMEMBER","tool_calls":[{"name":"remember","arguments":"{\"text\":{{json (find \"REMEMBER (.*)\" .Goal)}}}"}]},
		{"system_match":"FATHOM-ROLE: executor","response":"{{.Step}}"}],"default":"UNSCRIPTED"}`))
	if err != nil {
		t.Fatal(err)
	}
	model := httptest.NewServer(mock.New(mock.Config{Script: script}).Handler())
	t.Cleanup(model.Close)
	return cleanEnv("OPENAI_BASE_URL="+model.URL+"/v1", "OPENAI_API_KEY=k", "FATHOM_MODEL=mock-model")
}

// TestLongTermMemoryEndToEnd is the issue's scenario through `fathom run` and `fathom
// memory`, on the embedded store and on PostgreSQL: session 1 of user U saves a fact
// with remember (a memory_saved event of the session); session 2 of U, asked something
// only the fact answers, has it in its first model call's context; session 3 of user V
// does not; `fathom memory list|search` show U's memory, `fathom memory delete --all`
// removes it from the store, and a later session of U no longer has it in its context.
func TestLongTermMemoryEndToEnd(t *testing.T) {
	for _, backend := range []string{"embedded", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			env := memoryModel(t)
			store := []string{"--data-dir", filepath.Join(t.TempDir(), "data")}
			if backend == "postgres" {
				store = append(store, "--postgres", testenv.PostgresDSN(t))
			}
			run := func(user, goal string) (string, []map[string]any) {
				t.Helper()
				args := append([]string{"run", "--long-term-memory", "--json", "--user", user}, store...)
				r := fathom(t, env, append(args, goal)...)
				evs := jsonEvents(t, r.stdout)
				last := evs[len(evs)-1]
				if r.code != 0 || last["type"] != "session_completed" {
					t.Fatalf("run %q: exit %d, events %v\n%s", goal, r.code, eventTypes(evs), r.stderr)
				}
				return last["result"].(string), evs
			}
			memory := func(args ...string) string {
				t.Helper()
				r := fathom(t, env, append(append([]string{"memory"}, args...), store...)...)
				if r.code != 0 {
					t.Fatalf("memory %v: exit %d\n%s%s", args, r.code, r.stdout, r.stderr)
				}
				return r.stdout
			}

			_, evs := run("U", "REMEMBER The user's locker code is LOCK-4417")
			saved, savedID := 0, ""
			for _, ev := range evs {
				if ev["type"] == "memory_saved" {
					saved++
					savedID, _ = ev["memory_id"].(string)
					if ev["text"] != "The user's locker code is LOCK-4417" || ev["user_id"] != "U" || ev["memory_id"] == "" {
						t.Fatalf("memory_saved %v", ev)
					}
				}
			}
			if saved != 1 {
				t.Fatalf("session 1 recorded %d memory_saved events, want 1: %v", saved, eventTypes(evs))
			}
			if got, _ := run("U", "What is my locker code?"); got != "answer KNOWN-LOCK-4417" {
				t.Fatalf("session 2 of U: %q, want its first call to know LOCK-4417", got)
			}
			if got, _ := run("V", "What is my locker code?"); got != "answer UNKNOWN" {
				t.Fatalf("session 3 of V: %q: V sees U's memory", got)
			}
			if out := memory("list", "--user", "U"); !strings.Contains(out, "The user's locker code is LOCK-4417") {
				t.Fatalf("memory list: %s", out)
			}
			if out := memory("search", "--user", "U", "LOCK-4417"); !strings.Contains(out, "LOCK-4417") {
				t.Fatalf("memory search: %s", out)
			}
			// --json prints each memory as GET /v1/memories does (gateway.Memory), a
			// search hit with its score.
			for _, args := range [][]string{{"list", "--user", "U", "--json"}, {"search", "--user", "U", "--json", "LOCK-4417"}} {
				out := memory(args...)
				var m gateway.Memory
				if err := json.Unmarshal([]byte(out), &m); err != nil || m.ID != savedID || m.User != "U" || m.Tenant == "" ||
					m.Text != "The user's locker code is LOCK-4417" || m.CreatedAt.IsZero() || m.ExpiresAt != nil || (m.Score != nil) != (args[0] == "search") {
					t.Fatalf("memory %v: %s (%v), want memory %s of U as the gateway answers it", args, out, err, savedID)
				}
			}
			if out := memory("list", "--user", "V"); strings.TrimSpace(out) != "no memories" {
				t.Fatalf("V's memories: %s", out)
			}
			if out := memory("delete", "--user", "U", "--all"); !strings.Contains(out, "deleted 1 memories of user U") {
				t.Fatalf("memory delete --all: %s", out)
			}
			if out := memory("list", "--user", "U"); strings.TrimSpace(out) != "no memories" {
				t.Fatalf("U's memories after the delete: %s", out)
			}
			if got, _ := run("U", "What is my locker code?"); got != "answer UNKNOWN" {
				t.Fatalf("session 4 of U after the delete: %q", got)
			}
		})
	}
}

// TestLongTermMemoryThroughTheGateway is the scenario through a `fathom node`'s
// gateway, on the embedded store and on PostgreSQL: sessions started over HTTP with
// their user_id, memories read and deleted with `fathom memory --addr`.
func TestLongTermMemoryThroughTheGateway(t *testing.T) {
	for _, backend := range []string{"embedded", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			env := memoryModel(t)
			const token = "t0ken"
			args := []string{"--long-term-memory", "--token", token, "--data-dir", filepath.Join(t.TempDir(), "data")}
			if backend == "postgres" {
				args = append(args, "--postgres", testenv.PostgresDSN(t))
			}
			node := startNode(t, env, args...)
			defer node.stop(t)
			run := func(user, goal string) string {
				t.Helper()
				code, body := httpJSON(t, "POST", node.url+"/v1/sessions", token, map[string]any{"goal": goal, "user_id": user})
				id, _ := body["session_id"].(string)
				if code != 201 || id == "" {
					t.Fatalf("start %q: %d %v", goal, code, body)
				}
				var result string
				testenv.Eventually(t, 60*time.Second, func() bool {
					_, st := httpJSON(t, "GET", node.url+"/v1/sessions/"+id, token, nil)
					s, _ := st["state"].(map[string]any)
					result, _ = s["result"].(string)
					return s["status"] == "SESSION_STATUS_COMPLETED"
				}, "session %q did not complete", goal)
				return result
			}
			memory := func(args ...string) string {
				t.Helper()
				r := fathom(t, env, append(append([]string{"memory"}, args...), "--addr", node.url, "--token", token)...)
				if r.code != 0 {
					t.Fatalf("memory %v: exit %d\n%s%s", args, r.code, r.stdout, r.stderr)
				}
				return r.stdout
			}
			run("U", "REMEMBER The user's locker code is LOCK-4417")
			if got := run("U", "What is my locker code?"); got != "answer KNOWN-LOCK-4417" {
				t.Fatalf("session 2 of U: %q", got)
			}
			if got := run("V", "What is my locker code?"); got != "answer UNKNOWN" {
				t.Fatalf("session 3 of V: %q", got)
			}
			if out := memory("search", "--user", "U", "locker"); !strings.Contains(out, "The user's locker code is LOCK-4417") {
				t.Fatalf("memory search --addr: %s", out)
			}
			if out := memory("delete", "--user", "U", "--all"); !strings.Contains(out, "deleted 1 memories of user U") {
				t.Fatalf("memory delete --addr: %s", out)
			}
			if out := memory("list", "--user", "U"); strings.TrimSpace(out) != "no memories" {
				t.Fatalf("memory list --addr after the delete: %s", out)
			}
			if got := run("U", "What is my locker code?"); got != "answer UNKNOWN" {
				t.Fatalf("session 4 of U after the delete: %q", got)
			}
		})
	}
}
