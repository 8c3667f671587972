package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/fathom-agents/fathom/auth"
	"github.com/fathom-agents/fathom/gateway"
	"github.com/fathom-agents/fathom/live"
	"github.com/fathom-agents/fathom/messages"
)

// tenantTokens authenticates "acme" and "globex" as members of those tenants.
type tenantTokens struct{}

func (tenantTokens) Authenticate(_ context.Context, cred string) (auth.Principal, error) {
	switch cred {
	case "acme", "globex":
		return auth.Principal{Subject: cred + "-user", Tenant: cred, Roles: []auth.Role{auth.RoleMember}}, nil
	}
	return auth.Principal{}, auth.ErrNotMine
}

// TestAdapterSeam: a handler mounted on the gateway (as the protocol adapters are) runs
// operations with Do and follows a session with Follow for the request's principal:
// the session's tenant reads its state and events; another tenant gets exactly what a
// missing session gives; a request without a credential never reaches the handler.
func TestAdapterSeam(t *testing.T) {
	t.Parallel()
	g := startFake(t, gwOpts{cfg: func(c *gateway.Config) { c.Authenticator = tenantTokens{} }})
	g.h.Mount("GET /v1/test-adapter/{id}", gateway.ScopeRead, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		out := map[string]string{}
		if res, err := g.h.Do(r.Context(), gateway.Request{Op: gateway.OpState, SessionID: id}); err != nil {
			out["state_code"], out["state_msg"] = gateway.ErrorCode(err)
		} else {
			var st struct {
				State struct {
					Goal string `json:"goal"`
				} `json:"state"`
			}
			_ = json.Unmarshal(res, &st)
			out["goal"] = st.State.Goal
		}
		sub, err := g.h.Follow(r.Context(), id, 0, false)
		if err != nil {
			out["follow_code"], out["follow_msg"] = gateway.ErrorCode(err)
		} else {
			defer sub.Close()
			ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
			defer cancel()
			u, err := sub.NextUpdate(ctx)
			if err == nil {
				b, _ := g.h.EventJSON(id, u)
				var ev map[string]any
				_ = json.Unmarshal(b, &ev)
				out["first"], _ = ev["type"].(string)
			}
		}
		_ = json.NewEncoder(w).Encode(out)
	}))
	st, out := postJSON(t, g.srv.URL+"/v1/sessions", "acme", map[string]any{"session_id": "acme-1", "goal": "Write a haiku"})
	if st != 201 {
		t.Fatalf("acme starts: %d %v", st, out)
	}
	st, mine := getJSON(t, g.srv.URL+"/v1/test-adapter/acme-1", "acme")
	if st != 200 || mine["goal"] != "Write a haiku" || mine["first"] != "session_started" {
		t.Fatalf("acme through the adapter: %d %v", st, mine)
	}
	_, theirs := getJSON(t, g.srv.URL+"/v1/test-adapter/acme-1", "globex")
	_, missing := getJSON(t, g.srv.URL+"/v1/test-adapter/acme-9", "globex")
	if theirs["state_code"] != gateway.CodeNotFound || theirs["follow_code"] != gateway.CodeNotFound {
		t.Fatalf("globex reads acme's session through the adapter: %v", theirs)
	}
	if theirs["state_msg"] != `session "acme-1" not found` || missing["state_msg"] != `session "acme-9" not found` ||
		theirs["follow_msg"] != `session "acme-1" not found` || missing["follow_msg"] != `session "acme-9" not found` {
		t.Fatalf("another tenant's session is not answered as a missing one: %v vs %v", theirs, missing)
	}
	if st, _ := getJSON(t, g.srv.URL+"/v1/test-adapter/acme-1", "nobody"); st != http.StatusUnauthorized {
		t.Fatalf("no credential: %d, want 401", st)
	}
}

// TestAdapterStream: a mounted handler's long-running answer registered with Stream ends
// when the gateway's Shutdown begins, Shutdown waits for it, and once Shutdown has begun
// Stream refuses with CodeUnavailable.
func TestAdapterStream(t *testing.T) {
	t.Parallel()
	g := startFake(t, gwOpts{})
	ended := make(chan string, 2)
	g.h.Mount("GET /v1/test-stream", gateway.ScopeRead, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, done, err := g.h.Stream(r.Context())
		if err != nil {
			code, _ := gateway.ErrorCode(err)
			ended <- code
			return
		}
		w.WriteHeader(http.StatusOK)
		http.NewResponseController(w).Flush()
		<-ctx.Done()
		time.Sleep(100 * time.Millisecond) // finishing the answer: Shutdown must wait for it
		ended <- "ended"
		done()
	}))
	req, _ := http.NewRequest(http.MethodGet, g.srv.URL+"/v1/test-stream", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("stream: %v %v", resp, err)
	}
	defer resp.Body.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := g.h.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	select {
	case s := <-ended:
		if s != "ended" {
			t.Fatalf("the stream answered %q", s)
		}
	default:
		t.Fatal("Shutdown returned before the stream ended")
	}
	resp2, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp2.Body.Close()
	if s := <-ended; s != gateway.CodeUnavailable {
		t.Fatalf("Stream after Shutdown: %q, want %s", s, gateway.CodeUnavailable)
	}
}

