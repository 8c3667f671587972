package sandbox

import (
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"time"
)

// The environment variables ConfigFromEnv reads (the seed design's names).
const (
	// EnvURL is the sandbox's WebSocket URL (ws:// or wss://, path /ws).
	EnvURL = "SANDBOX_URL"
	// EnvAPIKey is the initial bearer token.
	EnvAPIKey = "SANDBOX_API_KEY"
	// EnvRefreshURL is the optional token refresh endpoint.
	EnvRefreshURL = "SANDBOX_REFRESH_URL"
	// EnvPoolSize is the base number of connections.
	EnvPoolSize = "SANDBOX_POOL_SIZE"
	// EnvPoolOverflow is the number of extra connections opened under load.
	EnvPoolOverflow = "SANDBOX_POOL_OVERFLOW"
)

// Config configures the sandbox client: where the sandbox is, how to authenticate, the
// pool's size and the connections' reconnection and timeout policy. Start with
// DefaultConfig (or ConfigFromEnv) and change what you need; Validate says what is wrong.
type Config struct {
	// URL is the sandbox's WebSocket endpoint, e.g. ws://127.0.0.1:7070/ws. Required.
	URL string
	// APIKey is the bearer token sent on every WebSocket upgrade. Required.
	APIKey string
	// RefreshURL, when set, is polled for a new token every RefreshInterval, and at once
	// when the sandbox refuses the current one (see TokenManager in the package doc).
	RefreshURL string
	// RefreshInterval is how often the token is refreshed (sooner if the refresh
	// endpoint says the token expires earlier). Default 1h.
	RefreshInterval time.Duration
	// RefreshRetry is the wait after a failed refresh. Default 1m.
	RefreshRetry time.Duration

	// PoolSize is the number of connections kept open. Default 5.
	PoolSize int
	// PoolOverflow is how many more connections may be opened while all PoolSize are
	// busy; they close again when idle. Default 10.
	PoolOverflow int
	// CheckoutTimeout is how long an execution waits for a free, healthy connection
	// before it fails with a retryable "pool exhausted" sandbox error. Default 5s (the
	// seed's poolboy checkout timeout).
	CheckoutTimeout time.Duration
	// TenantWeight is each tenant's weight in the share of the pool's connections while
	// executions wait (nil: 1 each; values below 1 count as 1). The next free connection
	// goes to the earliest waiting execution of the tenant chosen as for the model
	// endpoint's slots (llm/fairshare: fewest connections held for its weight, then
	// stride passes), so a tenant that floods the sandbox gets its share, not the pool.
	// An execution's tenant is its context's (auth.TenantOf).
	TenantWeight func(tenant string) int
	// HealthTimeout bounds the ping/pong health check a connection makes before each
	// execution. Default 2s.
	HealthTimeout time.Duration

	// ConnectTimeout bounds one WebSocket dial, handshake included. Default 5s.
	ConnectTimeout time.Duration
	// InitialBackoff is the wait after the immediate reconnection attempt fails; it
	// doubles on each further failure up to MaxBackoff and resets on success. Default 100ms.
	InitialBackoff time.Duration
	// MaxBackoff caps the reconnection wait. Default 30s.
	MaxBackoff time.Duration
	// MaxRetries is how many failed reconnection attempts in a row a connection makes
	// before it fails and its supervisor (the pool) restarts it. Default 10.
	MaxRetries int
	// RestartBackoff is the supervisor's base delay before restarting a failed
	// connection; it grows with each failure inside RestartWindow. Default 1s.
	RestartBackoff time.Duration
	// RestartWindow is the period after which a connection's failure count is forgotten.
	// Default 5m.
	RestartWindow time.Duration
	// WriteTimeout bounds writing one frame. Default 10s.
	WriteTimeout time.Duration

	// DefaultTimeout is an execution's time limit when the call names none. Default 30s.
	DefaultTimeout time.Duration
	// MaxTimeout caps the time limit a call may ask for. Default 300s.
	MaxTimeout time.Duration
	// TimeoutGrace is how long past an execution's time limit the client waits for the
	// sandbox's own verdict before it gives up, returns a timeout error and sends a
	// cancel. Default 2s.
	TimeoutGrace time.Duration
	// MemoryMB is every execution's memory limit. Default 256.
	MemoryMB int64
	// CPUShares is every execution's CPU share. Default 512.
	CPUShares int64
	// MaxOutputBytes bounds stdout+stderr of one execution (the sandbox enforces it; the
	// client keeps at most this much of each stream). Default 1 MiB.
	MaxOutputBytes int64
	// Env is given to every execution as environment variables.
	Env map[string]string

	// Logger receives the client's structured logs. Nil means slog.Default().
	Logger *slog.Logger
}

