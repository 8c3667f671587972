package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// TestNodeGatewayOverWebSocket runs `fathom node` with a read+write and a read-only
// token, drives a session over its WebSocket, checks the scopes over HTTP, and checks
// that SIGTERM closes open WebSockets with 1001 (going away) before the process exits.
func TestNodeGatewayOverWebSocket(t *testing.T) {
	t.Parallel()
	const tok, rtok = "node-test-token", "node-read-token"
	p := startNode(t, cleanEnv(), "--data-dir", t.TempDir(), "--token", tok, "--read-token", rtok)
	for _, path := range []string{"/healthz", "/readyz"} {
		if code, _ := httpJSON(t, "GET", p.url+path, "", nil); code != 200 {
			t.Fatalf("%s: %d", path, code)
		}
	}
	if code, body := httpJSON(t, "POST", p.url+"/v1/sessions", rtok, map[string]any{"goal": "x"}); code != 403 {
		t.Fatalf("start with the read token: %d %v", code, body)
	}
	wsURL := "ws" + strings.TrimPrefix(p.url, "http") + "/v1/ws"
	if _, resp, err := websocket.DefaultDialer.Dial(wsURL, nil); err == nil || resp == nil || resp.StatusCode != 401 {
		t.Fatalf("dial without a token: %v %v", err, resp)
	}
	c, _, err := websocket.DefaultDialer.Dial(wsURL, http.Header{"Authorization": {"Bearer " + tok}})
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer c.Close()
	read := func() map[string]any {
		t.Helper()
		_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
		var f map[string]any
		if err := c.ReadJSON(&f); err != nil {
			t.Fatalf("read: %v", err)
		}
		return f
	}
	// A session is subscribed to once it exists (an unknown one is not_found).
	if err := c.WriteJSON(map[string]any{"op": "start", "session_id": "node-ws-1", "goal": "write a haiku"}); err != nil {
		t.Fatal(err)
	}
	if f := read(); f["op"] != "ack" || f["request"] != "start" {
		t.Fatalf("start: %v", f)
	}
	if err := c.WriteJSON(map[string]any{"op": "subscribe", "session_id": "node-ws-1"}); err != nil {
		t.Fatal(err)
	}
	if f := read(); f["op"] != "ack" {
		t.Fatalf("subscribe: %v", f)
	}
	var seqs []float64
	for {
		f := read()
		if f["op"] != "event" {
			continue
		}
		seqs = append(seqs, f["seq"].(float64))
		if f["type"] == "session_completed" {
			break
		}
	}
	for i, s := range seqs {
		if s != float64(i+1) {
			t.Fatalf("seqs %v", seqs)
		}
	}
	// The HTTP event stream of the same session, stored events only, as NDJSON.
	req, _ := http.NewRequest("GET", p.url+"/v1/sessions/node-ws-1/events?follow=false", nil)
	req.Header.Set("Authorization", "Bearer "+rtok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(resp.Body)
	n := 0
	for dec.More() {
		var f map[string]any
		if err := dec.Decode(&f); err != nil {
			t.Fatal(err)
		}
		if f["op"] == "event" {
			n++
		}
	}
	resp.Body.Close()
	if n != len(seqs) {
		t.Fatalf("HTTP stream has %d events, the WebSocket had %d", n, len(seqs))
	}

	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	for {
		_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
		if _, _, err := c.ReadMessage(); err != nil {
			var ce *websocket.CloseError
			if !errors.As(err, &ce) || ce.Code != websocket.CloseGoingAway {
				t.Fatalf("on SIGTERM: %v, want close 1001", err)
			}
			break
		}
	}
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("node exited with %v\n%s", err, p.stderr)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("node did not exit within 30s of SIGTERM")
	}
}