// TestAdapterOnShutdown: a function registered with OnShutdown runs when Shutdown
// begins, and Shutdown returns only after it did; registered later, it runs at once.
func TestAdapterOnShutdown(t *testing.T) {
	t.Parallel()
	g := startFake(t, gwOpts{})
	ran := make(chan struct{})
	g.h.OnShutdown(func() {
		time.Sleep(100 * time.Millisecond) // closing connections: Shutdown must wait for it
		close(ran)
	})
	select {
	case <-ran:
		t.Fatal("OnShutdown's function ran before Shutdown")
	default:
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := g.h.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ran:
	default:
		t.Fatal("Shutdown returned before OnShutdown's function did")
	}
	late := false
	g.h.OnShutdown(func() { late = true })
	if !late {
		t.Fatal("a function registered after Shutdown did not run at once")
	}
}

// TestAdapterWriteError: WriteError answers a mounted handler's request in the gateway's
// error format, with the code's status.
func TestAdapterWriteError(t *testing.T) {
	t.Parallel()
	g := startFake(t, gwOpts{})
	g.h.Mount("POST /v1/test-adapter/bad", gateway.ScopeWrite, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gateway.WriteError(w, gateway.CodeInvalidArgument, "threadId is required")
	}))
	st, out := postJSON(t, g.srv.URL+"/v1/test-adapter/bad", token, map[string]any{})
	e, _ := out["error"].(map[string]any)
	if st != http.StatusBadRequest || e["code"] != gateway.CodeInvalidArgument || e["message"] != "threadId is required" || e["request_id"] == "" {
		t.Fatalf("WriteError: %d %v", st, out)
	}
}

// TestEventJSONSharesOneEncoding: every subscriber and adapter of a session gets the one
// encoding of each event: two subscriptions' EventJSON of an event are the same bytes,
// the event frame of the session's journal (messages.MarshalEventJSON with "op" first).
func TestEventJSONSharesOneEncoding(t *testing.T) {
	t.Parallel()
	g := startFake(t, gwOpts{})
	type result struct {
		Events int    `json:"events"`
		Fault  string `json:"fault"`
	}
	g.h.Mount("GET /v1/test-frames/{id}", gateway.ScopeRead, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		ctx, cancel := context.WithTimeout(r.Context(), 20*time.Second)
		defer cancel()
		var res result
		defer func() { _ = json.NewEncoder(w).Encode(res) }()
		var subs [2]live.Subscription
		for i := range subs {
			sub, err := g.h.Follow(ctx, id, 0, false)
			if err != nil {
				res.Fault = err.Error()
				return
			}
			defer sub.Close()
			subs[i] = sub
		}
		for {
			var frames [2][]byte
			var last *messages.Event
			for i, sub := range subs {
				u, err := sub.NextUpdate(ctx)
				if err != nil {
					res.Fault = err.Error()
					return
				}
				if frames[i], err = g.h.EventJSON(id, u); err != nil {
					res.Fault = err.Error()
					return
				}
				last = u.Event
			}
			want, _ := messages.MarshalEventJSON(last)
			if !bytes.Equal(frames[1], append([]byte(`{"op":"event",`), want[1:]...)) {
				res.Fault = fmt.Sprintf("frame %s, want the event's rendering %s", frames[1], want)
				return
			}
			if &frames[0][0] != &frames[1][0] {
				res.Fault = fmt.Sprintf("seq %d was encoded once per subscriber", last.GetSeq())
				return
			}
			if res.Events++; last.Type() == "session_completed" {
				return
			}
		}
	}))
	if st, out := postJSON(t, g.srv.URL+"/v1/sessions", token, map[string]any{"session_id": "frames-1", "goal": "Write a haiku"}); st != 201 {
		t.Fatalf("start: %d %v", st, out)
	}
	g.completeAsync("frames-1")
	st, out := getJSON(t, g.srv.URL+"/v1/test-frames/frames-1", token)
	if st != 200 || out["fault"] != "" || out["events"].(float64) < 3 {
		t.Fatalf("%d %v", st, out)
	}
}
