package gateway_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"google.golang.org/protobuf/proto"

	"github.com/fathom-agents/fathom/actors/session"
	"github.com/fathom-agents/fathom/gateway"
	"github.com/fathom-agents/fathom/gateway/a2a"
	"github.com/fathom-agents/fathom/gateway/agui"
	"github.com/fathom-agents/fathom/internal/testenv"
	"github.com/fathom-agents/fathom/live/feed"
	"github.com/fathom-agents/fathom/persistence"
)

// rawStream posts body to path over a raw connection (headers hdr) and returns the
// answer's body chunks as they were written, to the last one. Each flush of the server
// is one chunk: a chunk per event means a flush (a system call, a packet) per event.
func rawStream(t *testing.T, g *gw, path, body string, hdr map[string]string) []string {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(g.srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(60 * time.Second))
	req := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\n"+
		"Accept: text/event-stream\r\nContent-Length: %d\r\n", path, token, len(body))
	for k, v := range hdr {
		req += k + ": " + v + "\r\n"
	}
	if _, err := io.WriteString(conn, req+"\r\n"+body); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(conn)
	res, err := http.ReadResponse(r, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusOK || len(res.TransferEncoding) == 0 || res.TransferEncoding[0] != "chunked" {
		t.Fatalf("POST %s: answer %d, transfer encoding %v", path, res.StatusCode, res.TransferEncoding)
	}
	var chunks []string
	for {
		head, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("after %d chunks: %v", len(chunks), err)
		}
		n, err := strconv.ParseInt(strings.TrimSpace(head), 16, 64)
		if err != nil {
			t.Fatalf("chunk header %q", head)
		}
		if n == 0 {
			return chunks
		}
		buf := make([]byte, n+2) // the chunk and its CRLF
		if _, err := io.ReadFull(r, buf); err != nil {
			t.Fatal(err)
		}
		chunks = append(chunks, string(buf[:n]))
	}
}

// sseData is the data lines of server-sent events, in order.
func sseData(body string) []string {
	var out []string
	for _, line := range strings.Split(body, "\n") {
		if d, ok := strings.CutPrefix(line, "data: "); ok {
			out = append(out, d)
		}
	}
	return out
}

// waitCompleted polls GET /v1/sessions/{id} until the session has completed.
func waitCompleted(t *testing.T, g *gw, id string) {
	t.Helper()
	testenv.Eventually(t, 60*time.Second, func() bool {
		_, body := getJSON(t, g.srv.URL+"/v1/sessions/"+id, token)
		st, _ := body["state"].(map[string]any)
		return st["status"] == "SESSION_STATUS_COMPLETED"
	}, "session %s did not complete", id)
}

// startChainGW is a gateway whose sessions run the streaming benchmark's chain of
// steps, without its delays.
func startChainGW(t *testing.T) *gw {
	script := streamScript()
	return startGW(t, gwOpts{script: &script,
		session: func(c *session.Config) { c.MaxSteps, c.MaxIterations = streamSteps, 2*streamSteps+10 }})
}

// TestA2AStreamWritesWhatIsReadyAtOnce: an A2A SubscribeToTask stream resumed from
// Last-Event-ID 0 on a finished task has all its events ready at once: they go out in
// a few writes (HTTP chunks), not one flush per event. Two streams of the task with
// different JSON-RPC ids get the same results, each framed with its own id exactly as
// JSON-RPC's encoding gives it (a string id's <, & escaped).
func TestA2AStreamWritesWhatIsReadyAtOnce(t *testing.T) {
	g := startChainGW(t)
	a2a.Mount(g.h, a2a.Config{})
	startSession(t, g, "a2a-batch", "Write it in parts")
	waitCompleted(t, g, "a2a-batch")
	subscribe := func(id string) (frames []string, chunks int) {
		cs := rawStream(t, g, a2a.DefaultPath, `{"jsonrpc":"2.0","id":`+id+`,"method":"SubscribeToTask","params":{"id":"a2a-batch"}}`,
			map[string]string{"Last-Event-ID": "0"})
		return sseData(strings.Join(cs, "")), len(cs)
	}
	a, chunks := subscribe(`"<a&b>"`)
	b, _ := subscribe(`7`)
	events := len(a) - 1 // the task, then the events' responses
	t.Logf("%d stream responses in %d chunks", len(a), chunks)
	if events < 10 || !strings.Contains(a[len(a)-1], "TASK_STATE_COMPLETED") {
		t.Fatalf("the replay has %d responses, the last %s", len(a), a[len(a)-1])
	}
	if chunks-1 > events/2 {
		t.Fatalf("%d stream responses ready at once went out in %d writes after the task's, want at most %d", events, chunks-1, events/2)
	}
	if len(b) != len(a) {
		t.Fatalf("the two streams have %d and %d responses", len(a), len(b))
	}
	for i := range a {
		ra, oka := strings.CutPrefix(a[i], `{"id":"\u003ca\u0026b\u003e","jsonrpc":"2.0","result":`)
		rb, okb := strings.CutPrefix(b[i], `{"id":7,"jsonrpc":"2.0","result":`)
		if !oka || !okb || ra != rb {
			t.Fatalf("response %d differs between the streams beyond its id:\n%s\n%s", i, a[i], b[i])
		}
	}
}

