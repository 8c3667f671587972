package main

import (
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"

	"github.com/fathom-agents/fathom/llm/mock"
)

// TestLLMMaxConcurrent: --llm-max-concurrent, env FATHOM_LLM_MAX_CONCURRENT and the
// configuration file's llm_max_concurrent bound the LLM calls a node has in flight: a
// plan of three independent sub-agent steps, each call held 300 ms by the model
// server, reaches the server one call at a time under a limit of 1, and three at a time
// without one. Bad values are usage errors (exit 2).
func TestLLMMaxConcurrent(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, body string) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	one := write("one.yaml", "llm_max_concurrent: 1\ntenant_defaults: {weight: 2}\ntenants:\n  acme: {weight: 3, llm_calls_per_minute: 600}\n")
	bad := write("bad.yaml", "tenants:\n  acme: {weight: 0}\n")
	for _, c := range []struct {
		env  []string
		args []string
		want string
	}{
		{cleanEnv("FATHOM_LLM_MAX_CONCURRENT=lots"), nil, "FATHOM_LLM_MAX_CONCURRENT"},
		{cleanEnv(), []string{"--llm-max-concurrent", "-1"}, "llm-max-concurrent"},
		{cleanEnv(), []string{"--config", bad}, "bad.yaml:2: tenants.acme.weight"},
	} {
		r := fathom(t, c.env, append(append([]string{"run", "--data-dir", filepath.Join(dir, "refused")}, c.args...), "hi")...)
		if r.code != 2 || !strings.Contains(r.stderr, c.want) {
			t.Errorf("run %v (env %s): exit %d, want 2 naming %q\n%s", c.args, c.env[len(c.env)-1], r.code, c.want, r.stderr)
		}
	}

	script := mock.Script{Rules: []mock.Rule{
		{SystemMatch: "FATHOM-PHASE: synthesize", Response: "All three done."},
		{SystemMatch: "FATHOM-ROLE: orchestrator", Response: `{"steps":[{"id":"a","type":"research","description":"dig a","dependencies":[]},` +
			`{"id":"b","type":"code","description":"dig b","dependencies":[]},{"id":"c","type":"write","description":"dig c","dependencies":[]}]}`},
		{SystemMatch: "FATHOM-ROLE: (researcher|coder|writer)", DelayMS: 300, Response: "done"},
	}, Default: "nothing scripted"}
	var inFlight, peak atomic.Int64
	h := mock.New(mock.Config{Script: script}).Handler()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			n := inFlight.Add(1)
			defer inFlight.Add(-1)
			for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
			}
		}
		h.ServeHTTP(w, r)
	}))
	defer srv.Close()
	run := func(env []string, args ...string) int64 {
		t.Helper()
		peak.Store(0)
		r := fathom(t, append(env, "OPENAI_BASE_URL="+srv.URL+"/v1", "OPENAI_API_KEY=k"),
			append(append([]string{"run", "--data-dir", t.TempDir(), "--max-parallel-subagents", "3"}, args...), "--json", "three things")...)
		if r.code != 0 {
			t.Fatalf("run %v: exit %d\n%s", args, r.code, r.stderr)
		}
		checkCompletedRun(t, jsonEvents(t, r.stdout))
		return peak.Load()
	}
	if p := run(cleanEnv()); p < 2 {
		t.Fatalf("without a limit at most %d call in flight: the steps did not run in parallel, the test proves nothing", p)
	}
	for _, c := range []struct {
		name string
		env  []string
		args []string
	}{
		{"flag", cleanEnv("FATHOM_LLM_MAX_CONCURRENT=3"), []string{"--llm-max-concurrent", "1"}},
		{"env", cleanEnv("FATHOM_LLM_MAX_CONCURRENT=1"), nil},
		{"config", cleanEnv(), []string{"--config", one}},
	} {
		if p := run(c.env, c.args...); p != 1 {
			t.Errorf("limit 1 by %s: %d calls in flight at the model server, want 1", c.name, p)
		}
	}
}

// TestNodeQuotaMetrics: a node with --llm-max-concurrent and tenants in its
// configuration exports the call slots (fathom_llm_slots_in_use, _waiting), each call's
// wait for a slot by tenant (fathom_llm_queue_wait_seconds) and the quota crossings
// counter at zero for the configured tenants, the default tenant and "other" only; the
// scrape passes promtool's checks.
func TestNodeQuotaMetrics(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cfg := filepath.Join(t.TempDir(), "fathom.yaml")
	if err := os.WriteFile(cfg, []byte("tenants:\n  acme: {weight: 3}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startNode(t, cleanEnv(), "--data-dir", t.TempDir(), "--metrics-listen", addr, "--config", cfg, "--llm-max-concurrent", "2")
	defer p.stop(t)
	if code, body := httpJSON(t, "POST", p.url+"/v1/sessions", "", map[string]any{"session_id": "quota-1", "goal": "write a haiku"}); code != 200 && code != 201 && code != 202 {
		t.Fatalf("start: %d %v", code, body)
	}
	var families map[string]*dto.MetricFamily
	deadline := time.Now().Add(60 * time.Second)
	for {
		families = scrape(t, "http://"+addr+"/metrics")
		if counterWith(families["fathom_sessions_completed_total"], "tenant", "default") >= 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("fathom_sessions_completed_total never reached 1; last scrape had %d families", len(families))
		}
		time.Sleep(100 * time.Millisecond)
	}
	labels := func(m *dto.Metric) map[string]string {
		out := map[string]string{}
		for _, l := range m.GetLabel() {
			out[l.GetName()] = l.GetValue()
		}
		return out
	}
	wait := families["fathom_llm_queue_wait_seconds"]
	if wait == nil {
		t.Fatal("no fathom_llm_queue_wait_seconds")
	}
	for _, m := range wait.GetMetric() {
		if tenant := labels(m)["tenant"]; tenant != "default" || m.GetHistogram().GetSampleCount() < 1 {
			t.Errorf("fathom_llm_queue_wait_seconds{tenant=%q} counts %d calls, want only the default tenant's", tenant, m.GetHistogram().GetSampleCount())
		}
	}
	for _, name := range []string{"fathom_llm_slots_in_use", "fathom_llm_slots_waiting"} {
		if g := families[name]; g == nil || g.GetMetric()[0].GetGauge().GetValue() != 0 {
			t.Errorf("%s = %v, want 0 once the session is done", name, g)
		}
	}
	var series []string
	for _, m := range families["fathom_quota_crossings_total"].GetMetric() {
		l := labels(m)
		series = append(series, l["tenant"]+"/"+l["quota"])
		if m.GetCounter().GetValue() != 0 {
			t.Errorf("crossings %v = %v, want 0", l, m.GetCounter().GetValue())
		}
	}
	slices.Sort(series)
	var want []string
	for _, tenant := range []string{"acme", "default", "other"} {
		for _, q := range []string{"llm_calls_per_minute", "llm_queue", "max_running_sessions", "tool_calls_per_minute", "max_tokens_per_day", "max_cost_usd_per_day", "max_artifact_bytes"} {
			want = append(want, tenant+"/"+q)
		}
	}
	slices.Sort(want)
	if !slices.Equal(series, want) {
		t.Errorf("fathom_quota_crossings_total series %v, want %v", series, want)
	}
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	problems, err := promlint.New(resp.Body).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promtool check metrics: %s: %s", p.Metric, p.Text)
	}
}
