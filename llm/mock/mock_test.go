package mock_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fathom-agents/fathom/llm"
	"github.com/fathom-agents/fathom/llm/mock"
	"github.com/fathom-agents/fathom/llm/openai"
)

func client(t *testing.T, srv *httptest.Server, key string) *openai.Client {
	t.Helper()
	c, err := openai.New(openai.Config{BaseURL: srv.URL + "/v1", APIKey: key, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func chat(c *openai.Client, system, user string) (llm.Response, error) {
	return c.Chat(context.Background(), llm.Request{Messages: []llm.Message{{Role: "system", Content: system}, {Role: "user", Content: user}}})
}

func TestDemoScriptPlansAndExecutes(t *testing.T) {
	srv := httptest.NewServer(mock.New(mock.Config{Script: mock.DemoScript()}).Handler())
	defer srv.Close()
	c := client(t, srv, "")
	resp, err := chat(c, "FATHOM-ROLE: orchestrator\nFATHOM-PHASE: plan\n...", `Goal: write "a" haiku`+"\n")
	if err != nil {
		t.Fatal(err)
	}
	var plan struct {
		Steps []struct{ ID, Type, Description string } `json:"steps"`
	}
	if err := json.Unmarshal([]byte(resp.Content), &plan); err != nil {
		t.Fatalf("demo plan is not JSON: %v\n%s", err, resp.Content)
	}
	if len(plan.Steps) != 4 || !strings.Contains(plan.Steps[0].Description, `write "a" haiku`) {
		t.Fatalf("plan %+v", plan)
	}
	if resp.Usage.TotalTokens == 0 || resp.Usage.TotalTokens != resp.Usage.InputTokens+resp.Usage.OutputTokens {
		t.Fatalf("usage %+v", resp.Usage)
	}
	resp, err = chat(c, "FATHOM-ROLE: executor\n...", "Goal: g\nStep: draft the poem\n")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(resp.Content, "draft the poem") {
		t.Fatalf("step answer %q", resp.Content)
	}
	ids, err := c.Models(context.Background())
	if err != nil || len(ids) != 1 || ids[0] != "fathom-mock" {
		t.Fatalf("models %v %v", ids, err)
	}
}

func TestRulesTimesErrorsAndDefault(t *testing.T) {
	script, err := mock.ParseScript([]byte(`{"rules":[
		{"match":"flaky","status":429,"error_message":"slow down","retry_after_s":2,"times":2},
		{"match":"flaky","response":"ok after {{.N}}"},
		{"match":"slow","response":"late","delay_ms":300}
	],"default":"nothing for {{.User}}"}`))
	if err != nil {
		t.Fatal(err)
	}
	m := mock.New(mock.Config{Script: script, Token: "tok"})
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	c := client(t, srv, "tok")
	for i := 0; i < 2; i++ {
		_, err := chat(c, "", "flaky")
		var apiErr *llm.APIError
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 429 || apiErr.RetryAfter != 2*time.Second || apiErr.Message != "slow down" {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	if resp, err := chat(c, "", "flaky"); err != nil || resp.Content != "ok after 1" {
		t.Fatalf("third call: %q %v", resp.Content, err)
	}
	if resp, err := chat(c, "", "hello"); err != nil || resp.Content != "nothing for hello" {
		t.Fatalf("default: %q %v", resp.Content, err)
	}
	short, _ := openai.New(openai.Config{BaseURL: srv.URL + "/v1", APIKey: "tok", Timeout: 50 * time.Millisecond})
	if _, err := chat(short, "", "slow"); err == nil || !llm.IsRetryable(err) {
		t.Fatalf("delayed rule with short timeout: %v", err)
	}
	if m.Requests() != 5 {
		t.Fatalf("Requests = %d, want 5", m.Requests())
	}
	if _, err := chat(client(t, srv, "wrong"), "", "x"); err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("wrong token: %v", err)
	}
}

func TestBadRequests(t *testing.T) {
	srv := httptest.NewServer(mock.New(mock.Config{Script: mock.DemoScript()}).Handler())
	defer srv.Close()
	for _, c := range []struct {
		name   string
		body   []byte
		status int
	}{
		{"not json", []byte("{"), 400},
		{"no messages", []byte(`{"model":"m","messages":[]}`), 400},
		{"oversize", bytes.Repeat([]byte("x"), mock.MaxRequestBytes+10), 413},
	} {
		resp, err := http.Post(srv.URL+"/v1/chat/completions", "application/json", bytes.NewReader(c.body))
		if err != nil {
			t.Fatal(err)
		}
		var body struct {
			Error struct{ Message string } `json:"error"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if resp.StatusCode != c.status || body.Error.Message == "" {
			t.Errorf("%s: status %d message %q", c.name, resp.StatusCode, body.Error.Message)
		}
	}
}

func TestParseScriptRejectsMistakes(t *testing.T) {
	for name, s := range map[string]string{
		"unknown field": `{"rules":[{"mach":"x"}]}`,
		"bad regexp":    `{"rules":[{"match":"("}]}`,
		"bad template":  `{"rules":[{"response":"{{.Nope"}]}`,
		"bad status":    `{"rules":[{"status":42}]}`,
	} {
		if _, err := mock.ParseScript([]byte(s)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	path := filepath.Join(t.TempDir(), "s.json")
	_ = os.WriteFile(path, []byte(`{"rules":[],"default":"d"}`), 0o600)
	if s, err := mock.LoadScript(path); err != nil || s.Default != "d" {
		t.Fatalf("LoadScript: %+v %v", s, err)
	}
}

func TestRunServesUntilCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var out syncBuf
	done := make(chan error, 1)
	go func() { done <- mock.Run(ctx, []string{"--listen", "127.0.0.1:0"}, &out, &out) }()
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(out.String(), "listening on http://") {
		if time.Now().After(deadline) {
			t.Fatalf("no listening line: %q", out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	line := out.String()
	base := strings.TrimSpace(line[strings.Index(line, "http://"):])
	base = strings.Fields(base)[0]
	c, _ := openai.New(openai.Config{BaseURL: base})
	if _, err := c.Models(context.Background()); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
}

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *syncBuf) String() string              { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }
