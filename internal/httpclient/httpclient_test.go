package httpclient

import (
	"net/http"
	"testing"
	"time"
)

// Client fills in the shared transport where a client would use net/http's default, and
// never modifies the caller's client.
func TestClient(t *testing.T) {
	if c := Client(nil, time.Minute); c.Transport != Transport() || c.Timeout != time.Minute {
		t.Fatalf("Client(nil) = transport %p timeout %v, want the shared transport and 1m", c.Transport, c.Timeout)
	}
	own := &http.Transport{}
	withOwn := &http.Client{Transport: own}
	if c := Client(withOwn, time.Minute); c != withOwn {
		t.Fatal("a caller's client with a transport of its own was not used as it is")
	}
	noTransport := &http.Client{Timeout: time.Second}
	c := Client(noTransport, time.Minute)
	if c == noTransport || noTransport.Transport != nil {
		t.Fatal("the caller's client was modified instead of copied")
	}
	if c.Transport != Transport() || c.Timeout != time.Second {
		t.Fatalf("copy of a client without transport = transport %p timeout %v, want the shared transport and the caller's 1s", c.Transport, c.Timeout)
	}
}
