package gateway_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/fathom-agents/fathom/persistence"
)

// TestEventStreamWritesWhatIsReadyAtOnce: the events an NDJSON event stream has ready
// at once (here a catch-up's page of three) go out in one write, one HTTP chunk, not
// one flush (a system call and a packet) per event; each event is one line, in order.
func TestEventStreamWritesWhatIsReadyAtOnce(t *testing.T) {
	t.Parallel()
	g := newGatewayFanout(t)
	defer g.close()
	const events = 3
	for seq := uint64(1); seq <= events; seq++ {
		data, err := proto.Marshal(benchEvent(seq))
		if err != nil {
			t.Fatal(err)
		}
		g.j.recs = append(g.j.recs, persistence.Record{Seq: seq, Type: "llm_responded", Data: data, At: time.Now()})
	}
	conn, err := net.Dial("tcp", strings.TrimPrefix(g.srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	fmt.Fprintf(conn, "GET /v1/sessions/bench/events?deltas=false HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer %s\r\n\r\n", token)
	r := bufio.NewReader(conn)
	res, err := http.ReadResponse(r, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusOK || len(res.TransferEncoding) == 0 || res.TransferEncoding[0] != "chunked" {
		t.Fatalf("answer %d, transfer encoding %v", res.StatusCode, res.TransferEncoding)
	}
	// Read the body's chunks as they came (http.ReadResponse leaves the body unread).
	var chunks []string
	var lines int
	for lines < events {
		head, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("after %d chunks: %v", len(chunks), err)
		}
		n, err := strconv.ParseInt(strings.TrimSpace(head), 16, 64)
		if err != nil || n == 0 {
			t.Fatalf("chunk header %q", head)
		}
		buf := make([]byte, n+2) // the chunk and its CRLF
		if _, err := io.ReadFull(r, buf); err != nil {
			t.Fatal(err)
		}
		chunk := string(buf[:n])
		chunks = append(chunks, chunk)
		lines += strings.Count(chunk, "\n")
	}
	body := strings.Join(chunks, "")
	for seq := 1; seq <= events; seq++ {
		if !strings.Contains(strings.Split(body, "\n")[seq-1], fmt.Sprintf(`"seq":%d,`, seq)) {
			t.Fatalf("line %d is not event %d: %s", seq, seq, body)
		}
	}
	if len(chunks) != 1 {
		t.Fatalf("%d events ready at once went out in %d writes, want 1: %q", events, len(chunks), chunks)
	}
}
