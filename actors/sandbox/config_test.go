package sandbox

import (
	"strings"
	"testing"
	"time"
)

func TestConfigFromEnv(t *testing.T) {
	env := map[string]string{EnvURL: "ws://127.0.0.1:1/ws", EnvAPIKey: "k", EnvRefreshURL: "http://127.0.0.1:2/refresh",
		EnvPoolSize: "3", EnvPoolOverflow: "0"}
	c, err := ConfigFromEnv(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if c.URL != env[EnvURL] || c.APIKey != "k" || c.RefreshURL != env[EnvRefreshURL] || c.PoolSize != 3 || c.PoolOverflow != 0 {
		t.Fatalf("config %+v", c)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	env[EnvPoolSize] = "five"
	if _, err := ConfigFromEnv(func(k string) string { return env[k] }); err == nil || !strings.Contains(err.Error(), EnvPoolSize) {
		t.Fatalf("a bad pool size: %v", err)
	}
}

func TestConfigDefaultsAndValidate(t *testing.T) {
	d := DefaultConfig()
	if d.PoolSize != 5 || d.PoolOverflow != 10 || d.InitialBackoff != 100*time.Millisecond || d.MaxBackoff != 30*time.Second {
		t.Fatalf("defaults %+v", d)
	}
	ok := d
	ok.URL, ok.APIKey = "wss://sandbox.internal/ws", "k"
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, mut := range map[string]func(*Config){
		"no URL":            func(c *Config) { c.URL = "" },
		"http URL":          func(c *Config) { c.URL = "http://x/ws" },
		"no key":            func(c *Config) { c.APIKey = "" },
		"bad refresh URL":   func(c *Config) { c.RefreshURL = "ftp://x" },
		"zero pool":         func(c *Config) { c.PoolSize = 0 },
		"negative overflow": func(c *Config) { c.PoolOverflow = -1 },
		"backoff order":     func(c *Config) { c.MaxBackoff = time.Millisecond },
		"zero health":       func(c *Config) { c.HealthTimeout = 0 },
		"timeouts order":    func(c *Config) { c.MaxTimeout = time.Second },
	} {
		c := ok
		mut(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("%s: Validate accepted it", name)
		}
	}
}

// TestBackoff: 100 ms after the immediate attempt fails, doubling, capped at 30 s.
func TestBackoff(t *testing.T) {
	c := DefaultConfig()
	want := []time.Duration{100, 200, 400, 800, 1600, 3200, 6400, 12800, 25600, 30000, 30000}
	for i, w := range want {
		if got := c.backoff(i + 1); got != w*time.Millisecond {
			t.Errorf("backoff(%d) = %s, want %s", i+1, got, w*time.Millisecond)
		}
	}
}
