package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// tokenStore holds the current bearer token. The token manager is its only writer;
// dial goroutines read it when they open a connection, without a round trip through a
// mailbox.
type tokenStore struct{ v atomic.Pointer[string] }

func newTokenStore(initial string) *tokenStore {
	s := &tokenStore{}
	s.set(initial)
	return s
}

func (s *tokenStore) get() string  { return *s.v.Load() }
func (s *tokenStore) set(t string) { s.v.Store(&t) }

// tokenManager refreshes the bearer token when Config.RefreshURL is set: every
// RefreshInterval (sooner when the endpoint says the token expires earlier), after
// RefreshRetry when a refresh failed, and at once when a connection reports that the
// sandbox refused the token (at most once per RefreshRetry). The HTTP exchange runs in a
// goroutine the manager owns; its outcome comes back as a message.
type tokenManager struct {
	cfg    Config
	log    *slog.Logger
	store  *tokenStore
	client *http.Client

	timer       *time.Timer
	inflight    context.CancelFunc
	done        chan struct{}
	lastAttempt time.Time
}

// Messages of the token manager.
type (
	// refreshNow (connection → token manager): the sandbox refused the token.
	refreshNow struct{}
	// refreshTick (timer → token manager): time for the scheduled refresh.
	refreshTick struct{ timer *time.Timer }
	// refreshed (refresh goroutine → token manager): the exchange's outcome.
	refreshed struct {
		token     string
		expiresAt time.Time
		err       error
	}
)

func newTokenManagerProps(cfg Config, log *slog.Logger, store *tokenStore) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor {
		return &tokenManager{cfg: cfg, log: log, store: store, client: &http.Client{Timeout: cfg.ConnectTimeout}}
	})
}

// Receive implements actor.Actor.
func (m *tokenManager) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *actor.Started:
		m.schedule(ctx, m.cfg.RefreshInterval)
	case *refreshTick:
		if msg.timer == m.timer {
			m.refresh(ctx)
		}
	case *refreshNow:
		if m.inflight == nil && time.Since(m.lastAttempt) >= m.cfg.RefreshRetry {
			m.log.Info("sandbox refused the token; refreshing it now")
			m.refresh(ctx)
		}
	case *refreshed:
		m.onRefreshed(ctx, msg)
	case *actor.Stopping, *actor.Restarting:
		m.stop()
	case *actor.Stopped, *actor.Restart:
	default:
		m.log.Warn("sandbox token manager: unexpected message", "type", fmt.Sprintf("%T", msg))
	}
}

func (m *tokenManager) schedule(ctx actor.Context, d time.Duration) {
	stopTimer(m.timer)
	m.timer = sendAfter(ctx, d, func(t *time.Timer) any { return &refreshTick{timer: t} })
}

// refresh starts the exchange in a goroutine unless one is running.
func (m *tokenManager) refresh(ctx actor.Context) {
	if m.inflight != nil {
		return
	}
	stopTimer(m.timer)
	m.timer = nil
	m.lastAttempt = time.Now()
	rctx, cancel := context.WithCancel(context.Background())
	m.inflight, m.done = cancel, make(chan struct{})
	root, self, done := ctx.ActorSystem().Root, ctx.Self(), m.done
	url, current, client := m.cfg.RefreshURL, m.store.get(), m.client
	go func() {
		defer close(done)
		tok, exp, err := RefreshToken(rctx, client, url, current)
		root.Send(self, &refreshed{token: tok, expiresAt: exp, err: err})
	}()
}

func (m *tokenManager) onRefreshed(ctx actor.Context, msg *refreshed) {
	m.inflight, m.done = nil, nil
	if msg.err != nil {
		m.log.Warn("sandbox token refresh failed; keeping the current token", "error", msg.err, "retry_in", m.cfg.RefreshRetry)
		m.schedule(ctx, m.cfg.RefreshRetry)
		return
	}
	m.store.set(msg.token)
	next := m.cfg.RefreshInterval
	if !msg.expiresAt.IsZero() {
		// Refresh when 80% of the token's remaining lifetime has passed, at least 1s on.
		next = min(next, max(time.Until(msg.expiresAt)*4/5, time.Second))
	}
	m.log.Info("sandbox token refreshed", "next_refresh_in", next)
	m.schedule(ctx, next)
}

func (m *tokenManager) stop() {
	stopTimer(m.timer)
	if m.inflight != nil {
		m.inflight()
		<-m.done
		m.inflight, m.done = nil, nil
	}
}

// RefreshToken performs the token refresh exchange: POST url with the current token as
// bearer credentials and as the JSON body {"token": current}; a 200 answer carries
// {"token": new, "expires_at": RFC 3339 time (optional)}. Any other status, or an
// answer without a token, is an error.
func RefreshToken(ctx context.Context, client *http.Client, url, current string) (token string, expiresAt time.Time, err error) {
	body, _ := json.Marshal(map[string]string{"token": current})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return "", time.Time{}, fmt.Errorf("refresh token: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+current)
	resp, err := client.Do(req)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("refresh token: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return "", time.Time{}, fmt.Errorf("refresh token: read answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return "", time.Time{}, fmt.Errorf("refresh token: HTTP %d from %s", resp.StatusCode, url)
	}
	var ans struct {
		Token     string `json:"token"`
		ExpiresAt string `json:"expires_at"`
	}
	if err := json.Unmarshal(b, &ans); err != nil {
		return "", time.Time{}, fmt.Errorf("refresh token: decode answer: %w", err)
	}
	if ans.Token == "" {
		return "", time.Time{}, errors.New("refresh token: the answer has no token")
	}
	if ans.ExpiresAt != "" {
		if expiresAt, err = time.Parse(time.RFC3339, ans.ExpiresAt); err != nil {
			return "", time.Time{}, fmt.Errorf("refresh token: expires_at %q: %w", ans.ExpiresAt, err)
		}
	}
	return ans.Token, expiresAt, nil
}
