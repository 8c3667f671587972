package gateway_test

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/fathom-agents/fathom/gateway"
)

// TestGatewayWSFirstFrameAuth: a client that offers only the subprotocol fathom.v1 (no
// Authorization header, no bearer.<token> entry) gets its WebSocket and authenticates
// with its first frame; the connection then acts as that principal. A bad credential, or
// any other first frame, is answered with an unauthenticated error frame and a close
// 1008; without the subprotocol the upgrade is still refused with 401.
func TestGatewayWSFirstFrameAuth(t *testing.T) {
	t.Parallel()
	g := startFake(t, gwOpts{})
	dial := func() *wsc {
		t.Helper()
		d := websocket.Dialer{Subprotocols: []string{gateway.Subprotocol}}
		c, resp, err := d.Dial(g.wsURL, nil)
		if err != nil {
			t.Fatalf("dial with the subprotocol alone: %v (%v)", err, resp)
		}
		t.Cleanup(func() { c.Close() })
		if got := resp.Header.Get("Sec-WebSocket-Protocol"); got != gateway.Subprotocol {
			t.Fatalf("selected subprotocol %q", got)
		}
		return &wsc{t: t, c: c}
	}

	// The read token's principal: reads pass, writes are refused as for a read token.
	c := dial()
	c.send(`{"op":"auth","id":"a","token":"` + readToken + `"}`)
	if f := c.next("ack", 5*time.Second); f["id"] != "a" || f["request"] != "auth" || f["result"].(map[string]any)["scope"] != "read" {
		t.Fatalf("auth ack: %v", f)
	}
	c.send(`{"op":"start","goal":"x","id":"w"}`)
	if f := c.next("error", 5*time.Second); f["code"] != "permission_denied" {
		t.Fatalf("start after authenticating with the read token: %v", f)
	}
	w := g.mustDial(token)
	w.send(`{"op":"start","goal":"write a haiku","session_id":"frame-1","id":"s"}`)
	w.next("ack", 10*time.Second)
	c.send(`{"op":"state","session_id":"frame-1","id":"r"}`)
	if f := c.next("ack", 10*time.Second); f["id"] != "r" {
		t.Fatalf("state after authenticating: %v", f)
	}

	// Refusals: each gets an unauthenticated error frame, then the close.
	for _, tc := range []struct{ name, frame string }{
		{"unknown token", `{"op":"auth","token":"not-a-token"}`},
		{"empty token", `{"op":"auth","token":""}`},
		{"another op first", `{"op":"state","session_id":"frame-1"}`},
		{"not JSON", `auth please`},
	} {
		c := dial()
		c.send(tc.frame)
		if f := c.next("error", 5*time.Second); f["code"] != "unauthenticated" {
			t.Fatalf("%s: %v", tc.name, f)
		}
		_, err := c.tryRead(5 * time.Second)
		var ce *websocket.CloseError
		if !errors.As(err, &ce) || ce.Code != websocket.ClosePolicyViolation {
			t.Fatalf("%s: after the error frame: %v, want a close 1008", tc.name, err)
		}
	}

	// Neither a credential nor the subprotocol: 401 before the upgrade, as always.
	if _, resp, err := websocket.DefaultDialer.Dial(g.wsURL, http.Header{}); err == nil || resp == nil || resp.StatusCode != 401 {
		t.Fatalf("dial without credential or subprotocol: %v %v, want 401", err, resp)
	}
}
