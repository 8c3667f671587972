package gateway_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"google.golang.org/protobuf/proto"

	"github.com/fathom-agents/fathom/gateway"
	"github.com/fathom-agents/fathom/live/feed"
	"github.com/fathom-agents/fathom/messages"
	"github.com/fathom-agents/fathom/persistence"
)

// The fan-out benchmarks: N WebSocket clients (default 5,000; env
// FATHOM_BENCH_SUBSCRIBERS) follow one stream; each iteration publishes one event and
// the clock stops when every client has read every event. Both sides run the same
// harness and clients:
//
//   - BenchmarkGatewayFanout: the gateway (subscribe frames, live/feed, frame
//     cache, per-connection send queue and writer), events published to the feed.
//   - BenchmarkGatewayFanoutBaseline: a bare gorilla/websocket hub (a send channel of 256
//     and a writer goroutine per client, broadcast of prebuilt bytes under one lock).
//
// Metrics: deliveries/s, and memory per connection (heap + stacks after GC, server and
// client side of the connection together, identical clients on both sides).
//
//	go test -run '^$' -bench 'GatewayFanout' -benchtime 200x ./gateway/
const envBenchSubscribers = "FATHOM_BENCH_SUBSCRIBERS"

func benchSubscribers(b *testing.B) int {
	n := 5000
	if v := os.Getenv(envBenchSubscribers); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n <= 0 {
			b.Fatalf("%s=%q: want a positive number", envBenchSubscribers, v)
		}
	}
	return n
}

// fanoutServer is one side of the comparison.
type fanoutServer interface {
	url() string
	// subscribe makes a freshly dialed client a subscriber, returning once it is one.
	subscribe(c *websocket.Conn) error
	// publish sends event seq to every subscriber.
	publish(seq uint64)
	close()
}

type fanoutFixture struct {
	name        string
	srv         fanoutServer
	clients     []*websocket.Conn
	readers     sync.WaitGroup
	delivered   atomic.Int64
	target      atomic.Int64
	reached     atomic.Pointer[chan struct{}]
	published   uint64
	bytesPer    float64
	stackPer    float64
	goroutinesP float64
}

// fixtures keeps one fixture alive across the b.N rounds of a benchmark (dialing 5,000
// clients per round would dominate the run); starting another benchmark closes it.
var fixtures = map[string]*fanoutFixture{}

func fixture(b *testing.B, name string, mk func() fanoutServer) *fanoutFixture {
	if f := fixtures[name]; f != nil {
		return f
	}
	for k, f := range fixtures {
		f.close()
		delete(fixtures, k)
	}
	n := benchSubscribers(b)
	runtime.GC()
	var m0 runtime.MemStats
	runtime.ReadMemStats(&m0)
	g0 := runtime.NumGoroutine()
	f := &fanoutFixture{name: name, srv: mk(), clients: make([]*websocket.Conn, n)}
	dialer := websocket.Dialer{HandshakeTimeout: 30 * time.Second}
	hdr := http.Header{"Authorization": {"Bearer " + token}}
	var wg sync.WaitGroup
	errs := make(chan error, n)
	sem := make(chan struct{}, 32)
	for i := range f.clients {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			c, _, err := dialer.Dial(f.srv.url(), hdr)
			if err == nil {
				err = f.srv.subscribe(c)
			}
			if err != nil {
				errs <- fmt.Errorf("client %d: %w", i, err)
				return
			}
			f.clients[i] = c
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		f.close()
		b.Fatal(err)
	}
	for _, c := range f.clients {
		f.readers.Add(1)
		go f.read(c)
	}
	runtime.GC()
	var m1 runtime.MemStats
	runtime.ReadMemStats(&m1)
	used := float64(m1.HeapInuse+m1.StackInuse) - float64(m0.HeapInuse+m0.StackInuse)
	f.bytesPer = used / float64(n)
	f.stackPer = (float64(m1.StackInuse) - float64(m0.StackInuse)) / float64(n)
	f.goroutinesP = float64(runtime.NumGoroutine()-g0) / float64(n)
	fixtures[name] = f
	return f
}

func (f *fanoutFixture) read(c *websocket.Conn) {
	defer f.readers.Done()
	for {
		if _, _, err := c.NextReader(); err != nil {
			return
		}
		if f.delivered.Add(1) == f.target.Load() {
			close(*f.reached.Load())
		}
	}
}

func (f *fanoutFixture) close() {
	for _, c := range f.clients {
		if c != nil {
			_ = c.Close()
		}
	}
	f.readers.Wait()
	f.srv.close()
}

func runFanout(b *testing.B, name string, mk func() fanoutServer) {
	f := fixture(b, name, mk)
	n := int64(len(f.clients))
	reached := make(chan struct{})
	f.reached.Store(&reached)
	f.target.Store(f.delivered.Load() + n*int64(b.N))
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		f.published++
		f.srv.publish(f.published)
	}
	select {
	case <-reached:
	case <-time.After(5 * time.Minute):
		b.Fatalf("only %d of %d deliveries", f.delivered.Load(), f.target.Load())
	}
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(n*int64(b.N))/elapsed.Seconds(), "deliveries/s")
	b.ReportMetric(f.bytesPer, "B/conn")
	b.ReportMetric(f.stackPer, "stack-B/conn")
	b.ReportMetric(f.goroutinesP, "goroutines/conn")
	b.ReportMetric(float64(n), "subscribers")
}

func BenchmarkGatewayFanout(b *testing.B) {
	runFanout(b, "gateway", func() fanoutServer { return newGatewayFanout(b) })
}