// TestAGUIStreamWritesWhatIsReadyAtOnce: an AG-UI run posted again after it finished is
// replayed from the journal, every event ready at once: its AG-UI events go out in a
// few writes (HTTP chunks), not one flush per event, and are the run's events.
func TestAGUIStreamWritesWhatIsReadyAtOnce(t *testing.T) {
	g := startChainGW(t)
	agui.Mount(g.h, nil)
	body := runBody("agui-batch", "run-1")
	live := strings.Join(rawStream(t, g, agui.Path, body, nil), "")
	first := sseData(live)
	chunks := rawStream(t, g, agui.Path, body, nil)
	again := sseData(strings.Join(chunks, ""))
	// Each event's id is a run position as Position writes it (the live run's name the
	// text messages open).
	open := 0
	for _, line := range strings.Split(live+strings.Join(chunks, ""), "\n") {
		id, ok := strings.CutPrefix(line, "id: ")
		if !ok {
			continue
		}
		p, err := agui.ParsePosition(id)
		if err != nil || p.String() != id {
			t.Fatalf("event id %q is not a position (%v)", id, err)
		}
		open += len(p.Sent)
	}
	if open == 0 {
		t.Fatal("no event id names an open text message")
	}
	t.Logf("%d AG-UI events replayed in %d chunks", len(again), len(chunks))
	if len(again) < 10 || !strings.Contains(again[len(again)-1], "RUN_FINISHED") {
		t.Fatalf("the replay has %d events, the last %s", len(again), again[len(again)-1])
	}
	if len(chunks) > len(again)/2 {
		t.Fatalf("%d AG-UI events ready at once went out in %d writes, want at most %d", len(again), len(chunks), len(again)/2)
	}
	frames := func(data []string) []aguiFrame {
		out := make([]aguiFrame, len(data))
		for i, d := range data {
			if err := json.Unmarshal([]byte(d), &out[i].ev); err != nil {
				t.Fatalf("AG-UI event %q: %v", d, err)
			}
		}
		return out
	}
	if !sameRun(frames(first), frames(again)) {
		t.Fatalf("the replay is not the run:\n%s\n---\n%s", strings.Join(first, "\n"), strings.Join(again, "\n"))
	}
}

// countingListener counts the writes to the connections it accepted (the server's
// system calls of sending).
type countingListener struct {
	net.Listener
	writes atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &countingConn{Conn: c, writes: &l.writes}, nil
}

type countingConn struct {
	net.Conn
	writes *atomic.Int64
}

func (c *countingConn) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(p)
}

// TestWSWritesWhatIsReadyAtOnce: the events a WebSocket subscription has ready at once
// (here a catch-up's page of eight) go out in one write to the connection, not one
// system call per frame; each is one frame, in order.
func TestWSWritesWhatIsReadyAtOnce(t *testing.T) {
	t.Parallel()
	const events = 8
	j := &memJournal{}
	for seq := uint64(1); seq <= events; seq++ {
		data, err := proto.Marshal(benchEvent(seq))
		if err != nil {
			t.Fatal(err)
		}
		j.recs = append(j.recs, persistence.Record{Seq: seq, Type: "llm_responded", Data: data, At: time.Now()})
	}
	f := feed.New(j, feed.Options{})
	defer f.Close()
	h, err := gateway.New(gateway.Config{Token: token, Sessions: noSessions{}, Feed: f,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(h)
	l := &countingListener{Listener: srv.Listener}
	srv.Listener = l
	srv.Start()
	defer srv.Close()
	c, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(srv.URL, "http")+"/v1/ws", http.Header{"Authorization": {"Bearer " + token}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	before := l.writes.Load() // the handshake's
	if err := c.WriteMessage(websocket.TextMessage, []byte(`{"op":"subscribe","session_id":"bench","from_seq":0,"deltas":false}`)); err != nil {
		t.Fatal(err)
	}
	var seqs []string
	for len(seqs) < events {
		_, msg, err := c.ReadMessage()
		if err != nil {
			t.Fatalf("after %d events: %v", len(seqs), err)
		}
		var fr struct {
			Op  string `json:"op"`
			Seq uint64 `json:"seq"`
		}
		if err := json.Unmarshal(msg, &fr); err != nil {
			t.Fatal(err)
		}
		if fr.Op == "event" {
			seqs = append(seqs, strconv.FormatUint(fr.Seq, 10))
		}
	}
	if got := strings.Join(seqs, ","); got != "1,2,3,4,5,6,7,8" {
		t.Fatalf("events %s", got)
	}
	// The ack and the events: two writes at most (the ack may go out on its own).
	if n := l.writes.Load() - before; n > 2 {
		t.Fatalf("the ack and %d events ready at once took %d writes, want at most 2", events, n)
	}
}
