package main

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fathom-agents/fathom/internal/testenv"
)

// faultCluster is what the fault tests share: `fathom node` processes against the real
// Consul agent and PostgreSQL, one model, one token, short leases.
type faultCluster struct {
	t      *testing.T
	dsn    string
	conn   *pgx.Conn
	env    []string
	common []string
	nodes  []*nodeProc
}

// faultToken is the fault tests' bearer token.
const faultToken = "t"

// faultLeaseTTL keeps each fault test bounded: a killed node's sessions move after it.
const faultLeaseTTL = 3 * time.Second

// newFaultCluster prepares (but starts no node of) a cluster named after the test on
// consul, with model as the OpenAI base URL and extra node flags.
func newFaultCluster(t *testing.T, consul, model string, extra ...string) *faultCluster {
	t.Helper()
	dsn := testenv.PostgresDSN(t)
	name := "fathom-" + strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name())) + "-" + freePort(t)
	return &faultCluster{t: t, dsn: dsn, conn: connectPG(t, dsn),
		env: cleanEnv("OPENAI_BASE_URL="+model, "OPENAI_API_KEY=x"),
		common: append([]string{"--consul", consul, "--postgres", dsn, "--token", faultToken,
			"--lease-ttl", faultLeaseTTL.String(), "--cluster-name", name}, extra...)}
}

// start starts a node with the cluster's flags, then args (a later flag wins).
func (c *faultCluster) start(args ...string) *nodeProc {
	c.t.Helper()
	n := startNode(c.t, c.env, append(slices.Clone(c.common), args...)...)
	c.nodes = append(c.nodes, n)
	return n
}

// awaitViews waits until each of nodes sees exactly nodes as the cluster's members.
func (c *faultCluster) awaitViews(nodes ...*nodeProc) {
	c.t.Helper()
	for _, n := range nodes {
		c.awaitView(n, nodes...)
	}
}

// awaitView waits until node n sees exactly members as the cluster's members.
func (c *faultCluster) awaitView(n *nodeProc, members ...*nodeProc) {
	c.t.Helper()
	var want []string
	for _, m := range members {
		want = append(want, m.member)
	}
	sort.Strings(want)
	testenv.Eventually(c.t, 30*time.Second, func() bool { return slices.Equal(c.view(n), want) },
		"node %s sees members %v, want %v", n.member, c.view(n), want)
}

// view is the members node n sees (GET /v1/cluster), sorted.
func (c *faultCluster) view(n *nodeProc) []string {
	c.t.Helper()
	code, body := httpJSON(c.t, "GET", n.url+"/v1/cluster", faultToken, nil)
	if code != 200 {
		return nil
	}
	var out []string
	ms, _ := body["members"].([]any)
	for _, m := range ms {
		out = append(out, fmt.Sprint(m))
	}
	sort.Strings(out)
	return out
}

// idOn returns a fresh session id that identity hashing places on owner among members.
func (c *faultCluster) idOn(prefix, owner string, members ...string) string {
	c.t.Helper()
	for i := 0; i < 1000; i++ {
		if id := fmt.Sprintf("%s-%d", prefix, i); rendezvousOwner(c.t, id, members...) == owner {
			return id
		}
	}
	c.t.Fatalf("no id with prefix %s hashes to %s among %v", prefix, owner, members)
	return ""
}

// startOn starts session id through via and waits until host holds its lease.
func (c *faultCluster) startOn(via *nodeProc, id string, host *nodeProc) {
	c.t.Helper()
	startSession(c.t, via, faultToken, id)
	testenv.Eventually(c.t, 30*time.Second, func() bool { return leaseOwner(c.t, c.conn, id) == host.member },
		"session %s is not leased by %s (lease: %q)", id, host.member, leaseOwner(c.t, c.conn, id))
}

// kill sends SIGKILL to n (a process this test started) and reaps it: no leave, no
// lease released.
func (c *faultCluster) kill(n *nodeProc) {
	c.t.Helper()
	if err := n.cmd.Process.Kill(); err != nil {
		c.t.Fatalf("kill node %s: %v", n.member, err)
	}
	_ = n.cmd.Wait()
}

