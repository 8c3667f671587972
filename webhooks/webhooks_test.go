package webhooks_test

import (
	"testing"
	"time"

	"github.com/fathom-agents/fathom/webhooks"
)

// TestSignStandardVector: the signature of the Standard Webhooks specification's
// example (its libraries' shared test vector).
func TestSignStandardVector(t *testing.T) {
	key, err := webhooks.ParseSecret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	if err != nil {
		t.Fatal(err)
	}
	got := webhooks.Sign(key, "msg_p5jXN8AQM9LWM0D4loKWxJek", time.Unix(1614265330, 0), []byte(`{"test": 2432232314}`))
	if want := "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="; got != want {
		t.Fatalf("signature %s, want %s", got, want)
	}
}

// TestDefaultBackoffOutlastsAnHour: with the defaults, the attempts of one notification
// span more than an hour even with no jitter, and each delay stays within its bounds.
func TestDefaultBackoffOutlastsAnHour(t *testing.T) {
	c := webhooks.DefaultConfig()
	var total time.Duration
	for n := 1; n < c.MaxAttempts; n++ {
		d := c.Backoff(n)
		if d < c.InitialBackoff || d > c.MaxBackoff+c.MaxBackoff/4 {
			t.Fatalf("backoff after attempt %d = %s", n, d)
		}
		total += d
	}
	if total < time.Hour {
		t.Fatalf("%d attempts span %s, want at least an hour", c.MaxAttempts, total)
	}
}

// TestValidateURL: only absolute http(s) URLs without user info.
func TestValidateURL(t *testing.T) {
	for _, u := range []string{"http://127.0.0.1:9/x", "https://hooks.example.com/in?t=1"} {
		if err := webhooks.ValidateURL(u); err != nil {
			t.Errorf("%s: %v", u, err)
		}
	}
	for _, u := range []string{"ftp://example.com/", "file:///etc/passwd", "/relative", "http://user:pw@example.com/", "gopher://x"} {
		if webhooks.ValidateURL(u) == nil {
			t.Errorf("%s accepted", u)
		}
	}
}