// DefaultConfig returns the seed design's defaults, without URL and APIKey.
func DefaultConfig() Config {
	return Config{
		RefreshInterval: time.Hour,
		RefreshRetry:    time.Minute,
		PoolSize:        5,
		PoolOverflow:    10,
		CheckoutTimeout: 5 * time.Second,
		HealthTimeout:   2 * time.Second,
		ConnectTimeout:  5 * time.Second,
		InitialBackoff:  100 * time.Millisecond,
		MaxBackoff:      30 * time.Second,
		MaxRetries:      10,
		RestartBackoff:  time.Second,
		RestartWindow:   5 * time.Minute,
		WriteTimeout:    10 * time.Second,
		DefaultTimeout:  30 * time.Second,
		MaxTimeout:      300 * time.Second,
		TimeoutGrace:    2 * time.Second,
		MemoryMB:        256,
		CPUShares:       512,
		MaxOutputBytes:  1 << 20,
	}
}

// ConfigFromEnv returns DefaultConfig with SANDBOX_URL, SANDBOX_API_KEY,
// SANDBOX_REFRESH_URL, SANDBOX_POOL_SIZE and SANDBOX_POOL_OVERFLOW applied. A pool
// variable that is not a number is an error.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	c := DefaultConfig()
	c.URL, c.APIKey, c.RefreshURL = getenv(EnvURL), getenv(EnvAPIKey), getenv(EnvRefreshURL)
	for _, v := range []struct {
		name string
		dst  *int
	}{{EnvPoolSize, &c.PoolSize}, {EnvPoolOverflow, &c.PoolOverflow}} {
		s := getenv(v.name)
		if s == "" {
			continue
		}
		n, err := strconv.Atoi(s)
		if err != nil {
			return Config{}, fmt.Errorf("%s=%q: not a number", v.name, s)
		}
		*v.dst = n
	}
	return c, nil
}

// Validate reports the first problem with c.
func (c Config) Validate() error {
	u, err := url.Parse(c.URL)
	switch {
	case c.URL == "":
		return errors.New("sandbox: no URL (set " + EnvURL + " or --sandbox-url)")
	case err != nil:
		return fmt.Errorf("sandbox: bad URL %q: %w", c.URL, err)
	case u.Scheme != "ws" && u.Scheme != "wss":
		return fmt.Errorf("sandbox: URL %q: scheme must be ws or wss", c.URL)
	case u.Host == "":
		return fmt.Errorf("sandbox: URL %q has no host", c.URL)
	case c.APIKey == "":
		return errors.New("sandbox: no API key (set " + EnvAPIKey + " or --sandbox-token)")
	}
	if c.RefreshURL != "" {
		r, err := url.Parse(c.RefreshURL)
		if err != nil || (r.Scheme != "http" && r.Scheme != "https") || r.Host == "" {
			return fmt.Errorf("sandbox: refresh URL %q must be an http(s) URL", c.RefreshURL)
		}
	}
	switch {
	case c.PoolSize < 1:
		return fmt.Errorf("sandbox: pool size must be at least 1, got %d", c.PoolSize)
	case c.PoolOverflow < 0:
		return fmt.Errorf("sandbox: pool overflow must not be negative, got %d", c.PoolOverflow)
	case c.MaxRetries < 1:
		return fmt.Errorf("sandbox: max retries must be at least 1, got %d", c.MaxRetries)
	case c.InitialBackoff <= 0 || c.MaxBackoff < c.InitialBackoff:
		return fmt.Errorf("sandbox: backoff must satisfy 0 < initial (%s) <= max (%s)", c.InitialBackoff, c.MaxBackoff)
	case c.DefaultTimeout <= 0 || c.MaxTimeout < c.DefaultTimeout:
		return fmt.Errorf("sandbox: timeouts must satisfy 0 < default (%s) <= max (%s)", c.DefaultTimeout, c.MaxTimeout)
	case c.MemoryMB <= 0 || c.CPUShares < 0 || c.MaxOutputBytes <= 0:
		return errors.New("sandbox: memory and output limits must be positive, CPU shares not negative")
	}
	for _, d := range []struct {
		name string
		d    time.Duration
	}{
		{"refresh interval", c.RefreshInterval}, {"refresh retry", c.RefreshRetry}, {"checkout timeout", c.CheckoutTimeout},
		{"health timeout", c.HealthTimeout}, {"connect timeout", c.ConnectTimeout}, {"restart backoff", c.RestartBackoff},
		{"restart window", c.RestartWindow}, {"write timeout", c.WriteTimeout},
	} {
		if d.d <= 0 {
			return fmt.Errorf("sandbox: %s must be positive, got %s", d.name, d.d)
		}
	}
	if c.TimeoutGrace < 0 {
		return fmt.Errorf("sandbox: timeout grace must not be negative, got %s", c.TimeoutGrace)
	}
	return nil
}

// backoff returns the wait before reconnection attempt n (n = 1 after the immediate
// attempt failed): InitialBackoff doubled n-1 times, capped at MaxBackoff.
func (c Config) backoff(n int) time.Duration {
	d := c.InitialBackoff
	for i := 1; i < n && d < c.MaxBackoff; i++ {
		d *= 2
	}
	return min(d, c.MaxBackoff)
}
