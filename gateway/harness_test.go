package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"google.golang.org/protobuf/proto"

	"github.com/fathom-agents/fathom/actors/session"
	"github.com/fathom-agents/fathom/gateway"
	"github.com/fathom-agents/fathom/internal/node"
	"github.com/fathom-agents/fathom/live/feed"
	"github.com/fathom-agents/fathom/llm/mock"
	"github.com/fathom-agents/fathom/messages"
	"github.com/fathom-agents/fathom/persistence"
)

const readToken = "r3ad-only-token"

// gw is a gateway served by httptest in front of an in-process node (startGW: embedded
// journal, scripted model over HTTP, local cluster) or of the fakes of its interfaces
// (startFake, fake_test.go).
type gw struct {
	t     testing.TB
	srv   *httptest.Server
	h     *gateway.Handler
	n     *node.Node // startGW's node; nil under startFake
	fake  *fakeNode  // startFake's fakes; nil under startGW
	j     persistence.Journal
	feed  *feed.Feed
	wsURL string
}

type gwOpts struct {
	cfg     func(*gateway.Config)
	delayMS int          // delay of every model answer: sessions take long enough to watch live
	script  *mock.Script // the model's script; nil: the demo script
	// journal wraps the node's embedded journal (e.g. to inject a crash); nil: as opened.
	journal func(persistence.Journal) persistence.Journal
	// session edits the node's session configuration (nil: the defaults).
	session func(*session.Config)
	// postgres, when set, is the DSN of the node's PostgreSQL journal (else embedded).
	postgres string
	// log, when set, receives the node's and the gateway's log (else discarded).
	log io.Writer
	// longTerm turns the node's long-term memory on.
	longTerm bool
	// node edits the node's configuration (nil: as above).
	node func(*node.Config)
}

func startGW(t testing.TB, o gwOpts) *gw {
	t.Helper()
	script := mock.DemoScript()
	if o.script != nil {
		script = *o.script
	}
	for i := range script.Rules {
		script.Rules[i].DelayMS = o.delayMS
	}
	model := httptest.NewServer(mock.New(mock.Config{Script: script}).Handler())
	t.Cleanup(model.Close)
	sink := io.Discard
	if o.log != nil {
		sink = o.log
	}
	log := slog.New(slog.NewTextHandler(sink, nil))
	cfg := node.Config{
		DataDir:     t.TempDir(),
		PostgresDSN: o.postgres,
		Session:     session.DefaultConfig(),
		Logger:      log,
		LLM:         node.LLMConfig{BaseURL: model.URL + "/v1", APIKey: "test"},
	}
	if o.session != nil {
		o.session(&cfg.Session)
	}
	cfg.Memory.LongTerm = o.longTerm
	if o.node != nil {
		o.node(&cfg)
	}
	cfg.Cluster.Provider = "local"
	cfg.Cluster.Logger = log
	cfg.Cluster.Name = "gw-" + gateway.NewID("t")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if o.journal != nil {
		j, err := node.OpenJournal(ctx, cfg.DataDir, "", log)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Journal = o.journal(j)
	}
	n, err := node.Start(ctx, cfg)
	if err != nil {
		t.Fatalf("start node: %v", err)
	}
	gcfg := gateway.Config{Token: token, ReadToken: readToken, Sessions: n.GatewaySessions(), Feed: n.Feed(), Logger: log,
		Metrics: n.MetricsHandler(), Restarts: n.Restarts, Index: n, Artifacts: n, Deleter: n, Memories: n.GatewayMemories(), Cluster: n.ClusterInfo, Gantt: node.GanttJSON,
		Meter: n.MeterProvider().Meter("github.com/fathom-agents/fathom/gateway")}
	if o.cfg != nil {
		o.cfg(&gcfg)
	}
	h, srv := serve(t, gcfg, func(ctx context.Context) {
		if err := n.Stop(ctx); err != nil {
			t.Errorf("stop node: %v", err)
		}
	})
	return &gw{t: t, srv: srv, h: h, n: n, j: n.Journal(), feed: n.Feed(), wsURL: "ws" + strings.TrimPrefix(srv.URL, "http") + "/v1/ws"}
}

