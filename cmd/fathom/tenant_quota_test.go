package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	dto "github.com/prometheus/client_model/go"

	"github.com/fathom-agents/fathom/internal/testenv"
	"github.com/fathom-agents/fathom/llm/mock"
)

// quotaStores are the journals the quota tests run on: the embedded one, and PostgreSQL
// when the test services are up.
func quotaStores(t *testing.T) map[string]func(t *testing.T) []string {
	dir := t.TempDir()
	stores := map[string]func(t *testing.T) []string{
		"embedded": func(*testing.T) []string { return []string{"--data-dir", dir} },
	}
	if os.Getenv(testenv.EnvPostgres) != "" {
		dsn := testenv.PostgresDSN(t)
		stores["postgres"] = func(*testing.T) []string { return []string{"--postgres", dsn, "--data-dir", t.TempDir()} }
	}
	return stores
}

// quotaConfig writes a config file.
func quotaConfig(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "fathom.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// startAt posts a start and returns the status, the Retry-After header and the body.
func startAt(t *testing.T, url, id, goal string) (int, string, map[string]any) {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"session_id": id, "goal": goal})
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Post(url+"/v1/sessions", "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, resp.Header.Get("Retry-After"), out
}

// quotaState reads GET /v1/sessions/{id}'s state.
func quotaState(t *testing.T, url, id string) map[string]any {
	t.Helper()
	code, body := httpJSON(t, "GET", url+"/v1/sessions/"+id, "", nil)
	if code != 200 {
		t.Fatalf("GET %s: %d %v", id, code, body)
	}
	if st, ok := body["state"].(map[string]any); ok {
		return st
	}
	return body
}

// TestTenantMaxRunningSessions: a tenant (here the default one: no auth) whose
// max_running_sessions are running gets 429 resource_exhausted naming the limit, with a
// Retry-After, for a further start (HTTP, WebSocket with retry_after, and a fork); once one has ended a start is
// admitted again. On the embedded journal and on PostgreSQL.
func TestTenantMaxRunningSessions(t *testing.T) {
	t.Parallel()
	script := mock.Script{Rules: []mock.Rule{
		{SystemMatch: "FATHOM-ROLE: orchestrator", ContextMatch: "slow", DelayMS: 60_000, Response: `{"steps":[]}`},
		{SystemMatch: "FATHOM-ROLE: orchestrator", Response: `{"steps":[{"id":"a","type":"custom","description":"work"}]}`},
	}, Default: "done"}
	srv := httptest.NewServer(mock.New(mock.Config{Script: script}).Handler())
	defer srv.Close()
	cfg := quotaConfig(t, "tenant_defaults: {max_running_sessions: 1}\n")
	for name, store := range quotaStores(t) {
		t.Run(name, func(t *testing.T) {
			p := startNode(t, cleanEnv("OPENAI_BASE_URL="+srv.URL+"/v1", "OPENAI_API_KEY=k"), append(store(t), "--config", cfg)...)
			defer p.stop(t)
			if code, _, body := startAt(t, p.url, "q-0", "quick zero"); code/100 != 2 {
				t.Fatalf("start: %d %v", code, body)
			}
			var done map[string]any
			testenv.Eventually(t, 30*time.Second, func() bool {
				done = quotaState(t, p.url, "q-0")
				return done["status"] == "SESSION_STATUS_COMPLETED"
			}, "q-0 completes")
			if code, _, body := startAt(t, p.url, "q-1", "slow one"); code/100 != 2 {
				t.Fatalf("first start: %d %v", code, body)
			}
			code, retry, body := startAt(t, p.url, "q-2", "slow two")
			e, _ := body["error"].(map[string]any)
			if code != http.StatusTooManyRequests || e["code"] != "resource_exhausted" || !strings.Contains(e["message"].(string), "max_running_sessions 1") || retry != "5" {
				t.Fatalf("second start: %d Retry-After %q %v; want 429 resource_exhausted naming max_running_sessions 1, Retry-After 5", code, retry, body)
			}
			if code, body := httpJSON(t, "GET", p.url+"/v1/sessions/q-2", "", nil); code != http.StatusNotFound {
				t.Fatalf("the refused session exists: %d %v", code, body)
			}
			if code, body := httpJSON(t, "POST", p.url+"/v1/sessions/q-0/fork", "", map[string]any{"seq": done["plan_seq"], "new_session_id": "q-f"}); code != http.StatusTooManyRequests {
				t.Fatalf("fork over the limit: %d %v", code, body)
			}
			c, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(p.url, "http")+"/v1/ws", nil)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if err := c.WriteJSON(map[string]any{"op": "start", "id": 1, "session_id": "q-w", "goal": "slow ws"}); err != nil {
				t.Fatal(err)
			}
			_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
			var f map[string]any
			if err := c.ReadJSON(&f); err != nil {
				t.Fatal(err)
			}
			if f["op"] != "error" || f["code"] != "resource_exhausted" || f["retry_after"] != 5.0 || !strings.Contains(f["message"].(string), "max_running_sessions 1") {
				t.Fatalf("WebSocket start over the limit: %v", f)
			}
			if code, body := httpJSON(t, "POST", p.url+"/v1/sessions/q-1/cancel", "", map[string]any{"command_id": "c1"}); code/100 != 2 {
				t.Fatalf("cancel: %d %v", code, body)
			}
			testenv.Eventually(t, 20*time.Second, func() bool {
				code, _, _ := startAt(t, p.url, "q-3", "quick three")
				return code/100 == 2
			}, "a start admitted once the running session ended")
		})
	}
}

