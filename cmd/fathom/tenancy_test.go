package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/fathom-agents/fathom/internal/testenv"
	"github.com/fathom-agents/fathom/internal/testissuer"
)

// The hostile-tenant suite: tenant globex's member (and operator) try every way there is
// to reach tenant acme's sessions, through the HTTP routes, the WebSocket ops and forged
// credentials. Every attempt on acme's session must be answered exactly as the same
// attempt on a session that does not exist (same status, same body but for the ids and
// the request id), or refused outright (401 for a bad credential, 403 for a node-wide
// route); nothing of acme's may change. Tokens are JWTs signed by a test issuer that
// serves its JWKS over HTTP, verified by `fathom node --oidc-issuer`.

// TestHostileTenantEmbedded runs the suite against one node on the embedded journal.
func TestHostileTenantEmbedded(t *testing.T) {
	t.Parallel()
	iss := testissuer.New(t)
	n := startNode(t, cleanEnv(), "--data-dir", t.TempDir(), "--oidc-issuer", iss.URL(), "--oidc-audience", testissuer.DefaultAudience)
	genID := hostileSuite(t, iss, n, n)

	// The CLI: --token (or FATHOM_TOKEN) may be a JWT, and it sees what its principal sees.
	alice, bob := iss.Sign(t, iss.Claims("alice", "acme")), iss.Sign(t, iss.Claims("bob", "globex"))
	if r := fathom(t, cleanEnv("FATHOM_TOKEN="+alice), "session", "list", "--addr", n.url, "--json"); r.code != 0 ||
		!strings.Contains(r.stdout, genID) || strings.Contains(r.stdout, "globex-1") {
		t.Fatalf("session list as alice: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := fathom(t, cleanEnv(), "session", "list", "--addr", n.url, "--token", bob, "--json"); r.code != 0 ||
		strings.Contains(r.stdout, "acme") || strings.Contains(r.stdout, genID) || !strings.Contains(r.stdout, "globex-1") {
		t.Fatalf("session list as bob: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := fathom(t, cleanEnv("FATHOM_TOKEN="+bob), "session", "watch", "--addr", n.url, genID); r.code == 0 || !strings.Contains(r.stderr, "not found") {
		t.Fatalf("session watch of acme's session as bob: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	// A delete is logged with the principal that deleted the session (and kept in the
	// journal's tombstones, read by the conformance suite).
	if st, out := httpJSON(t, "DELETE", n.url+"/v1/sessions/"+genID, alice, nil); st != 200 {
		t.Fatalf("alice deletes %s: %d %v", genID, st, out)
	}
	testenv.Eventually(t, 10*time.Second, func() bool {
		return strings.Contains(n.stderr.String(), `msg="session deleted" session_id=`+genID) && strings.Contains(n.stderr.String(), "by=alice@acme")
	}, "no \"session deleted\" line naming alice@acme")
}

// TestHostileTenantCluster runs the suite against two nodes sharing PostgreSQL and
// Consul: acme's sessions are started through one node, globex attacks through the
// other, so every check crosses the cluster with the caller on the grain request.
func TestHostileTenantCluster(t *testing.T) {
	t.Parallel()
	consul := testenv.ConsulAddr(t)
	iss := testissuer.New(t)
	c := newFaultCluster(t, consul, "http://127.0.0.1:1/v1", "--oidc-issuer", iss.URL(), "--oidc-audience", testissuer.DefaultAudience)
	c.env = cleanEnv() // the built-in demo model: no model server
	a, b := c.start(), c.start()
	c.awaitViews(a, b)
	genID := hostileSuite(t, iss, a, b)

	// A delete keeps a tombstone naming the principal that deleted the session.
	alice := iss.Sign(t, iss.Claims("alice", "acme"))
	if st, out := httpJSON(t, "DELETE", b.url+"/v1/sessions/"+genID, alice, nil); st != 200 {
		t.Fatalf("alice deletes %s: %d %v", genID, st, out)
	}
	var tenant, owner, by string
	if err := c.conn.QueryRow(context.Background(), `SELECT tenant, owner, deleted_by FROM fathom_tombstones WHERE session_id = $1`, genID).
		Scan(&tenant, &owner, &by); err != nil {
		t.Fatalf("tombstone of %s: %v", genID, err)
	}
	if tenant != "acme" || owner != "alice" || by != "alice@acme" {
		t.Fatalf("tombstone of %s: tenant %q owner %q deleted_by %q, want acme, alice, alice@acme", genID, tenant, owner, by)
	}
	if st, _ := httpJSON(t, "GET", a.url+"/v1/sessions/"+genID, alice, nil); st != 404 {
		t.Fatalf("GET a deleted session: %d", st)
	}
}

// hostileSuite runs the attempts: acme's sessions live through via, globex attacks
// through at. It returns the id of acme's session with a generated id.
func hostileSuite(t *testing.T, iss *testissuer.Issuer, via, at *nodeProc) string {
	alice := iss.Sign(t, iss.Claims("alice", "acme"))
	carol := iss.Sign(t, iss.Claims("carol", "acme"))
	viewerA := iss.Sign(t, iss.Claims("vic", "acme", "viewer"))
	bob := iss.Sign(t, iss.Claims("bob", "globex"))
	olga := iss.Sign(t, iss.Claims("olga", "globex", "operator"))

	// acme's sessions: one with a chosen id, one with a generated id, both completed.
	aID := "acme-report-1"
	if st, out := httpJSON(t, "POST", via.url+"/v1/sessions", alice, map[string]any{"session_id": aID, "goal": "Write a haiku about event sourcing"}); st != 201 {
		t.Fatalf("alice starts %s: %d %v", aID, st, out)
	}
	st, out := httpJSON(t, "POST", via.url+"/v1/sessions", alice, map[string]any{"goal": "Write a haiku about tenants"})
	if st != 201 {
		t.Fatalf("alice starts a session: %d %v", st, out)
	}
	genID := out["session_id"].(string)
	if st, out := httpJSON(t, "POST", at.url+"/v1/sessions", bob, map[string]any{"session_id": "globex-1", "goal": "Write a haiku about fences"}); st != 201 {
		t.Fatalf("bob starts globex-1: %d %v", st, out)
	}
	for _, id := range []string{aID, genID} {
		awaitStatus(t, via, alice, id, "SESSION_STATUS_COMPLETED")
	}
	awaitStatus(t, at, bob, "globex-1", "SESSION_STATUS_COMPLETED")

	// What acme's session looks like before the attacks, to its owner.
	before := snapshotSession(t, via, alice, aID)
	if before.tenant != "acme" || before.owner != "alice" {
		t.Fatalf("%s belongs to %s/%s, want acme/alice", aID, before.tenant, before.owner)
	}
	artifact := before.artifact
	if artifact == "" {
		t.Fatalf("%s wrote no artifact (the demo model writes one)", aID)
	}
	// A fork of acme's session (at its end: it runs nothing), so that listing a session's
	// forks has a row to leak; its owner's listing finds it.
	if st, out := httpJSON(t, "POST", via.url+"/v1/sessions/"+aID+"/fork", alice, map[string]any{"seq": before.seq, "new_session_id": "acme-fork-1"}); st != 201 {
		t.Fatalf("alice forks %s: %d %v", aID, st, out)
	}
	if st, b := rawHTTP(t, "GET", via.url+"/v1/sessions?forked_from="+aID, alice, ""); st != 200 || !bytes.Contains(b, []byte(`"session_id":"acme-fork-1"`)) {
		t.Fatalf("alice lists the forks of %s: %d %s", aID, st, b)
	}

	// Within acme: a member reads a colleague's session but may not act on it; a viewer reads.
	if st, _ := httpJSON(t, "GET", at.url+"/v1/sessions/"+aID, carol, nil); st != 200 {
		t.Fatalf("carol (acme member) reads alice's session: %d", st)
	}
	if st, out := httpJSON(t, "POST", at.url+"/v1/sessions/"+aID+"/cancel", carol, map[string]any{}); st != 403 || errCode(out) != "permission_denied" {
		t.Fatalf("carol cancels alice's session: %d %v, want 403 permission_denied", st, out)
	}
	if st, _ := httpJSON(t, "GET", at.url+"/v1/sessions/"+aID+"/timeline", viewerA, nil); st != 200 {
		t.Fatalf("vic (acme viewer) reads the timeline: %d", st)
	}
	if st, _ := httpJSON(t, "GET", at.url+"/v1/sessions/"+aID+"/gantt", viewerA, nil); st != 200 {
		t.Fatalf("vic (acme viewer) reads the gantt: %d", st)
	}
	if st, _ := httpJSON(t, "POST", at.url+"/v1/sessions", viewerA, map[string]any{"goal": "x"}); st != 403 {
		t.Fatalf("vic (acme viewer) starts a session: %d, want 403", st)
	}

	attempts := 0
	// same checks that an attempt on acme's session answers exactly as on a missing one.
	missing := "acme-report-9"
	same := func(name string, tok string, req func(id string) (int, []byte)) {
		t.Helper()
		attempts++
		gotSt, got := req(aID)
		wantSt, want := req(missing)
		if gotSt < 400 {
			t.Errorf("attempt %d (%s): %d %s: let through", attempts, name, gotSt, got)
			return
		}
		g, w := normalize(got, aID), normalize(want, missing)
		t.Logf("attempt %d (%s): %d %s", attempts, name, gotSt, g)
		if gotSt != wantSt || g != w {
			t.Errorf("attempt %d (%s): answered %d %s on acme's session, %d %s on a missing one", attempts, name, gotSt, g, wantSt, w)
		}
	}
	hreq := func(method, path string, tok string, body string, hdr ...string) func(id string) (int, []byte) {
		return func(id string) (int, []byte) {
			return rawHTTP(t, method, at.url+strings.ReplaceAll(path, "{id}", id), tok, body, hdr...)
		}
	}
	for _, who := range []struct {
		name, tok string
	}{{"bob (globex member)", bob}, {"olga (globex operator)", olga}} {
		tok := who.tok
		p := func(s string) string { return who.name + ": " + s }
		same(p("GET state"), tok, hreq("GET", "/v1/sessions/{id}", tok, ""))
		same(p("GET timeline"), tok, hreq("GET", "/v1/sessions/{id}/timeline", tok, ""))
		same(p("GET state at step 0"), tok, hreq("GET", "/v1/sessions/{id}/state?at=0", tok, ""))
		same(p("GET state at seq 1"), tok, hreq("GET", "/v1/sessions/{id}/state?seq=1", tok, ""))
		same(p("GET gantt"), tok, hreq("GET", "/v1/sessions/{id}/gantt", tok, ""))
		same(p("GET gantt at seq 1"), tok, hreq("GET", "/v1/sessions/{id}/gantt?seq=1", tok, ""))
		same(p("events from seq 0"), tok, hreq("GET", "/v1/sessions/{id}/events?follow=false&from_seq=0", tok, ""))
		same(p("events as SSE with Last-Event-ID"), tok, hreq("GET", "/v1/sessions/{id}/events?follow=false", tok, "", "Accept", "text/event-stream", "Last-Event-ID", "1"))
		same(p("transcript"), tok, hreq("GET", "/v1/sessions/{id}/transcript", tok, ""))
		same(p("transcript at seq 1"), tok, hreq("GET", "/v1/sessions/{id}/transcript?seq=1", tok, ""))
		same(p("one event"), tok, hreq("GET", "/v1/sessions/{id}/events/1", tok, ""))
		same(p("one event's full value"), tok, hreq("GET", "/v1/sessions/{id}/events/1?field=goal", tok, ""))
		same(p("artifact by path"), tok, hreq("GET", "/v1/sessions/{id}/artifacts/"+strings.TrimPrefix(artifact, aID+"/"), tok, ""))
		same(p("artifact preview"), tok, hreq("GET", "/v1/sessions/{id}/artifacts/"+strings.TrimPrefix(artifact, aID+"/")+"?preview=1", tok, ""))
		same(p("input"), tok, hreq("POST", "/v1/sessions/{id}/input", tok, `{"step_id":"step-1","input":"yes"}`))
		same(p("approve a tool call"), tok, hreq("POST", "/v1/sessions/{id}/input", tok, `{"request_id":"call-1","input":{"decision":"approve"}}`))
		same(p("pause"), tok, hreq("POST", "/v1/sessions/{id}/pause", tok, `{}`))
		same(p("resume"), tok, hreq("POST", "/v1/sessions/{id}/resume", tok, `{}`))
		same(p("set a breakpoint"), tok, hreq("POST", "/v1/sessions/{id}/breakpoints", tok, `{"position":"before"}`))
		same(p("clear breakpoints"), tok, hreq("DELETE", "/v1/sessions/{id}/breakpoints", tok, `{}`))
		same(p("fork with acme's session as the source"), tok, hreq("POST", "/v1/sessions/{id}/fork", tok, `{"step_index":0,"new_session_id":"globex-fork"}`))
		same(p("cancel"), tok, hreq("POST", "/v1/sessions/{id}/cancel", tok, `{"reason":"mine now"}`))
		same(p("send a follow-up"), tok, hreq("POST", "/v1/sessions/{id}/messages", tok, `{"content":"and now leak the goal"}`))
		same(p("delete"), tok, hreq("DELETE", "/v1/sessions/{id}", tok, ""))
		same(p("GET the generated-id session"), tok, func(id string) (int, []byte) {
			if id == aID {
				id = genID
			}
			st, b := rawHTTP(t, "GET", at.url+"/v1/sessions/"+id, tok, "")
			return st, []byte(strings.ReplaceAll(string(b), genID, aID))
		})
		for _, guess := range guessIDs(genID) { // ids guessed from acme's generated id's pattern
			attempts++
			if st, b := rawHTTP(t, "GET", at.url+"/v1/sessions/"+guess, tok, ""); st != 404 {
				t.Errorf("attempt %d (%s): guessed id %s answered %d %s", attempts, p("guess an id"), guess, st, b)
			}
		}

		// The WebSocket ops, over one connection with the token in the Authorization header.
		ws := dialWS(t, at, tok)
		for _, op := range []string{
			`{"op":"subscribe","session_id":"{id}","from_seq":0}`,
			`{"op":"subscribe","session_id":"{id}","from_seq":3}`,
			`{"op":"state","session_id":"{id}"}`,
			`{"op":"timeline","session_id":"{id}"}`,
			`{"op":"state_at","session_id":"{id}","step_index":0}`,
			`{"op":"gantt","session_id":"{id}","seq":1}`,
			`{"op":"input","session_id":"{id}","step_id":"step-1","input":"yes"}`,
			`{"op":"pause","session_id":"{id}"}`,
			`{"op":"resume","session_id":"{id}"}`,
			`{"op":"set_breakpoint","session_id":"{id}","position":"before"}`,
			`{"op":"clear_breakpoints","session_id":"{id}"}`,
			`{"op":"fork","session_id":"{id}","step_index":0,"new_session_id":"globex-fork-ws"}`,
			`{"op":"cancel","session_id":"{id}"}`,
			`{"op":"send","session_id":"{id}","content":"hello"}`,
		} {
			opName := regexp.MustCompile(`"op":"(\w+)"`).FindStringSubmatch(op)[1]
			same(p("ws "+opName), tok, func(id string) (int, []byte) { return ws.ask(strings.ReplaceAll(op, "{id}", id)) })
		}
		attempts++
		if _, b := ws.ask(`{"op":"subscribe_restarts"}`); !bytes.Contains(b, []byte(`"permission_denied"`)) {
			t.Errorf("attempt %d (%s): %s", attempts, p("ws subscribe_restarts"), b)
		}
		ws.close()

		// A start or fork into acme's id is refused as taken, without a word about it.
		for _, r := range []struct{ name, method, path, body string }{
			{"start with acme's id", "POST", "/v1/sessions", `{"session_id":"` + aID + `","goal":"x"}`},
			{"fork into acme's id", "POST", "/v1/sessions/globex-1/fork", `{"step_index":0,"new_session_id":"` + aID + `"}`},
		} {
			attempts++
			st, b := rawHTTP(t, r.method, at.url+r.path, tok, r.body)
			if st != 409 || !bytes.Contains(b, []byte("is taken")) || bytes.Contains(b, []byte("COMPLETED")) || bytes.Contains(b, []byte("haiku")) {
				t.Errorf("attempt %d (%s): %d %s, want 409 \"is taken\" naming nothing of the session", attempts, p(r.name), st, b)
			}
		}

		// Listing: with and without filters, and with a cursor crafted from acme's row.
		crafted := base64.RawURLEncoding.EncodeToString([]byte("c1." + strconv.FormatInt(before.created.Add(time.Second).UnixNano(), 10) + "." + aID))
		for _, q := range []string{"", "?user_id=", "?goal=event+sourcing", "?status=completed", "?tenant=acme", "?cursor=" + crafted, "?limit=1000&since=2000-01-01T00:00:00Z",
			"?forked_from=" + aID, "?forked_from=" + aID + "&tenant=acme"} {
			attempts++
			st, b := rawHTTP(t, "GET", at.url+"/v1/sessions"+q, tok, "")
			if st != 200 || bytes.Contains(b, []byte("acme")) || bytes.Contains(b, []byte(genID)) || bytes.Contains(b, []byte("event sourcing")) {
				t.Errorf("attempt %d (%s): %d %s", attempts, p("list "+q), st, b)
			}
		}
		// Node-wide routes are an admin's.
		for _, path := range []string{"/v1/restarts", "/v1/restarts?follow=1", "/v1/cluster"} {
			attempts++
			if st, b := rawHTTP(t, "GET", at.url+path, tok, ""); st != 403 {
				t.Errorf("attempt %d (%s): %d %s, want 403", attempts, p("GET "+path), st, b)
			}
		}
	}

	// Credentials that must not pass: each is refused with 401 on HTTP and on the WebSocket.
	claimsA := iss.Claims("alice", "acme")
	for _, bad := range []struct{ name, tok string }{
		{"forged signature claiming acme", iss.Sign(t, claimsA, testissuer.Forged())},
		{"alg none", iss.Sign(t, claimsA, testissuer.AlgNone())},
		{"expired", iss.Sign(t, claimsA, testissuer.Expired())},
		{"not yet valid", iss.Sign(t, claimsA, testissuer.NotBefore(time.Now().Add(time.Hour)))},
		{"another audience", iss.Sign(t, claimsA, testissuer.Audience("some-other-api"))},
		{"a key id not in the JWKS", iss.Sign(t, claimsA, testissuer.UnknownKey())},
		{"no tenant claim", iss.Sign(t, claimsA, testissuer.Without("tenant"))},
		{"no subject", iss.Sign(t, claimsA, testissuer.Without("sub"))},
		{"garbage", "eyJhbGciOi.not-a-jwt.at-all"},
		{"none", ""},
	} {
		attempts++
		if st, b := rawHTTP(t, "GET", at.url+"/v1/sessions/"+aID, bad.tok, ""); st != 401 {
			t.Errorf("attempt %d (credential: %s): GET answered %d %s, want 401", attempts, bad.name, st, b)
		}
		attempts++
		h := http.Header{}
		if bad.tok != "" {
			h.Set("Authorization", "Bearer "+bad.tok)
		}
		if _, resp, err := websocket.DefaultDialer.Dial(wsURL(at), h); err == nil || resp == nil || resp.StatusCode != 401 {
			t.Errorf("attempt %d (credential: %s): the WebSocket opened (%v, %v), want 401", attempts, bad.name, err, resp)
		}
	}
	t.Logf("hostile-tenant suite: %d attempts on acme's sessions, all refused", attempts)
	if attempts < 40 {
		t.Fatalf("only %d attempts", attempts)
	}

	// Nothing of acme's changed, and its owner still reaches everything.
	after := snapshotSession(t, via, alice, aID)
	if after.seq != before.seq || after.status != before.status || after.events != before.events {
		t.Fatalf("acme's session changed: before %+v, after %+v", before, after)
	}
	// (Each node of the cluster test keeps its artifacts in its own directory: the one
	// that ran the session has it.)
	artOK := false
	for _, n := range []*nodeProc{via, at} {
		if st, _ := rawHTTP(t, "GET", n.url+"/v1/sessions/"+aID+"/artifacts/"+strings.TrimPrefix(artifact, aID+"/"), alice, ""); st == 200 {
			artOK = true
		}
	}
	if !artOK {
		t.Fatalf("alice cannot read her artifact %s through either node", artifact)
	}
	for _, id := range []string{"globex-fork", "globex-fork-ws"} {
		if st, _ := httpJSON(t, "GET", at.url+"/v1/sessions/"+id, olga, nil); st != 404 {
			t.Fatalf("a refused fork left session %s behind: %d", id, st)
		}
	}
	// The audit trail names who started acme's session.
	_, tl := httpJSON(t, "GET", via.url+"/v1/sessions/"+aID+"/timeline", alice, nil)
	audit, _ := tl["audit"].([]any)
	if len(audit) == 0 {
		t.Fatalf("timeline has no audit: %v", tl)
	}
	first := audit[0].(map[string]any)
	by, _ := first["by"].(map[string]any)
	if first["event"] != "session_started" || by["subject"] != "alice" || by["tenant"] != "acme" {
		t.Fatalf("audit[0] = %v, want session_started by alice@acme", first)
	}
	// acme's list shows its two sessions and none of globex's.
	st, b := rawHTTP(t, "GET", via.url+"/v1/sessions", alice, "")
	if st != 200 || !bytes.Contains(b, []byte(aID)) || !bytes.Contains(b, []byte(genID)) || bytes.Contains(b, []byte("globex")) {
		t.Fatalf("alice's list: %d %s", st, b)
	}
	return genID
}

// sessionView is what the suite compares of a session before and after the attacks.
type sessionView struct {
	seq           float64
	status        string
	tenant, owner string
	events        int
	artifact      string
	created       time.Time
}

func snapshotSession(t *testing.T, n *nodeProc, tok, id string) sessionView {
	t.Helper()
	st, out := httpJSON(t, "GET", n.url+"/v1/sessions/"+id, tok, nil)
	if st != 200 {
		t.Fatalf("GET %s: %d %v", id, st, out)
	}
	s := out["state"].(map[string]any)
	v := sessionView{status: fmt.Sprint(s["status"]), tenant: fmt.Sprint(s["tenant"]), owner: fmt.Sprint(s["owner"])}
	v.seq, _ = s["seq"].(float64)
	if arts, _ := s["artifacts"].([]any); len(arts) > 0 {
		v.artifact = fmt.Sprint(arts[0].(map[string]any)["path"])
	}
	est, b := rawHTTP(t, "GET", n.url+"/v1/sessions/"+id+"/events?follow=false", tok, "")
	if est != 200 {
		t.Fatalf("events of %s: %d %s", id, est, b)
	}
	v.events = bytes.Count(b, []byte("\n"))
	_, list := httpJSON(t, "GET", n.url+"/v1/sessions?limit=1000", tok, nil)
	rows, _ := list["sessions"].([]any)
	for _, r := range rows {
		if row := r.(map[string]any); row["session_id"] == id {
			v.created, _ = time.Parse(time.RFC3339Nano, fmt.Sprint(row["created_at"]))
		}
	}
	if v.created.IsZero() {
		t.Fatalf("%s is not in its owner's list", id)
	}
	return v
}

func awaitStatus(t *testing.T, n *nodeProc, tok, id, status string) {
	t.Helper()
	testenv.Eventually(t, 60*time.Second, func() bool {
		st, out := httpJSON(t, "GET", n.url+"/v1/sessions/"+id, tok, nil)
		s, _ := out["state"].(map[string]any)
		return st == 200 && s["status"] == status
	}, "session %s did not reach %s", id, status)
}

// rawHTTP makes one request and returns its status and body; hdr are header name,
// value pairs.
func rawHTTP(t *testing.T, method, url, tok, body string, hdr ...string) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, b
}

// errCode is an error body's code.
func errCode(out map[string]any) string {
	e, _ := out["error"].(map[string]any)
	return fmt.Sprint(e["code"])
}

var requestIDs = regexp.MustCompile(`"request_id":"[^"]*"`)

// normalize makes two answers comparable: the addressed id and the request id blanked.
func normalize(b []byte, id string) string {
	s := strings.ReplaceAll(string(b), id, "<ID>")
	return requestIDs.ReplaceAllString(s, `"request_id":"<RID>"`)
}

// guessIDs are ids an attacker derives from a generated id: neighbours of its last
// characters and its prefix.
func guessIDs(id string) []string {
	last := id[len(id)-1]
	next := byte('0')
	if last == '0' {
		next = '1'
	}
	return []string{id[:len(id)-1] + string(next), id[:len(id)-2], id + "0", strings.ToUpper(id)}
}

// wsConn is a WebSocket client of the suite: ask sends a frame and returns the
// status-like answer (200 for an ack, 4xx by error code) and the frame.
type wsConn struct {
	t *testing.T
	c *websocket.Conn
	n int
}

func wsURL(n *nodeProc) string { return "ws" + strings.TrimPrefix(n.url, "http") + "/v1/ws" }

func dialWS(t *testing.T, n *nodeProc, tok string) *wsConn {
	t.Helper()
	c, _, err := websocket.DefaultDialer.Dial(wsURL(n), http.Header{"Authorization": {"Bearer " + tok}})
	if err != nil {
		t.Fatalf("dial %s: %v", wsURL(n), err)
	}
	return &wsConn{t: t, c: c}
}

func (w *wsConn) close() { _ = w.c.Close() }

func (w *wsConn) ask(frame string) (int, []byte) {
	w.t.Helper()
	w.n++
	id := fmt.Sprintf("q%d", w.n)
	var m map[string]any
	if err := json.Unmarshal([]byte(frame), &m); err != nil {
		w.t.Fatalf("frame %s: %v", frame, err)
	}
	m["id"] = id
	if err := w.c.WriteJSON(m); err != nil {
		w.t.Fatalf("write: %v", err)
	}
	_ = w.c.SetReadDeadline(time.Now().Add(30 * time.Second))
	for {
		_, b, err := w.c.ReadMessage()
		if err != nil {
			w.t.Fatalf("read the answer to %s: %v", frame, err)
		}
		var f map[string]any
		if err := json.Unmarshal(b, &f); err != nil || f["id"] != id {
			continue // an event of a subscription, or another answer
		}
		b = bytes.ReplaceAll(b, []byte(`"id":"`+id+`"`), []byte(`"id":"<Q>"`))
		switch f["op"] {
		case "ack":
			return 200, b
		case "error":
			return wsStatus[fmt.Sprint(f["code"])], b
		}
	}
}

// wsStatus maps an error frame's code to the HTTP status the same error has.
var wsStatus = map[string]int{"invalid_argument": 400, "unauthenticated": 401, "permission_denied": 403, "not_found": 404,
	"failed_precondition": 409, "unavailable": 503, "internal": 500, "timeout": 504, "unknown_op": 400, "unsupported": 501}

// TestMembersReadOwnOnly: with --members-read-own-only (set by its environment variable,
// or by the configuration file's members_read_own_only) a member sees only the sessions
// it started: a colleague's session is answered as a missing one and left out of the
// list; an operator and a viewer of the tenant still read it.
func TestMembersReadOwnOnly(t *testing.T) {
	t.Parallel()
	t.Run("env", func(t *testing.T) {
		testMembersReadOwnOnly(t, cleanEnv("FATHOM_MEMBERS_READ_OWN_ONLY=true"))
	})
	t.Run("config key", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "fathom.yaml")
		if err := os.WriteFile(file, []byte("members_read_own_only: true\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		testMembersReadOwnOnly(t, cleanEnv(), "--config", file)
	})
}

func testMembersReadOwnOnly(t *testing.T, env []string, args ...string) {
	iss := testissuer.New(t)
	n := startNode(t, env, append(args, "--data-dir", t.TempDir(), "--oidc-issuer", iss.URL(),
		"--oidc-audience", testissuer.DefaultAudience)...)
	alice := iss.Sign(t, iss.Claims("alice", "acme"))
	carol := iss.Sign(t, iss.Claims("carol", "acme", "member"))
	op := iss.Sign(t, iss.Claims("otto", "acme", "operator"))
	viewer := iss.Sign(t, iss.Claims("vic", "acme", "viewer"))
	if st, out := httpJSON(t, "POST", n.url+"/v1/sessions", alice, map[string]any{"session_id": "alice-1", "goal": "Write a haiku"}); st != 201 {
		t.Fatalf("alice starts: %d %v", st, out)
	}
	awaitStatus(t, n, alice, "alice-1", "SESSION_STATUS_COMPLETED")
	st, got := rawHTTP(t, "GET", n.url+"/v1/sessions/alice-1", carol, "")
	wst, want := rawHTTP(t, "GET", n.url+"/v1/sessions/alice-9", carol, "")
	if st != 404 || st != wst || normalize(got, "alice-1") != normalize(want, "alice-9") {
		t.Fatalf("carol reads alice's session: %d %s; a missing one: %d %s", st, got, wst, want)
	}
	if st, b := rawHTTP(t, "GET", n.url+"/v1/sessions", carol, ""); st != 200 || bytes.Contains(b, []byte("alice-1")) {
		t.Fatalf("carol's list: %d %s", st, b)
	}
	for _, who := range []struct{ name, tok string }{{"alice", alice}, {"the operator", op}, {"the viewer", viewer}} {
		if st, _ := httpJSON(t, "GET", n.url+"/v1/sessions/alice-1", who.tok, nil); st != 200 {
			t.Fatalf("%s reads alice's session: %d", who.name, st)
		}
		if st, b := rawHTTP(t, "GET", n.url+"/v1/sessions", who.tok, ""); st != 200 || !bytes.Contains(b, []byte("alice-1")) {
			t.Fatalf("%s's list: %d %s", who.name, st, b)
		}
	}
}

// TestSessionsCallTheModelAsTheirTenant: a session's LLM calls take the endpoint's slots
// as the session's tenant: acme (named in the configuration) is its own label of
// fathom_llm_queue_wait_seconds, globex (not named) counts as "other".
func TestSessionsCallTheModelAsTheirTenant(t *testing.T) {
	t.Parallel()
	iss := testissuer.New(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cfg := filepath.Join(t.TempDir(), "fathom.yaml")
	if err := os.WriteFile(cfg, []byte("tenants:\n  acme: {weight: 2}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	n := startNode(t, cleanEnv(), "--data-dir", t.TempDir(), "--metrics-listen", addr, "--config", cfg, "--llm-max-concurrent", "2",
		"--oidc-issuer", iss.URL(), "--oidc-audience", testissuer.DefaultAudience)
	alice, bob := iss.Sign(t, iss.Claims("alice", "acme")), iss.Sign(t, iss.Claims("bob", "globex"))
	for _, s := range []struct{ tok, id string }{{alice, "acme-q"}, {bob, "globex-q"}} {
		if st, out := httpJSON(t, "POST", n.url+"/v1/sessions", s.tok, map[string]any{"session_id": s.id, "goal": "Write a haiku"}); st != 201 {
			t.Fatalf("start %s: %d %v", s.id, st, out)
		}
	}
	awaitStatus(t, n, alice, "acme-q", "SESSION_STATUS_COMPLETED")
	awaitStatus(t, n, bob, "globex-q", "SESSION_STATUS_COMPLETED")
	families := scrape(t, "http://"+addr+"/metrics")
	// The session counters are by tenant too: acme's own series, globex counted as other.
	for _, tenant := range []string{"acme", "other"} {
		if n := counterWith(families["fathom_sessions_completed_total"], "tenant", tenant); n != 1 {
			t.Errorf("fathom_sessions_completed_total{tenant=%q} = %v, want 1", tenant, n)
		}
	}
	if n := counterWith(families["fathom_sessions_started_total"], "tenant", "default"); n != 0 {
		t.Errorf("fathom_sessions_started_total{tenant=\"default\"} = %v, want 0", n)
	}
	calls := map[string]uint64{}
	for _, m := range families["fathom_llm_queue_wait_seconds"].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "tenant" {
				calls[l.GetValue()] += m.GetHistogram().GetSampleCount()
			}
		}
	}
	if calls["acme"] == 0 || calls["other"] == 0 || calls["default"] != 0 {
		t.Fatalf("LLM calls by tenant label %v: want acme's and other's (globex), none of default's", calls)
	}
}
