// Package dialtest counts the connections a client of a remote API opens to a server
// under concurrent calls: the test of whether the client keeps and reuses idle
// connections (internal/httpclient).
package dialtest

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// Server is an HTTP server that answers every request with one body, holding each
// round's requests until all of them have arrived, and counts the connections opened to
// it.
type Server struct {
	// URL is the server's base URL.
	URL string

	srv     *httptest.Server
	mu      sync.Mutex
	dialed  int
	barrier chan struct{}
	open    bool // barrier is not closed yet
	arrived sync.WaitGroup
}

// New starts a server answering every request with body (as application/json); the
// test's cleanup closes it.
func New(t testing.TB, body []byte) *Server {
	t.Helper()
	s := &Server{}
	s.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		s.mu.Lock()
		barrier := s.barrier
		s.mu.Unlock()
		s.arrived.Done()
		<-barrier // every call of the round is in flight at once, each on its own connection
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	}))
	s.srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.mu.Lock()
			s.dialed++
			s.mu.Unlock()
		}
	}
	s.srv.Start()
	t.Cleanup(s.srv.Close)
	t.Cleanup(s.release) // first (cleanups run last-in first-out): Close waits for the handlers
	s.URL = s.srv.URL
	return s
}

// Rounds runs rounds rounds of calls concurrent calls of call, each round waiting until
// all its calls are at the server, and returns how many connections were opened in all.
// A client that keeps its idle connections opens calls connections; one that closes
// them opens up to rounds × calls. It fails the test on the first error of a call.
func (s *Server) Rounds(t testing.TB, rounds, calls int, call func() error) int {
	t.Helper()
	for round := range rounds {
		s.mu.Lock()
		s.barrier, s.open = make(chan struct{}), true
		s.mu.Unlock()
		s.arrived.Add(calls)
		var done sync.WaitGroup
		errs := make(chan error, calls)
		for range calls {
			done.Add(1)
			go func() {
				defer done.Done()
				if err := call(); err != nil {
					errs <- err
				}
			}()
		}
		all := make(chan struct{})
		go func() { s.arrived.Wait(); close(all) }()
		select {
		case <-all:
		case err := <-errs:
			t.Fatalf("round %d: a call failed before reaching the server: %v", round, err)
		case <-time.After(30 * time.Second):
			t.Fatalf("round %d: the calls did not all reach the server in 30 s", round)
		}
		s.release()
		done.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("round %d: %v", round, err)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dialed
}

// release lets the handlers of the current round answer.
func (s *Server) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.open {
		close(s.barrier)
		s.open = false
	}
}

// Case is one way a client of a remote API is given its HTTP client.
type Case struct {
	Name string
	// HTTPClient is what the client's configuration gets (nil: its default).
	HTTPClient *http.Client
}

// Cases are the ways every client must keep its idle connections: with its default
// HTTP client, and with a caller's client that names no transport (which must get the
// shared one, not net/http's default with its two idle connections per host).
func Cases() []Case {
	return []Case{
		{Name: "default client"},
		{Name: "caller's client without transport", HTTPClient: &http.Client{Timeout: time.Minute}},
	}
}

// ExpectReuse runs 3 rounds of calls concurrent calls of call and fails the test unless
// they opened exactly calls connections: one per call in flight, reused by the later
// rounds.
func (s *Server) ExpectReuse(t testing.TB, calls int, call func() error) {
	t.Helper()
	if dialed := s.Rounds(t, 3, calls, call); dialed != calls {
		t.Fatalf("3 rounds of %d concurrent calls opened %d connections, want %d (one per call in flight, reused by later rounds)", calls, dialed, calls)
	}
}

// ExpectReuseInEachCase is the whole reuse test of a client: for each of Cases, in a
// subtest of its own, it starts a server answering body, lets newClient make the client
// under test (from the server's base URL and the case's HTTP client) and return one call
// of it, and expects calls concurrent calls to reuse their connections (ExpectReuse).
func ExpectReuseInEachCase(t *testing.T, body []byte, calls int, newClient func(t *testing.T, url string, hc *http.Client) (call func() error)) {
	t.Helper()
	for _, c := range Cases() {
		t.Run(c.Name, func(t *testing.T) {
			srv := New(t, body)
			srv.ExpectReuse(t, calls, newClient(t, srv.URL, c.HTTPClient))
		})
	}
}
