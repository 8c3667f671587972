package config_test

import (
	"strings"
	"testing"
	"time"

	"github.com/fathom-agents/fathom/internal/config"
)

// The tenants sections as docs/security.md shows them: a listed tenant takes
// tenant_defaults for the keys it does not set.
func TestTenantsSection(t *testing.T) {
	f, err := config.Parse("fathom.yaml", []byte(`llm_max_concurrent: 50
tenant_defaults: {weight: 1, max_running_sessions: 4, llm_calls_per_minute: 120, tool_calls_per_minute: 0, max_tokens_per_day: 0, max_cost_usd_per_day: 0, start_queue_timeout: 30s}
tenants:
  acme: {weight: 3, llm_calls_per_minute: 600, max_cost_usd_per_day: 12.5, start_queue_timeout: 0s}
  beta:
    max_tokens_per_day: 1000000
    max_artifact_bytes: 1048576
`))
	if err != nil {
		t.Fatal(err)
	}
	if f.LLMMaxConcurrent != 50 || !f.LLMMaxConcurrentSet {
		t.Fatalf("llm_max_concurrent %d (set %v), want 50", f.LLMMaxConcurrent, f.LLMMaxConcurrentSet)
	}
	want := map[string]config.TenantLimits{
		"acme": {Weight: 3, MaxRunningSessions: 4, LLMCallsPerMinute: 600, MaxCostUSDPerDay: 12.5, Line: 4},
		"beta": {Weight: 1, MaxRunningSessions: 4, LLMCallsPerMinute: 120, MaxTokensPerDay: 1000000, MaxArtifactBytes: 1048576, StartQueueTimeout: 30 * time.Second, Line: 6},
		"else": {Weight: 1, MaxRunningSessions: 4, LLMCallsPerMinute: 120, StartQueueTimeout: 30 * time.Second, Line: 2},
	}
	for name, w := range want {
		if got := f.TenantLimitsOf(name); got != w {
			t.Errorf("tenant %s: %+v, want %+v", name, got, w)
		}
	}
	if n := f.TenantNames(); len(n) != 2 {
		t.Errorf("tenant names %v, want acme and beta", n)
	}
}

// Without the sections every tenant has weight 1 and no limit.
func TestNoTenantsSection(t *testing.T) {
	for _, src := range []string{"", "approval: {tools: [code_execute]}\n"} {
		f, err := config.Parse("fathom.yaml", []byte(src))
		if err != nil {
			t.Fatal(err)
		}
		if got := f.TenantLimitsOf("anyone"); got != config.DefaultTenantLimits {
			t.Fatalf("%q: limits %+v, want %+v", src, got, config.DefaultTenantLimits)
		}
		if f.LLMMaxConcurrentSet {
			t.Fatalf("%q: llm_max_concurrent set", src)
		}
	}
}

func TestBadTenantsFailWithLineAndKey(t *testing.T) {
	for _, tc := range []struct{ name, yaml, want string }{
		{"bad queue timeout", "tenants:\n  acme: {start_queue_timeout: 11m}\n", `fathom.yaml:2: tenants.acme.start_queue_timeout: "11m" is not a duration from 0s to 10m0s`},
		{"zero weight", "tenants:\n  acme: {weight: 0}\n", `fathom.yaml:2: tenants.acme.weight: "0" is not a whole number from 1 to 1000`},
		{"unknown key", "tenants:\n  acme:\n    weight: 2\n    llm_calls_per_min: 5\n", "fathom.yaml:4: tenants.acme.llm_calls_per_min: unknown key (want llm_calls_per_minute, max_artifact_bytes, max_cost_usd_per_day, max_running_sessions, max_tokens_per_day, start_queue_timeout, tool_calls_per_minute, weight)"},
		{"negative rate", "tenant_defaults: {llm_calls_per_minute: -1}\n", `fathom.yaml:1: tenant_defaults.llm_calls_per_minute: "-1" is not a whole number from 0 to 2147483647`},
		{"bad cost", "tenants:\n  a: {max_cost_usd_per_day: lots}\n", `fathom.yaml:2: tenants.a.max_cost_usd_per_day: "lots" is not an amount of US dollars (0 or more)`},
		{"duplicate tenant", "tenants:\n  a: {weight: 2}\n  a: {weight: 3}\n", "fathom.yaml:3: tenants.a: duplicate key (first at line 2)"},
		{"other", "tenants:\n  other: {weight: 2}\n", `fathom.yaml:2: tenants.other: "other" is the metrics label of the tenants not listed; it cannot name one`},
		{"not a mapping", "tenants: [a, b]\n", "fathom.yaml:1: tenants: must be a mapping (key: value)"},
		{"bad concurrency", "llm_max_concurrent: many\n", `fathom.yaml:1: llm_max_concurrent: "many" is not a whole number from 0 to 2147483647`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := config.Parse("fathom.yaml", []byte(tc.yaml))
			if err == nil || err.Error() != tc.want {
				t.Fatalf("got %v\nwant %s", err, tc.want)
			}
			if !strings.HasPrefix(err.Error(), "fathom.yaml:") {
				t.Fatalf("no line: %v", err)
			}
		})
	}
}