// TestTenantDailyTokens: a tenant whose max_tokens_per_day is used up by a session's
// first answer makes no further LLM call: the session fails naming
// tenant_max_tokens_per_day before its next call, exactly as a session budget fails it;
// after a restart of the node (the usage is read back from the session index), a new
// session of the tenant fails before its first call.
func TestTenantDailyTokens(t *testing.T) {
	t.Parallel()
	script := mock.Script{Rules: []mock.Rule{
		{SystemMatch: "FATHOM-ROLE: orchestrator", Response: `{"steps":[{"id":"a","type":"custom","description":"work"}]}`},
	}, Default: "done"}
	var calls atomic.Int64
	h := mock.New(mock.Config{Script: script}).Handler()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			calls.Add(1)
		}
		h.ServeHTTP(w, r)
	}))
	defer srv.Close()
	cfg := quotaConfig(t, "tenant_defaults: {max_tokens_per_day: 1}\n")
	env := cleanEnv("OPENAI_BASE_URL="+srv.URL+"/v1", "OPENAI_API_KEY=k")
	for name, store := range quotaStores(t) {
		t.Run(name, func(t *testing.T) {
			args := append(store(t), "--config", cfg)
			calls.Store(0)
			p := startNode(t, env, args...)
			if code, _, body := startAt(t, p.url, "d-1", "work"); code/100 != 2 {
				t.Fatalf("start: %d %v", code, body)
			}
			failedWith(t, p.url, "d-1", "(tenant_max_tokens_per_day 1)")
			if n := calls.Load(); n != 1 {
				t.Fatalf("%d model calls: the plan's answer used the day's tokens, nothing may follow it", n)
			}
			p.stop(t)
			p = startNode(t, env, args...)
			defer p.stop(t)
			if code, _, body := startAt(t, p.url, "d-2", "work"); code/100 != 2 {
				t.Fatalf("start after restart: %d %v", code, body)
			}
			failedWith(t, p.url, "d-2", "(tenant_max_tokens_per_day 1)")
			if n := calls.Load(); n != 1 {
				t.Fatalf("%d model calls in all: the new session called the model over the tenant's daily budget", n)
			}
		})
	}
}

// failedWith waits for session id to fail with an error containing want.
func failedWith(t *testing.T, url, id, want string) {
	t.Helper()
	var st map[string]any
	testenv.Eventually(t, 30*time.Second, func() bool {
		st = quotaState(t, url, id)
		s, _ := st["status"].(string)
		return strings.Contains(strings.ToLower(s), "failed") || strings.Contains(strings.ToLower(s), "completed")
	}, "session %s ends", id)
	if msg, _ := st["error"].(string); !strings.HasPrefix(msg, "tenant budget exceeded: ") || !strings.Contains(msg, want) {
		t.Fatalf("session %s ended with %v, want a failure naming %q", id, st, want)
	}
}