// TestNodeServesMetricsWithoutTheGateway: --metrics-listen serves GET /metrics in the
// Prometheus text format on its own address.
func TestNodeServesMetricsWithoutTheGateway(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	env := append(cleanEnv(), "OTEL_SERVICE_NAME=fathom-metrics-test")
	p := startNode(t, env, "--data-dir", t.TempDir(), "--metrics-listen", addr)
	defer p.stop(t)
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET /metrics: %d %s", resp.StatusCode, body)
	}
	parser := expfmt.NewTextParser(model.LegacyValidation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("not Prometheus text: %v\n%s", err, body)
	}
	if ti := families["target_info"]; ti == nil || !strings.Contains(ti.String(), "fathom-metrics-test") {
		t.Fatalf("target_info lacks the service name from OTEL_SERVICE_NAME:\n%s", body)
	}
	// A session run through the gateway shows up in the domain metrics.
	if code, body := httpJSON(t, "POST", p.url+"/v1/sessions", "", map[string]any{"session_id": "metrics-1", "goal": "write a haiku"}); code != 200 && code != 201 && code != 202 {
		t.Fatalf("start: %d %v", code, body)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		families = scrape(t, "http://"+addr+"/metrics")
		// The session's tenant is the default one (no credentials): its own series.
		if counterWith(families["fathom_sessions_completed_total"], "tenant", "default") >= 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("fathom_sessions_completed_total{tenant=\"default\"} never reached 1; last scrape had %d families", len(families))
		}
		time.Sleep(100 * time.Millisecond)
	}
	if n := counterWith(families["fathom_sessions_completed_total"], "tenant", "other"); n != 0 {
		t.Errorf("fathom_sessions_completed_total{tenant=\"other\"} = %v, want 0 (the session is the default tenant's)", n)
	}
	for _, name := range []string{"fathom_sessions_started_total", "fathom_llm_tokens_total", "fathom_llm_call_duration_seconds",
		"fathom_step_duration_seconds", "gen_ai_client_token_usage", "gen_ai_client_operation_duration_seconds", "fathom_tool_calls_total"} {
		if families[name] == nil {
			t.Errorf("no %s after a completed session", name)
		}
	}
	// The sandbox pool the node started has connections; the scrape passes promtool's checks.
	if size := families["fathom_sandbox_pool_size"]; size == nil || size.GetMetric()[0].GetGauge().GetValue() < 1 {
		t.Errorf("fathom_sandbox_pool_size = %v, want at least one connection", size)
	}
	for _, name := range []string{"fathom_sandbox_pool_in_use", "fathom_sandbox_pool_waiting", "fathom_sessions", "fathom_journal_append_duration_seconds"} {
		if families[name] == nil {
			t.Errorf("no %s", name)
		}
	}
	resp, err = http.Get("http://" + addr + "/metrics")
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
	for _, m := range families["fathom_llm_tokens_total"].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "session_id" {
				t.Errorf("a session id is a label: %v", m)
			}
		}
	}
}

func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.LegacyValidation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("not Prometheus text: %v", err)
	}
	return families
}

// nodeSessionEvents starts session id with goal on node p and returns its event frames
// (NDJSON lines of the HTTP event stream) up to its end.
func nodeSessionEvents(t *testing.T, p *nodeProc, id, goal string) []string {
	t.Helper()
	if code, body := httpJSON(t, "POST", p.url+"/v1/sessions", "", map[string]any{"session_id": id, "goal": goal}); code/100 != 2 {
		t.Fatalf("start session: %d %v", code, body)
	}
	resp, err := (&http.Client{Timeout: 90 * time.Second}).Get(p.url + "/v1/sessions/" + id + "/events?deltas=false")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var lines []string
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		var f struct{ Type string }
		_ = json.Unmarshal(sc.Bytes(), &f)
		if f.Type == "session_completed" || f.Type == "session_failed" {
			return lines
		}
	}
	t.Fatalf("event stream ended (%v) before the session did:\n%s", sc.Err(), strings.Join(lines, "\n"))
	return nil
}

// `fathom node` without a sandbox URL runs code_execute in a local sandbox, as `fathom
// run` does: the demo coder's program really runs and its output is in the tool result.
func TestNodeRunsCodeInLocalSandbox(t *testing.T) {
	t.Parallel()
	p := startNode(t, cleanEnv(), "--data-dir", t.TempDir())
	lines := nodeSessionEvents(t, p, "node-code-1", "Explain virtual actors")
	var ran bool
	for _, l := range lines {
		if strings.Contains(l, `"tool_result"`) && strings.Contains(l, "4 words, 18 letters") {
			ran = true
		}
		if strings.Contains(l, "no sandbox") {
			t.Fatalf("code_execute had no sandbox: %s", l)
		}
	}
	if !ran {
		t.Fatalf("no tool result carries the program's output:\n%s", strings.Join(lines, "\n"))
	}
	p.stop(t)
}

// When the local sandbox cannot start (here: no bubblewrap on PATH, default isolation),
// `fathom node` says at start that code_execute is not offered, and still serves.
func TestNodeWithoutSandboxDoesNotOfferCodeExecute(t *testing.T) {
	t.Parallel()
	var env []string
	for _, kv := range cleanEnv() {
		if !strings.HasPrefix(kv, "PATH=") {
			env = append(env, kv)
		}
	}
	p := startNode(t, append(env, "PATH="+t.TempDir()), "--data-dir", t.TempDir())
	if code, _ := httpJSON(t, "GET", p.url+"/healthz", "", nil); code != 200 {
		t.Fatalf("healthz %d", code)
	}
	p.stop(t) // stderr is complete once the process is gone
	if s := p.stderr.String(); !strings.Contains(s, "not offered") || !strings.Contains(s, "code_execute") || !strings.Contains(s, "bubblewrap") {
		t.Fatalf("no start-up warning that code_execute is not offered; stderr:\n%s", s)
	}
}

// counterWith is the value of the counter series of family f whose label name is value
// (0 when there is none).
func counterWith(f *dto.MetricFamily, name, value string) float64 {
	for _, m := range f.GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == name && l.GetValue() == value {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}
