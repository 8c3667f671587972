package gateway_test

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/fathom-agents/fathom/internal/testenv"
)

// scrapeMetrics returns GET /metrics parsed, failing the test unless it is Prometheus
// text that `promtool check metrics` (promlint) finds nothing wrong with.
func scrapeMetrics(t *testing.T, g *gw) (map[string]*dto.MetricFamily, string) {
	t.Helper()
	resp, err := http.Get(g.srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET /metrics = %d %s", resp.StatusCode, body)
	}
	parser := expfmt.NewTextParser(model.LegacyValidation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("not Prometheus text: %v\n%s", err, body)
	}
	problems, err := promlint.New(bytes.NewReader(body)).Lint()
	if err != nil {
		t.Fatalf("promlint: %v", err)
	}
	for _, p := range problems {
		t.Errorf("promtool check metrics: %s: %s", p.Metric, p.Text)
	}
	return families, string(body)
}

// value is the value of family name's series with labels (a gauge or counter), -1 when
// there is none.
func value(families map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	for _, m := range families[name].GetMetric() {
		match := true
		for i := 0; i+1 < len(labels); i += 2 {
			found := false
			for _, l := range m.GetLabel() {
				if l.GetName() == labels[i] && l.GetValue() == labels[i+1] {
					found = true
				}
			}
			match = match && found
		}
		if !match {
			continue
		}
		switch {
		case m.GetGauge() != nil:
			return m.GetGauge().GetValue()
		case m.GetCounter() != nil:
			return m.GetCounter().GetValue()
		case m.GetHistogram() != nil:
			return float64(m.GetHistogram().GetSampleCount())
		}
	}
	return -1
}

// TestOperatorMetrics: GET /metrics passes promtool's checks and carries the operator
// gauges: sessions by state from the index, gateway connections by kind, feed
// subscribers, the journal's append latency, the LLM breakers' state, and the GenAI
// semantic-convention histograms.
func TestOperatorMetrics(t *testing.T) {
	g := startGW(t, gwOpts{})
	c := g.mustDial(token)
	c.send(map[string]any{"op": "start", "id": "st", "session_id": "m-1", "goal": "Write a haiku about metrics"})
	c.next("ack", 10*time.Second)
	c.send(map[string]any{"op": "subscribe", "id": "sub", "session_id": "m-1"})
	c.next("ack", 10*time.Second)
	deadline := time.Now().Add(60 * time.Second)
	for f := c.read(time.Until(deadline)); f["type"] != "session_completed"; f = c.read(time.Until(deadline)) {
		if f["op"] == "error" || f["type"] == "session_failed" {
			t.Fatalf("the session did not complete: %v", f)
		}
	}

	var families map[string]*dto.MetricFamily
	var body string
	testenv.Eventually(t, 20*time.Second, func() bool {
		families, body = scrapeMetrics(t, g)
		return value(families, "fathom_sessions", "state", "completed") == 1
	}, "fathom_sessions{state=completed} is not 1")
	for _, c := range []struct {
		name   string
		labels []string
		want   func(float64) bool
	}{
		{"fathom_sessions", []string{"state", "running"}, func(v float64) bool { return v == 0 }},
		{"fathom_gateway_connections", []string{"kind", "websocket"}, func(v float64) bool { return v == 1 }},
		{"fathom_gateway_connections", []string{"kind", "event_stream"}, func(v float64) bool { return v == 0 }},
		{"fathom_feed_subscribers", nil, func(v float64) bool { return v >= 1 }},
		{"fathom_journal_append_duration_seconds", []string{"outcome", "ok"}, func(v float64) bool { return v >= 5 }},
		{"fathom_llm_breaker_state", []string{"breaker", "sessions", "state", "closed"}, func(v float64) bool { return v == 1 }},
		{"fathom_llm_breaker_state", []string{"breaker", "sessions", "state", "open"}, func(v float64) bool { return v == 0 }},
		{"gen_ai_client_token_usage", nil, func(v float64) bool { return v >= 1 }},
		{"gen_ai_client_operation_duration_seconds", nil, func(v float64) bool { return v >= 1 }},
	} {
		if v := value(families, c.name, c.labels...); !c.want(v) {
			t.Errorf("%s%v = %v", c.name, c.labels, v)
		}
	}
	if strings.Contains(body, "m-1") {
		t.Errorf("a session id appears in /metrics")
	}

	// An HTTP event stream counts as a connection while it is open.
	req, _ := http.NewRequest("GET", g.srv.URL+"/v1/sessions/m-1/events", nil)
	req.Header.Set("Authorization", "Bearer "+readToken)
	stream, err := http.DefaultClient.Do(req)
	if err != nil || stream.StatusCode != 200 {
		t.Fatalf("event stream: %v", err)
	}
	defer stream.Body.Close()
	testenv.Eventually(t, 10*time.Second, func() bool {
		families, _ = scrapeMetrics(t, g)
		return value(families, "fathom_gateway_connections", "kind", "event_stream") == 1
	}, "an open event stream is not counted")
}
