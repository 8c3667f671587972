package gateway_test

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/fathom-agents/fathom/actors/session"
	"github.com/fathom-agents/fathom/internal/testenv"
	"github.com/fathom-agents/fathom/llm/mock"
)

// labelValues returns the values family name's series have for label.
func labelValues(families map[string]*dto.MetricFamily, name, label string) []string {
	var out []string
	for _, m := range families[name].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == label {
				out = append(out, l.GetValue())
			}
		}
	}
	sort.Strings(out)
	return out
}

// TestMetricLabelsAreBounded: 100 sessions started over HTTP, each with a random model
// name in its config and a model that calls a tool of a random name, add no series to
// GET /metrics: a model the node is not configured with is "other", a tool it has not
// registered is "unknown".
func TestMetricLabelsAreBounded(t *testing.T) {
	const sessions = 100
	suffix := rand.Int64()
	script := mock.Script{Default: "done"}
	for i := range sessions {
		script.Rules = append(script.Rules, mock.Rule{SystemMatch: "FATHOM-ROLE: executor", ContextMatch: fmt.Sprintf(`goal number %d\b`, i),
			ToolCalls: []mock.ToolCallRule{{Name: fmt.Sprintf("ghost_tool_%d_%d", i, suffix), Arguments: `{}`}}})
	}
	script.Rules = append([]mock.Rule{
		{SystemMatch: "FATHOM-ROLE: orchestrator", Response: `{"steps":[{"id":"a","type":"custom","description":"answer the goal"}]}`},
		{SystemMatch: "FATHOM-ROLE: executor", ToolMatch: `[\s\S]`, Response: "answered"},
	}, script.Rules...)
	g := startGW(t, gwOpts{script: &script, session: func(c *session.Config) { c.Model = "configured-model" }})

	for i := range sessions {
		body := map[string]any{"session_id": fmt.Sprintf("lbl-%d", i), "goal": fmt.Sprintf("goal number %d", i),
			"config": map[string]any{"model": fmt.Sprintf("x-%d", rand.Int64())}}
		if status, out := postJSON(t, g.srv.URL+"/v1/sessions", token, body); status != http.StatusCreated {
			t.Fatalf("start session %d: %d %v", i, status, out)
		}
	}
	var families map[string]*dto.MetricFamily
	testenv.Eventually(t, 240*time.Second, func() bool {
		families, _ = scrapeMetrics(t, g)
		return value(families, "fathom_sessions", "state", "completed")+value(families, "fathom_sessions", "state", "failed") == sessions
	}, "the sessions did not end")
	if n := value(families, "fathom_tool_calls_total", "tool", "unknown"); n != sessions {
		t.Errorf("fathom_tool_calls_total{tool=unknown} = %v, want %d", n, sessions)
	}

	models := map[string]bool{"configured-model": true, "other": true}
	for _, name := range []string{"fathom_llm_tokens_total", "fathom_llm_call_duration_seconds", "fathom_llm_cost_usd_total"} {
		for _, v := range labelValues(families, name, "model") {
			if !models[v] {
				t.Errorf("%s has a series for model %q", name, v)
			}
		}
	}
	for _, name := range []string{"gen_ai_client_token_usage", "gen_ai_client_operation_duration_seconds"} {
		for _, v := range labelValues(families, name, "gen_ai_request_model") {
			if !models[v] {
				t.Errorf("%s has a series for model %q", name, v)
			}
		}
	}
	for _, name := range []string{"fathom_tool_calls_total", "fathom_tool_errors_total"} {
		for _, v := range labelValues(families, name, "tool") {
			if strings.HasPrefix(v, "ghost_tool_") {
				t.Errorf("%s has a series for the unregistered tool %q", name, v)
			}
		}
	}
	series := 0
	for _, f := range families {
		series += len(f.GetMetric())
	}
	if series > 400 {
		t.Errorf("GET /metrics has %d series after %d sessions", series, sessions)
	}
	t.Logf("%d series after %d sessions", series, sessions)
}

// TestMetricsBornAtZero: before anything happened, GET /metrics already has every
// counter series of fixed labels at 0 (so the first failure is an increase), the Go
// runtime's and the process's metrics, and target_info naming this node's
// service.instance.id.
func TestMetricsBornAtZero(t *testing.T) {
	g := startGW(t, gwOpts{session: func(c *session.Config) { c.Model = "configured-model" }})
	families, _ := scrapeMetrics(t, g)
	for _, c := range []struct {
		name   string
		labels []string
	}{
		{"fathom_sessions_started_total", nil},
		{"fathom_sessions_failed_total", nil},
		{"fathom_sessions_cancelled_total", nil},
		{"fathom_step_retries_total", nil},
		{"fathom_llm_tokens_total", []string{"model", "configured-model", "type", "input"}},
		{"fathom_llm_tokens_total", []string{"model", "other", "type", "output"}},
		{"fathom_llm_cost_usd_total", []string{"model", "configured-model"}},
		{"fathom_tool_calls_total", []string{"tool", "write_todos"}},
		{"fathom_tool_calls_total", []string{"tool", "unknown"}},
		{"fathom_tool_errors_total", []string{"tool", "write_todos", "error_type", "timeout"}},
		{"fathom_actor_restarts_total", []string{"kind", "session"}},
	} {
		if v := value(families, c.name, c.labels...); v != 0 {
			t.Errorf("%s%v = %v, want a series at 0", c.name, c.labels, v)
		}
	}
	for _, name := range []string{"go_goroutines", "go_memstats_heap_alloc_bytes", "process_cpu_seconds_total", "process_resident_memory_bytes"} {
		if len(families[name].GetMetric()) == 0 {
			t.Errorf("GET /metrics has no %s", name)
		}
	}
	if id := labelValues(families, "target_info", "service_instance_id"); len(id) != 1 || len(id[0]) != 36 {
		t.Errorf("target_info's service_instance_id = %v, want one UUID", id)
	}
}