// TestTenantToolCallsPerMinute: a tenant's tool_calls_per_minute delays its tool calls
// (60 a minute: one a second after the first): a step whose model asks for four tool
// calls takes at least three seconds and still completes, where it takes well under a
// second without the limit; the delay is a crossing in fathom_quota_crossings_total.
func TestTenantToolCallsPerMinute(t *testing.T) {
	t.Parallel()
	calls := make([]mock.ToolCallRule, 4)
	for i := range calls {
		calls[i] = mock.ToolCallRule{Name: "write_artifact", Arguments: fmt.Sprintf(`{"type":"research","filename":"n%d.md","content":"x"}`, i)}
	}
	srv := httptest.NewServer(mock.New(mock.Config{Script: mock.Script{Rules: []mock.Rule{
		{SystemMatch: "FATHOM-ROLE: orchestrator", Response: `{"steps":[{"id":"s","type":"custom","description":"save the notes"}]}`},
		{SystemMatch: "FATHOM-ROLE: executor", ToolMatch: ".", Response: "saved"},
		{SystemMatch: "FATHOM-ROLE: executor", ToolCalls: calls},
	}, Default: "done"}}).Handler())
	defer srv.Close()
	env := cleanEnv("OPENAI_BASE_URL="+srv.URL+"/v1", "OPENAI_API_KEY=k")
	run := func(cfg string) (time.Duration, map[string]*dto.MetricFamily) {
		t.Helper()
		addr := "127.0.0.1:" + freePort(t)
		p := startNode(t, env, "--data-dir", t.TempDir(), "--config", quotaConfig(t, cfg), "--metrics-listen", addr)
		defer p.stop(t)
		if code, _, body := startAt(t, p.url, "tools-1", "save notes"); code/100 != 2 {
			t.Fatalf("start: %d %v", code, body)
		}
		var st map[string]any
		testenv.Eventually(t, 30*time.Second, func() bool {
			st = quotaState(t, p.url, "tools-1")
			s, _ := st["status"].(string)
			return s == "SESSION_STATUS_COMPLETED" || s == "SESSION_STATUS_FAILED"
		}, "the session ends")
		if st["status"] != "SESSION_STATUS_COMPLETED" {
			t.Fatalf("session ended with %v", st)
		}
		steps, _ := st["steps"].([]any)
		step, _ := steps[0].(map[string]any)
		if step["tool_calls"] != 4.0 {
			t.Fatalf("the step made %v tool calls, want 4", step["tool_calls"])
		}
		took := time.Duration(step["ended_at_unix_nano"].(float64) - step["started_at_unix_nano"].(float64))
		return took, scrape(t, "http://"+addr+"/metrics")
	}
	crossings := func(fams map[string]*dto.MetricFamily) float64 {
		for _, m := range fams["fathom_quota_crossings_total"].GetMetric() {
			l := map[string]string{}
			for _, p := range m.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			if l["tenant"] == "default" && l["quota"] == "tool_calls_per_minute" {
				return m.GetCounter().GetValue()
			}
		}
		return -1
	}
	free, fams := run("tenant_defaults: {weight: 1}\n")
	if free > time.Second || crossings(fams) != 0 {
		t.Fatalf("without a limit the step took %s with %v crossings: the test proves nothing", free, crossings(fams))
	}
	limited, fams := run("tenant_defaults: {tool_calls_per_minute: 60}\n")
	if limited < 2900*time.Millisecond {
		t.Fatalf("with 60 tool calls a minute four calls took %s, want at least 3s", limited)
	}
	if n := crossings(fams); n < 1 {
		t.Fatalf("fathom_quota_crossings_total{tenant=default,quota=tool_calls_per_minute} = %v, want at least 1", n)
	}
}

// TestTenantDailyCost: max_cost_usd_per_day stops a tenant's session before the call
// after the answer that spent it, naming tenant_max_cost_usd_per_day.
func TestTenantDailyCost(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(mock.New(mock.Config{Script: mock.Script{Rules: []mock.Rule{
		{SystemMatch: "FATHOM-ROLE: orchestrator", Response: `{"steps":[{"id":"a","type":"custom","description":"work"}]}`},
	}, Default: "done"}}).Handler())
	defer srv.Close()
	p := startNode(t, cleanEnv("OPENAI_BASE_URL="+srv.URL+"/v1", "OPENAI_API_KEY=k"), "--data-dir", t.TempDir(),
		"--config", quotaConfig(t, "tenant_defaults: {max_cost_usd_per_day: 0.000000001}\n"))
	defer p.stop(t)
	if code, _, body := startAt(t, p.url, "c-1", "work"); code/100 != 2 {
		t.Fatalf("start: %d %v", code, body)
	}
	failedWith(t, p.url, "c-1", "(tenant_max_cost_usd_per_day 1e-09)")
	if st := quotaState(t, p.url, "c-1"); st["llm_calls"] != 1.0 {
		t.Fatalf("%v LLM calls, want only the plan's", st["llm_calls"])
	}
}

