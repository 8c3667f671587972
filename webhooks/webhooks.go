package webhooks

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// SecretPrefix starts every secret (Standard Webhooks).
const SecretPrefix = "whsec_"

// Headers of a notification (Standard Webhooks).
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
)

// Config configures delivery.
type Config struct {
	// Secret signs every notification: "whsec_" and base64 bytes (at least 24 of them).
	// Empty: the node sends no webhooks, and a session that names a URL is refused.
	Secret string
	// Timeout bounds one attempt (connect, send, answer).
	Timeout time.Duration
	// MaxAttempts bounds the attempts of one notification; after the last failure it
	// is given up (webhook_failed with final).
	MaxAttempts int
	// InitialBackoff is the delay after the first failed attempt; each next one doubles
	// it up to MaxBackoff, plus up to a quarter of jitter. The defaults spread 12
	// attempts over more than an hour.
	InitialBackoff time.Duration
	MaxBackoff     time.Duration
	// Concurrency bounds the attempts in flight on the node; QueueSize bounds the
	// attempts waiting for a worker (Submit refuses beyond it).
	Concurrency int
	QueueSize   int
}

// DefaultConfig returns the defaults: 10 s per attempt, 12 attempts from 5 s apart
// doubling to 15 min (about 66 min in all before the last), 16 workers, 1024 queued.
func DefaultConfig() Config {
	return Config{Timeout: 10 * time.Second, MaxAttempts: 12, InitialBackoff: 5 * time.Second,
		MaxBackoff: 15 * time.Minute, Concurrency: 16, QueueSize: 1024}
}

// Validate checks c.
func (c Config) Validate() error {
	if c.Secret != "" {
		if _, err := ParseSecret(c.Secret); err != nil {
			return err
		}
	}
	switch {
	case c.Timeout <= 0:
		return errors.New("webhook timeout must be positive")
	case c.MaxAttempts < 1:
		return errors.New("webhook max attempts must be at least 1")
	case c.InitialBackoff <= 0 || c.MaxBackoff < c.InitialBackoff:
		return errors.New("webhook backoff must be positive, its maximum at least its initial delay")
	case c.Concurrency < 1 || c.QueueSize < 1:
		return errors.New("webhook concurrency and queue size must be at least 1")
	}
	return nil
}

// Backoff is the delay before the attempt after failed attempt n (from 1): InitialBackoff
// doubled n-1 times, at most MaxBackoff, plus a random jitter of up to a quarter of it.
func (c Config) Backoff(n int) time.Duration {
	d := c.InitialBackoff
	for i := 1; i < n && d < c.MaxBackoff; i++ {
		d *= 2
	}
	d = min(d, c.MaxBackoff)
	return d + time.Duration(rand.Int64N(int64(d/4)+1))
}

// ParseSecret decodes a "whsec_" secret into its key bytes.
func ParseSecret(secret string) ([]byte, error) {
	b64, ok := strings.CutPrefix(secret, SecretPrefix)
	if !ok {
		return nil, fmt.Errorf("webhook secret must start with %q", SecretPrefix)
	}
	key, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return nil, fmt.Errorf("decode webhook secret: %w", err)
	}
	if len(key) < 24 {
		return nil, fmt.Errorf("webhook secret has %d bytes, want at least 24", len(key))
	}
	return key, nil
}

// Sign returns the webhook-signature header of body sent as id at ts under key:
// "v1," and the base64 HMAC-SHA256 of "id.ts.body".
func Sign(key []byte, id string, ts time.Time, body []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id + "." + strconv.FormatInt(ts.Unix(), 10) + "."))
	m.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// ValidateURL checks a receiver's URL: absolute, http or https, with a host. It does not
// resolve the host: see docs/gateway-protocol.md on SSRF.
func ValidateURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("parse webhook url: %w", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		return errors.New("webhook url must be an absolute http or https URL without user info")
	}
	return nil
}

// Attempt is one POST of a notification.
type Attempt struct {
	// URL is the receiver's; ID the notification's webhook-id; Body its JSON.
	URL  string
	ID   string
	Body []byte
	// ContentType is the body's media type ("": application/json).
	ContentType string
	// Header are more headers to send (an A2A push's Authorization); SealedHeader more
	// still whose values Seal sealed, opened just before the POST. Neither replaces
	// the signature headers.
	Header       map[string]string
	SealedHeader map[string]string
}

