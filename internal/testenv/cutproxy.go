package testenv

import (
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"
)

// CutProxy forwards TCP connections to a PostgreSQL server and can cut them all at once
// and refuse new ones: from the node's side, the database is gone (as when it is stopped
// or a partition separates them) while the test's shared server keeps serving the others.
type CutProxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	cut   bool
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// CutPostgres is the test's PostgreSQL (PostgresDSN) behind a CutProxy: the proxy and a
// DSN that reaches the database through it, with a 2 s connect timeout so that a node
// cut off fails its dials quickly.
func CutPostgres(t testing.TB) (*CutProxy, string) {
	t.Helper()
	u, err := url.Parse(PostgresDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	proxy := StartCutProxy(t, u.Host)
	u.Host = proxy.Addr()
	q := u.Query()
	q.Set("connect_timeout", "2")
	u.RawQuery = q.Encode()
	return proxy, u.String()
}

// StartCutProxy listens on a free loopback port and forwards to target until the test
// ends (t.Cleanup closes it and waits for its goroutines).
func StartCutProxy(t testing.TB, target string) *CutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &CutProxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(p.close)
	return p
}

func (p *CutProxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.cut {
			p.mu.Unlock()
			_ = c.Close()
			continue
		}
		up, err := net.DialTimeout("tcp", p.target, 5*time.Second)
		if err != nil {
			p.mu.Unlock()
			_ = c.Close()
			continue
		}
		p.conns[c], p.conns[up] = struct{}{}, struct{}{}
		p.wg.Add(2)
		p.mu.Unlock()
		pipe := func(dst, src net.Conn) {
			defer p.wg.Done()
			_, _ = io.Copy(dst, src)
			_ = dst.Close()
			_ = src.Close()
			p.mu.Lock()
			delete(p.conns, dst)
			delete(p.conns, src)
			p.mu.Unlock()
		}
		go pipe(up, c)
		go pipe(c, up)
	}
}

// SetCut cuts every connection and refuses new ones (true), or accepts again (false).
func (p *CutProxy) SetCut(cut bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = cut
	if cut {
		for c := range p.conns {
			_ = c.Close()
		}
	}
}

// Addr is the address clients dial instead of the target.
func (p *CutProxy) Addr() string { return p.ln.Addr().String() }

func (p *CutProxy) close() {
	_ = p.ln.Close()
	p.SetCut(true)
	p.wg.Wait()
}