// awaitContinues waits, with no client request, for an event of session id after seq
// (the head when its node died) appended by another member, within the lease TTL + 5 s.
func (c *faultCluster) awaitContinues(id string, seq uint64, since time.Time, dead *nodeProc) {
	c.t.Helper()
	bound := faultLeaseTTL + 5*time.Second
	testenv.Eventually(c.t, bound-time.Since(since), func() bool {
		head, _ := journalHead(c.t, c.conn, id)
		return head > seq
	}, "session %s appended nothing after seq %d within %s of the kill", id, seq, bound)
	testenv.Eventually(c.t, 30*time.Second, func() bool {
		owner := leaseOwner(c.t, c.conn, id)
		_, typ := journalHead(c.t, c.conn, id)
		return (owner != "" && owner != dead.member) || typ == "session_completed"
	}, "session %s is not held by a live member (lease: %q)", id, leaseOwner(c.t, c.conn, id))
	c.t.Logf("session %s continued %s after the kill", id, time.Since(since).Round(time.Millisecond))
}

// finish waits for every session to complete with a clean journal audit and stops the
// nodes still running.
func (c *faultCluster) finish(ids ...string) {
	c.t.Helper()
	waitAllCompleted(c.t, c.conn, c.dsn, ids)
	for _, n := range c.nodes {
		if n.cmd.ProcessState == nil {
			n.stop(c.t)
		}
	}
}

// llmGate is a request log and a hold in front of `fathom mock-llm`: it forwards every
// model request, remembers which are in flight, and holds the first one a hold matches
// (the mock has not seen it yet) until released, so a test can kill a node while one of
// its model calls is in flight.
type llmGate struct {
	srv   *httptest.Server
	proxy *httputil.ReverseProxy

	mu       sync.Mutex
	match    func(body string) bool
	held     chan struct{} // closed once a request is held
	release  chan struct{} // closed to let the held request through
	log      []string      // request bodies, oldest first
	inFlight int
}

// startLLMGate serves a gate in front of the model at base (…/v1) and returns it; its
// URL() is the model URL to give the nodes.
func startLLMGate(t *testing.T, base string) *llmGate {
	t.Helper()
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = ""
	g := &llmGate{proxy: httputil.NewSingleHostReverseProxy(u), held: make(chan struct{}), release: make(chan struct{})}
	g.srv = httptest.NewServer(http.HandlerFunc(g.serve))
	t.Cleanup(func() {
		g.unhold()
		g.srv.Close()
	})
	return g
}

// URL is the gate's model base URL (…/v1).
func (g *llmGate) URL() string { return g.srv.URL + "/v1" }

// hold arms the gate: the first request whose body match accepts is held.
func (g *llmGate) hold(match func(body string) bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.match = match
}

// unhold lets the held request (if any) through; later requests pass.
func (g *llmGate) unhold() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.match = nil
	select {
	case <-g.release:
	default:
		close(g.release)
	}
}

// requests counts the logged requests whose body match accepts.
func (g *llmGate) requests(match func(body string) bool) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := 0
	for _, b := range g.log {
		if match(b) {
			n++
		}
	}
	return n
}

func (g *llmGate) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 8<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	g.mu.Lock()
	g.log = append(g.log, string(body))
	g.inFlight++
	hold := g.match != nil && g.match(string(body))
	if hold {
		g.match = nil
		close(g.held)
	}
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		g.inFlight--
		g.mu.Unlock()
	}()
	if hold {
		select {
		case <-g.release:
		case <-r.Context().Done(): // the caller died: the call never reaches the mock
			return
		}
	}
	g.proxy.ServeHTTP(w, r)
}

// tcpFault is a TCP proxy the test puts between one node and a real service
// (PostgreSQL, the Consul agent). It forwards bytes both ways until told otherwise:
// catch holds the first client chunk a predicate matches (the bytes reached neither
// side: the node waits for an answer, the server never saw them) until the test
// delivers or drops it; freeze stops forwarding altogether (connections hang, new ones
// are accepted and never answered), as a partition would.
type tcpFault struct {
	t      *testing.T
	ln     net.Listener
	target string

	mu      sync.Mutex
	frozen  bool
	conns   map[net.Conn]struct{}
	match   func(chunk []byte) bool
	caught  chan struct{} // closed once a chunk is held
	verdict chan bool     // true: deliver the held chunk; false: drop it
	wg      sync.WaitGroup
	closed  chan struct{}
}