// Outcome is what an attempt came to.
type Outcome struct {
	// StatusCode is the receiver's HTTP status (0 when none came).
	StatusCode int
	// Err is set unless the receiver answered 2xx.
	Err error
}

type job struct {
	a    Attempt
	done func(Outcome)
}

// Sender POSTs attempts on Concurrency workers. It is safe for concurrent use.
type Sender struct {
	cfg    Config
	key    []byte
	client *http.Client
	log    *slog.Logger
	now    func() time.Time
	jobs   chan job
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once
}

// NewSender starts cfg.Concurrency workers. cfg.Secret must be set.
func NewSender(cfg Config, log *slog.Logger) (*Sender, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("webhook config: %w", err)
	}
	key, err := ParseSecret(cfg.Secret)
	if err != nil {
		return nil, fmt.Errorf("webhook config: %w", err)
	}
	if log == nil {
		log = slog.Default()
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Sender{cfg: cfg, key: key, log: log, now: time.Now, jobs: make(chan job, cfg.QueueSize), ctx: ctx, cancel: cancel,
		client: &http.Client{
			Timeout: cfg.Timeout,
			// A redirect is an answer, not a new target: following it would let a
			// receiver point the node anywhere.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}}
	for range cfg.Concurrency {
		s.wg.Add(1)
		go s.work()
	}
	return s, nil
}

// Config returns the sender's configuration.
func (s *Sender) Config() Config { return s.cfg }

// Submit queues a; done is called with its outcome from a worker (not when Close comes
// first: the attempt is then left to the journal's next activation). It reports false
// when the queue is full or the sender closed.
func (s *Sender) Submit(a Attempt, done func(Outcome)) (ok bool) {
	defer func() {
		if recover() != nil { // sent on the closed channel
			ok = false
		}
	}()
	if s.ctx.Err() != nil {
		return false
	}
	select {
	case s.jobs <- job{a: a, done: done}:
		return true
	default:
		return false
	}
}

// Close stops the workers, abandoning the attempts in flight, and waits for them.
func (s *Sender) Close() {
	s.once.Do(func() {
		s.cancel()
		s.wg.Wait()
	})
}

func (s *Sender) work() {
	defer s.wg.Done()
	for {
		select {
		case <-s.ctx.Done():
			return
		case j := <-s.jobs:
			o := s.post(j.a)
			if s.ctx.Err() != nil {
				return
			}
			j.done(o)
		}
	}
}

// maxAnswer bounds the bytes of a receiver's answer read (to reuse the connection).
const maxAnswer = 64 << 10

func (s *Sender) post(a Attempt) Outcome {
	if err := ValidateURL(a.URL); err != nil {
		return Outcome{Err: err}
	}
	ctx, cancel := context.WithTimeout(s.ctx, s.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.URL, bytes.NewReader(a.Body))
	if err != nil {
		return Outcome{Err: fmt.Errorf("build webhook request: %w", err)}
	}
	ts := s.now()
	for k, v := range a.Header {
		req.Header.Set(k, v)
	}
	for k, v := range a.SealedHeader {
		plain, err := s.open(v)
		if err != nil {
			return Outcome{Err: fmt.Errorf("open the %s header: %w", k, err)}
		}
		req.Header.Set(k, plain)
	}
	ct := a.ContentType
	if ct == "" {
		ct = "application/json"
	}
	req.Header.Set("Content-Type", ct)
	req.Header.Set("User-Agent", "fathom-webhooks")
	req.Header.Set(HeaderID, a.ID)
	req.Header.Set(HeaderTimestamp, strconv.FormatInt(ts.Unix(), 10))
	req.Header.Set(HeaderSignature, Sign(s.key, a.ID, ts, a.Body))
	resp, err := s.client.Do(req)
	if err != nil {
		return Outcome{Err: fmt.Errorf("post webhook: %w", redact(err))}
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxAnswer))
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return Outcome{StatusCode: resp.StatusCode, Err: fmt.Errorf("receiver answered %s", resp.Status)}
	}
	return Outcome{StatusCode: resp.StatusCode}
}

// redact drops the URL's query from a client error (it may carry a receiver's token).
func redact(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		if u, perr := url.Parse(ue.URL); perr == nil {
			u.RawQuery = ""
			return &url.Error{Op: ue.Op, URL: u.String(), Err: ue.Err}
		}
	}
	return err
}