// serve serves the gateway of gcfg with httptest; on cleanup it shuts the gateway down,
// closes the server, then calls stop (what the gateway fronted).
func serve(t testing.TB, gcfg gateway.Config, stop func(context.Context)) (*gateway.Handler, *httptest.Server) {
	t.Helper()
	h, err := gateway.New(gcfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := h.Shutdown(ctx); err != nil {
			t.Errorf("gateway shutdown: %v", err)
		}
		srv.Close()
		stop(ctx)
	})
	return h, srv
}

// startFake serves a gateway in front of the fakes of its interfaces (fakeNode: session
// grains deciding with the session core over an in-memory journal, its feed, index and
// deletion, a one-member cluster view), configured as startGW's but for what only a node
// has (metrics, restarts, artifacts, memories, Gantt). No actor system: tests on it share
// nothing and run in parallel. Only o.cfg and o.log apply; the options that configure a
// node are refused.
func startFake(t testing.TB, o gwOpts) *gw {
	t.Helper()
	if o.delayMS != 0 || o.script != nil || o.journal != nil || o.session != nil || o.postgres != "" || o.longTerm || o.node != nil {
		t.Fatal("startFake: only gwOpts.cfg and gwOpts.log apply to the fakes")
	}
	sink := io.Discard
	if o.log != nil {
		sink = o.log
	}
	f := newFakeNode()
	gcfg := gateway.Config{Token: token, ReadToken: readToken, Sessions: f, Feed: f.feed, Index: f, Deleter: f,
		Cluster: f.clusterInfo, Logger: slog.New(slog.NewTextHandler(sink, nil))}
	if o.cfg != nil {
		o.cfg(&gcfg)
	}
	f.policy = gcfg.Tenancy // the grains enforce the gateway's policy, as a node's do
	h, srv := serve(t, gcfg, func(context.Context) { f.close() })
	return &gw{t: t, srv: srv, h: h, fake: f, j: f.j, feed: f.feed, wsURL: "ws" + strings.TrimPrefix(srv.URL, "http") + "/v1/ws"}
}

// completeAsync runs fake session id to its end (fakeNode.complete) in the background,
// as a session runs while a client follows it; the test waits for it before it ends.
func (g *gw) completeAsync(id string) {
	done := make(chan error, 1)
	go func() { done <- g.fake.complete(id) }()
	g.t.Cleanup(func() {
		if err := <-done; err != nil {
			g.t.Error(err)
		}
	})
}

// journal returns the stored events of a session as the gateway renders them
// (messages.MarshalEventJSON), by seq.
func (g *gw) journal(id string) []map[string]any {
	g.t.Helper()
	var out []map[string]any
	err := g.j.Load(context.Background(), id, 0, func(r persistence.Record) error {
		ev := &messages.Event{}
		if err := proto.Unmarshal(r.Data, ev); err != nil {
			return err
		}
		b, err := messages.MarshalEventJSON(ev)
		if err != nil {
			return err
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			return err
		}
		out = append(out, m)
		return nil
	})
	if err != nil {
		g.t.Fatalf("load journal of %s: %v", id, err)
	}
	return out
}

// synthetic appends count events of about size bytes each to stream (not a session the
// grain knows: the gateway serves any stream of the feed) and publishes them live.
func (g *gw) synthetic(stream string, count, size int) {
	g.t.Helper()
	ctx := context.Background()
	last, err := g.j.LastSeq(ctx, stream)
	if err != nil {
		g.t.Fatal(err)
	}
	recs := make([]persistence.Record, count)
	evs := make([]*messages.Event, count)
	for i := range recs {
		seq := last + uint64(i) + 1
		ev := &messages.Event{Seq: seq, SessionId: stream, AtUnixNano: time.Now().UnixNano(),
			Payload: &messages.Event_LlmResponded{LlmResponded: &messages.LlmResponded{
				CallId: fmt.Sprintf("call-%d", seq), Content: strings.Repeat("x", size)}}}
		data, err := proto.Marshal(ev)
		if err != nil {
			g.t.Fatal(err)
		}
		recs[i] = persistence.Record{Type: ev.Type(), Data: data, At: ev.At()}
		evs[i] = ev
	}
	if _, err := g.j.Append(ctx, stream, last, recs); err != nil {
		g.t.Fatal(err)
	}
	g.feed.Publish(stream, evs)
}

