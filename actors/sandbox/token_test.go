package sandbox

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// refreshServer is a local token refresh endpoint: it accepts the current token (as
// bearer and body) and answers with the next one.
func refreshServer(t *testing.T, answer func(current string) (status int, body string)) *httptest.Server {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			Token string `json:"token"`
		}
		if r.Method != http.MethodPost || json.NewDecoder(r.Body).Decode(&in) != nil ||
			r.Header.Get("Authorization") != "Bearer "+in.Token {
			http.Error(w, "bad refresh request", http.StatusBadRequest)
			return
		}
		status, body := answer(in.Token)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(s.Close)
	return s
}

func TestRefreshTokenExchange(t *testing.T) {
	exp := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	s := refreshServer(t, func(cur string) (int, string) {
		switch cur {
		case "old":
			return 200, `{"token":"new","expires_at":"` + exp.Format(time.RFC3339) + `"}`
		case "empty":
			return 200, `{}`
		}
		return 401, `{"error":"no"}`
	})
	ctx := context.Background()
	tok, at, err := RefreshToken(ctx, s.Client(), s.URL, "old")
	if err != nil || tok != "new" || !at.Equal(exp) {
		t.Fatalf("got %q %s %v", tok, at, err)
	}
	if _, _, err := RefreshToken(ctx, s.Client(), s.URL, "revoked"); err == nil || !strings.Contains(err.Error(), "HTTP 401") {
		t.Fatalf("a refused refresh: %v", err)
	}
	if _, _, err := RefreshToken(ctx, s.Client(), s.URL, "empty"); err == nil || !strings.Contains(err.Error(), "no token") {
		t.Fatalf("an answer without a token: %v", err)
	}
}