// TestTenantMaxArtifactBytes: max_artifact_bytes bounds the bytes of artifacts a
// tenant's sessions write per UTC day. The model writes two artifacts of 60 bytes under
// a limit of 100: one is saved, the other's write_artifact call fails with a tool error
// naming max_artifact_bytes, and the session goes on to complete; the refusal is a log
// line and a crossing in fathom_quota_crossings_total. After a restart the day's bytes
// come from the session index: a new session's writes are refused too, and so is a fork
// of the first session, whose copy would pass the limit (429). On the embedded journal
// and on PostgreSQL.
func TestTenantMaxArtifactBytes(t *testing.T) {
	t.Parallel()
	content := strings.Repeat("x", 60)
	srv := httptest.NewServer(mock.New(mock.Config{Script: mock.Script{Rules: []mock.Rule{
		{SystemMatch: "FATHOM-ROLE: orchestrator", Response: `{"steps":[{"id":"s","type":"custom","description":"save the notes"}]}`},
		{SystemMatch: "FATHOM-ROLE: executor", ToolMatch: ".", Response: "saved what I could"},
		{SystemMatch: "FATHOM-ROLE: executor", ToolCalls: []mock.ToolCallRule{
			{Name: "write_artifact", Arguments: `{"type":"research","filename":"a.md","content":"` + content + `"}`},
			{Name: "write_artifact", Arguments: `{"type":"research","filename":"b.md","content":"` + content + `"}`},
		}},
	}, Default: "done"}}).Handler())
	defer srv.Close()
	env := cleanEnv("OPENAI_BASE_URL="+srv.URL+"/v1", "OPENAI_API_KEY=k")
	cfg := quotaConfig(t, "tenant_defaults: {max_artifact_bytes: 100}\n")
	// run starts session id on a node and waits for it to complete; it returns the
	// session's artifacts, its tool errors that name the quota, and the node's crossings.
	run := func(t *testing.T, args []string, id string, then func(url string)) (artifacts []any, refused int, crossings float64) {
		t.Helper()
		addr := "127.0.0.1:" + freePort(t)
		p := startNode(t, env, append(args, "--config", cfg, "--metrics-listen", addr)...)
		defer p.stop(t)
		if code, _, body := startAt(t, p.url, id, "save notes"); code/100 != 2 {
			t.Fatalf("start %s: %d %v", id, code, body)
		}
		var st map[string]any
		testenv.Eventually(t, 30*time.Second, func() bool {
			st = quotaState(t, p.url, id)
			s, _ := st["status"].(string)
			return s == "SESSION_STATUS_COMPLETED" || s == "SESSION_STATUS_FAILED"
		}, "session %s ends", id)
		if st["status"] != "SESSION_STATUS_COMPLETED" {
			t.Fatalf("session %s ended with %v, want it completed (a refused write fails the tool call, not the session)", id, st)
		}
		code, events := rawHTTP(t, "GET", p.url+"/v1/sessions/"+id+"/events?follow=false", "", "")
		if code != 200 {
			t.Fatalf("events of %s: %d", id, code)
		}
		for _, line := range strings.Split(string(events), "\n") {
			if strings.Contains(line, `"tool_result"`) && strings.Contains(line, "max_artifact_bytes of 100 bytes") {
				refused++
			}
		}
		if !strings.Contains(p.stderr.String(), "tenant quota crossed: an artifact write was refused") || !strings.Contains(p.stderr.String(), "quota=max_artifact_bytes") {
			t.Errorf("no log line of the crossing:\n%s", p.stderr.String())
		}
		for _, m := range scrape(t, "http://"+addr+"/metrics")["fathom_quota_crossings_total"].GetMetric() {
			l := map[string]string{}
			for _, lp := range m.GetLabel() {
				l[lp.GetName()] = lp.GetValue()
			}
			if l["tenant"] == "default" && l["quota"] == "max_artifact_bytes" {
				crossings = m.GetCounter().GetValue()
			}
		}
		artifacts, _ = st["artifacts"].([]any)
		if then != nil {
			then(p.url)
		}
		return artifacts, refused, crossings
	}
	for name, store := range quotaStores(t) {
		t.Run(name, func(t *testing.T) {
			args := store(t)
			arts, refused, crossings := run(t, args, "bytes-1", nil)
			if len(arts) != 1 || refused != 1 || crossings != 1 {
				t.Fatalf("under a limit of 100 bytes two writes of 60: %d artifacts saved, %d tool calls refused naming the quota, %v crossings; want 1, 1, 1", len(arts), refused, crossings)
			}
			// Restarted: the day's 60 bytes are the index's.
			arts, refused, crossings = run(t, args, "bytes-2", func(url string) {
				code, body := httpJSON(t, "POST", url+"/v1/sessions/bytes-1/fork", "", map[string]any{"step_index": 1, "new_session_id": "bytes-f"})
				if code != http.StatusTooManyRequests || !strings.Contains(fmt.Sprint(body), "max_artifact_bytes") {
					t.Errorf("a fork copying 60 bytes past the day's limit: %d %v, want 429 naming max_artifact_bytes", code, body)
				}
			})
			if len(arts) != 0 || refused != 2 || crossings != 2 {
				t.Fatalf("after a restart, with 60 of 100 bytes written today: %d artifacts saved, %d refused, %v crossings; want 0, 2, 2", len(arts), refused, crossings)
			}
		})
	}
}