// wsc is a gorilla client of the gateway.
type wsc struct {
	t testing.TB
	c *websocket.Conn
}

func (g *gw) dial(tok string, hdr http.Header) (*wsc, *http.Response, error) {
	if hdr == nil {
		hdr = http.Header{}
	}
	if tok != "" {
		hdr.Set("Authorization", "Bearer "+tok)
	}
	c, resp, err := websocket.DefaultDialer.Dial(g.wsURL, hdr)
	if err != nil {
		return nil, resp, err
	}
	g.t.Cleanup(func() { c.Close() })
	return &wsc{t: g.t, c: c}, resp, nil
}

func (g *gw) mustDial(tok string) *wsc {
	g.t.Helper()
	c, resp, err := g.dial(tok, nil)
	if err != nil {
		status := 0
		if resp != nil {
			status = resp.StatusCode
		}
		g.t.Fatalf("dial: %v (status %d)", err, status)
	}
	return c
}

func (c *wsc) send(v any) {
	c.t.Helper()
	var b []byte
	switch v := v.(type) {
	case string:
		b = []byte(v)
	default:
		var err error
		if b, err = json.Marshal(v); err != nil {
			c.t.Fatal(err)
		}
	}
	if err := c.c.WriteMessage(websocket.TextMessage, b); err != nil {
		c.t.Fatalf("send: %v", err)
	}
}

// read returns the next frame, failing the test after timeout.
func (c *wsc) read(timeout time.Duration) map[string]any {
	c.t.Helper()
	f, err := c.tryRead(timeout)
	if err != nil {
		c.t.Fatalf("read: %v", err)
	}
	return f
}

func (c *wsc) tryRead(timeout time.Duration) (map[string]any, error) {
	_ = c.c.SetReadDeadline(time.Now().Add(timeout))
	_, b, err := c.c.ReadMessage()
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("frame %q is not JSON: %w", b, err)
	}
	return m, nil
}

// next reads frames until one with op (skipping deltas and events unless asked for).
func (c *wsc) next(op string, timeout time.Duration) map[string]any {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		f := c.read(time.Until(deadline))
		if f["op"] == op {
			return f
		}
	}
}

// follow reads event frames of session id until one of type until, returning them;
// deltas are checked for shape and skipped.
func (c *wsc) follow(id, until string, timeout time.Duration) []map[string]any {
	c.t.Helper()
	var evs []map[string]any
	deadline := time.Now().Add(timeout)
	for {
		f := c.read(time.Until(deadline))
		switch f["op"] {
		case "delta":
			if f["session_id"] != id || f["call_id"] == "" {
				c.t.Fatalf("bad delta %v", f)
			}
			continue
		case "event":
		default:
			c.t.Fatalf("unexpected frame while following %s: %v", id, f)
		}
		if f["session_id"] != id {
			c.t.Fatalf("event of %v on the subscription to %s", f["session_id"], id)
		}
		evs = append(evs, f)
		if f["type"] == until {
			return evs
		}
	}
}

func seqOf(f map[string]any) uint64 {
	n, _ := f["seq"].(float64)
	return uint64(n)
}

// sameEvents checks frames against the journal's events from seq from+1 on: same seqs,
// no gap, no repeat, and the same JSON fields.
func sameEvents(t *testing.T, got, journal []map[string]any, from uint64) {
	t.Helper()
	want := journal[from:]
	if len(got) != len(want) {
		t.Fatalf("got %d events after seq %d, the journal has %d", len(got), from, len(want))
	}
	for i, f := range got {
		w := want[i]
		if f["op"] != "event" {
			t.Fatalf("frame %d is %v", i, f["op"])
		}
		g := map[string]any{}
		for k, v := range f {
			if k != "op" {
				g[k] = v
			}
		}
		gb, _ := json.Marshal(g)
		wb, _ := json.Marshal(w)
		if string(gb) != string(wb) {
			t.Fatalf("event %d differs from the journal:\n got %s\nwant %s", from+uint64(i)+1, gb, wb)
		}
	}
}