// startTCPFault listens on a free loopback port and forwards to target.
func startTCPFault(t *testing.T, target string) *tcpFault {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &tcpFault{t: t, ln: ln, target: target, conns: map[net.Conn]struct{}{},
		caught: make(chan struct{}), verdict: make(chan bool, 1), closed: make(chan struct{})}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

// Addr is the proxy's host:port.
func (p *tcpFault) Addr() string { return p.ln.Addr().String() }

// catch arms the proxy: the first client chunk match accepts is held.
func (p *tcpFault) catch(match func(chunk []byte) bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.match = match
}

// decide delivers (true) or drops (false) the held chunk; its connection then closes.
func (p *tcpFault) decide(deliver bool) { p.verdict <- deliver }

// freeze stops forwarding: open connections hang, new ones are accepted and ignored.
func (p *tcpFault) freeze() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.frozen = true
}

func (p *tcpFault) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.closed:
		return false
	default:
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *tcpFault) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		if !p.track(c) {
			_ = c.Close()
			return
		}
		p.wg.Add(1)
		go p.serve(c)
	}
}

// serve forwards one connection (owned by accept; ends when either side closes or the
// proxy closes).
func (p *tcpFault) serve(c net.Conn) {
	defer p.wg.Done()
	defer p.forget(c)
	up, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil || !p.track(up) {
		return
	}
	defer p.forget(up)
	answered := make(chan struct{}, 1) // the server sent something
	p.wg.Add(1)
	go func() { // server to client
		defer p.wg.Done()
		p.copy(c, up, func([]byte) bool {
			select {
			case answered <- struct{}{}:
			default:
			}
			return false
		})
		_ = c.Close()
	}()
	p.copy(up, c, func(chunk []byte) bool {
		if !p.caughtNow(chunk) {
			return false
		}
		for len(answered) > 0 {
			<-answered
		}
		p.settle(up, chunk, answered)
		return true
	})
	_ = up.Close()
}

func (p *tcpFault) forget(c net.Conn) {
	_ = c.Close()
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

// caughtNow reports whether chunk is the one to hold (and disarms the catch).
func (p *tcpFault) caughtNow(chunk []byte) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.match == nil || !p.match(chunk) {
		return false
	}
	p.match = nil
	close(p.caught)
	return true
}

// copy forwards src to dst until either fails or seen (called with each chunk before it
// is forwarded) takes the chunk over; while frozen, chunks are swallowed.
func (p *tcpFault) copy(dst, src net.Conn, seen func(chunk []byte) bool) {
	buf := make([]byte, 64<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			frozen := p.frozen
			p.mu.Unlock()
			if frozen {
				continue // the partition ate it
			}
			if seen(buf[:n]) {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// settle waits for the test's verdict on a held chunk: delivered, it is written to the
// server and the server's answer awaited (so the server processed it); either way the
// connection then closes.
func (p *tcpFault) settle(up net.Conn, chunk []byte, answered <-chan struct{}) {
	var deliver bool
	select {
	case deliver = <-p.verdict:
	case <-p.closed:
		return
	}
	if !deliver {
		return
	}
	if _, err := up.Write(chunk); err != nil {
		p.t.Errorf("deliver the held chunk: %v", err)
		return
	}
	select {
	case <-answered:
	case <-time.After(10 * time.Second):
		p.t.Errorf("the server did not answer the delivered chunk within 10s")
	}
}

func (p *tcpFault) close() {
	p.mu.Lock()
	select {
	case <-p.closed:
		p.mu.Unlock()
		return
	default:
	}
	close(p.closed)
	_ = p.ln.Close()
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// fiveStepPair starts two members of one fault cluster whose model plans five custom
// steps and answers each with answer after 700 ms (long enough to kill a member mid-run),
// and returns them once each sees the other: the start of the resumption tests.
func fiveStepPair(t *testing.T, answer string) (c *faultCluster, a, b *nodeProc) {
	t.Helper()
	consul := testenv.ConsulAddr(t)
	model := startMockLLM(t, `{"rules":[
		{"system_match":"FATHOM-ROLE: orchestrator","response":"{\"steps\":[`+
		`{\"id\":\"a\",\"type\":\"custom\",\"description\":\"one\"},{\"id\":\"b\",\"type\":\"custom\",\"description\":\"two\"},`+
		`{\"id\":\"c\",\"type\":\"custom\",\"description\":\"three\"},{\"id\":\"d\",\"type\":\"custom\",\"description\":\"four\"},`+
		`{\"id\":\"e\",\"type\":\"custom\",\"description\":\"five\"}]}"},
		{"system_match":"FATHOM-ROLE: executor","response":"`+answer+`","delay_ms":700}]}`)
	c = newFaultCluster(t, consul, model)
	a, b = c.start(), c.start()
	c.awaitViews(a, b)
	return c, a, b
}