func BenchmarkGatewayFanoutBaseline(b *testing.B) {
	runFanout(b, "baseline", func() fanoutServer { return newHubFanout() })
}

// benchEvent is event seq of the benchmark stream: an llm_responded of about 300 bytes
// of JSON, as a session produces.
func benchEvent(seq uint64) *messages.Event {
	return &messages.Event{Seq: seq, SessionId: "bench", AtUnixNano: time.Now().UnixNano(),
		Payload: &messages.Event_LlmResponded{LlmResponded: &messages.LlmResponded{
			CallId: fmt.Sprintf("step-1/llm-%d", seq), StepId: "step-1", Model: "fathom-mock", FinishReason: "stop",
			Content: strings.Repeat("event sourcing ", 10),
			Usage:   &messages.Usage{InputTokens: 812, OutputTokens: 40, TotalTokens: 852}}}}
}

// memJournal serves the feed's catch-up reads from memory.
type memJournal struct {
	persistence.Journal // only Load and LastSeq are used
	mu                  sync.RWMutex
	recs                []persistence.Record
}

func (j *memJournal) Load(_ context.Context, _ string, after uint64, fn func(persistence.Record) error) error {
	j.mu.RLock()
	recs := j.recs
	j.mu.RUnlock()
	if after >= uint64(len(recs)) {
		return nil
	}
	for _, r := range recs[after:] {
		if err := fn(r); err != nil {
			return err
		}
	}
	return nil
}

// LastSeq counts the bench session as started (the gateway subscribes only to sessions
// with events), whether or not an event was published yet.
func (j *memJournal) LastSeq(context.Context, string) (uint64, error) {
	j.mu.RLock()
	defer j.mu.RUnlock()
	return max(uint64(len(j.recs)), 1), nil
}

type gatewayFanout struct {
	j    *memJournal
	feed *feed.Feed
	h    *gateway.Handler
	srv  *httptest.Server
}

type noSessions struct{}

func (noSessions) Session(string) gateway.SessionGrain { return nil }

func newGatewayFanout(b testing.TB) *gatewayFanout {
	g := &gatewayFanout{j: &memJournal{}}
	g.feed = feed.New(g.j, feed.Options{})
	h, err := gateway.New(gateway.Config{Token: token, Sessions: noSessions{}, Feed: g.feed,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	g.h = h
	g.srv = httptest.NewServer(h)
	return g
}

func (g *gatewayFanout) url() string { return "ws" + strings.TrimPrefix(g.srv.URL, "http") + "/v1/ws" }

func (g *gatewayFanout) subscribe(c *websocket.Conn) error {
	if err := c.WriteMessage(websocket.TextMessage, []byte(`{"op":"subscribe","session_id":"bench","from_seq":0}`)); err != nil {
		return err
	}
	_, msg, err := c.ReadMessage()
	if err == nil && !strings.Contains(string(msg), `"op":"ack"`) {
		err = fmt.Errorf("subscribe answered %s", msg)
	}
	return err
}

func (g *gatewayFanout) publish(seq uint64) {
	data, _ := proto.Marshal(benchEvent(seq))
	rec := persistence.Record{Seq: seq, Type: "llm_responded", Data: data, At: time.Now()}
	g.j.mu.Lock()
	g.j.recs = append(g.j.recs, rec)
	g.j.mu.Unlock()
	g.feed.Publish("bench", []*messages.Event{benchEvent(seq)})
}

func (g *gatewayFanout) close() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_ = g.h.Shutdown(ctx)
	g.srv.Close()
	g.feed.Close()
}

// hubFanout is the bare gorilla/websocket hub of the comparison.
type hubFanout struct {
	srv     *httptest.Server
	mu      sync.Mutex
	clients map[*hubClient]struct{}
	writers sync.WaitGroup
}

type hubClient struct {
	ws   *websocket.Conn
	send chan []byte
}

func newHubFanout() *hubFanout {
	h := &hubFanout{clients: map[*hubClient]struct{}{}}
	up := websocket.Upgrader{}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		c := &hubClient{ws: ws, send: make(chan []byte, 256)}
		h.mu.Lock()
		h.clients[c] = struct{}{}
		h.mu.Unlock()
		h.writers.Add(1)
		go func() {
			defer h.writers.Done()
			for f := range c.send {
				_ = ws.SetWriteDeadline(time.Now().Add(10 * time.Second))
				if ws.WriteMessage(websocket.TextMessage, f) != nil {
					return
				}
			}
		}()
		// The handshake's first frame is the hub's "subscribed" signal to the harness.
		c.send <- []byte(`{"op":"ack"}`)
		for {
			if _, _, err := ws.NextReader(); err != nil {
				break
			}
		}
		h.mu.Lock()
		delete(h.clients, c)
		h.mu.Unlock()
		close(c.send)
		_ = ws.Close()
	}))
	return h
}

func (h *hubFanout) url() string { return "ws" + strings.TrimPrefix(h.srv.URL, "http") }

func (h *hubFanout) subscribe(c *websocket.Conn) error {
	_, _, err := c.ReadMessage()
	return err
}

func (h *hubFanout) publish(seq uint64) {
	js, _ := messages.MarshalEventJSON(benchEvent(seq))
	f := append([]byte(`{"op":"event",`), js[1:]...)
	h.mu.Lock()
	defer h.mu.Unlock()
	for c := range h.clients {
		c.send <- f
	}
}

func (h *hubFanout) close() {
	h.srv.CloseClientConnections()
	h.srv.Close()
	h.writers.Wait()
}
