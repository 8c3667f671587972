package fathom_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/fathom-agents/fathom"
	"github.com/fathom-agents/fathom/auth"
	"github.com/fathom-agents/fathom/gateway"
	"github.com/fathom-agents/fathom/internal/fathomtest"
	"github.com/fathom-agents/fathom/internal/testenv"
	"github.com/fathom-agents/fathom/llm/mock"
)

// queueNode starts a node whose default tenant runs at most one session and queues the
// starts over it for a minute, with a model whose planning call takes a minute (a
// session runs until it is cancelled), and serves its gateway.
func queueNode(ctx context.Context, t *testing.T) (*fathom.Node, *httptest.Server) {
	t.Helper()
	cfg := fathomtest.Config(t, fathomtest.Model(t, mock.Script{Rules: []mock.Rule{
		{SystemMatch: "FATHOM-ROLE: orchestrator", DelayMS: 60_000, Response: `{"steps":[]}`},
	}, Default: "done"}))
	cfg.Quotas = fathom.Quotas{Default: fathom.TenantLimits{Weight: 1},
		Named: map[string]fathom.TenantLimits{auth.DefaultTenant: {Weight: 1, MaxRunningSessions: 1, StartQueueTimeout: 60 * time.Second}}}
	n := fathomtest.Start(t, cfg)
	return n, fathomtest.Serve(t, n, gateway.Config{})
}

// waitingStarts reads fathom_start_queue_waiting{tenant="default"} from GET /metrics.
func waitingStarts(t *testing.T, srv *httptest.Server) int {
	t.Helper()
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.LegacyValidation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("not Prometheus text: %v", err)
	}
	if f := families["fathom_start_queue_waiting"]; f != nil {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "tenant" && l.GetValue() == auth.DefaultTenant {
					return int(m.GetGauge().GetValue())
				}
			}
		}
	}
	return 0
}

// postStart starts session id over HTTP and returns the status.
func postStart(ctx context.Context, srv *httptest.Server, id string) (int, error) {
	body, _ := json.Marshal(map[string]string{"session_id": id, "goal": "wait for a slot: " + id})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/v1/sessions", bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusCreated {
		return resp.StatusCode, fmt.Errorf("start %s: %d %s", id, resp.StatusCode, b)
	}
	return resp.StatusCode, nil
}

// TestStartQueueIsFirstComeFirstServed: starts over the tenant's max_running_sessions
// (1) wait in the tenant's start queue (start_queue_timeout) and are admitted in the
// order they arrived, one each time the running session ends. The starts arrive 90 ms
// apart, so that retries made on each start's own 250 ms clock (the queue before it was
// ordered) would not come in arrival order.
func TestStartQueueIsFirstComeFirstServed(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	n, srv := queueNode(ctx, t)
	if _, err := postStart(ctx, srv, "fifo-0"); err != nil {
		t.Fatal(err)
	}
	const waiters = 5
	started := make(chan string, waiters)
	for i := 1; i <= waiters; i++ {
		id := fmt.Sprintf("fifo-%d", i)
		go func() {
			if _, err := postStart(ctx, srv, id); err != nil {
				t.Errorf("queued start: %v", err)
			}
			started <- id
		}()
		testenv.Eventually(t, 30*time.Second, func() bool { return waitingStarts(t, srv) == i },
			"start %s is not waiting in the queue (fathom_start_queue_waiting = %d)", id, waitingStarts(t, srv))
		if i < waiters {
			time.Sleep(90 * time.Millisecond) // spreads the arrivals over the old retry clock; not a synchronisation
		}
	}
	running := "fifo-0"
	var order []string
	for range waiters {
		if err := n.Cancel(ctx, running, "make room"); err != nil {
			t.Fatal(err)
		}
		select {
		case running = <-started:
			order = append(order, running)
		case <-time.After(30 * time.Second):
			t.Fatalf("no queued start went through after %s ended; order so far %v", running, order)
		}
	}
	if got, want := strings.Join(order, " "), "fifo-1 fifo-2 fifo-3 fifo-4 fifo-5"; got != want {
		t.Fatalf("queued starts admitted in the order %s, want arrival order %s", got, want)
	}
	if w := waitingStarts(t, srv); w != 0 {
		t.Fatalf("fathom_start_queue_waiting = %d after every start went through", w)
	}
}

// TestStartQueueDropsAGoneClient: a WebSocket client whose start waits in its tenant's
// start queue and disconnects leaves the queue: the start queued after it gets the slot
// when the running session ends, and no session is started for the gone client.
func TestStartQueueDropsAGoneClient(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	n, srv := queueNode(ctx, t)
	if _, err := postStart(ctx, srv, "gone-0"); err != nil {
		t.Fatal(err)
	}
	ws, _, err := websocket.DefaultDialer.DialContext(ctx, "ws"+strings.TrimPrefix(srv.URL, "http")+"/v1/ws", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	if err := ws.WriteJSON(map[string]any{"op": "start", "id": 1, "session_id": "gone-1", "goal": "its client leaves"}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, func() bool { return waitingStarts(t, srv) == 1 }, "the WebSocket start is not waiting in the queue")
	next := make(chan error, 1)
	go func() {
		_, err := postStart(ctx, srv, "gone-2")
		next <- err
	}()
	testenv.Eventually(t, 30*time.Second, func() bool { return waitingStarts(t, srv) == 2 }, "the HTTP start is not waiting in the queue")

	_ = ws.Close() // the client goes away while its start waits
	testenv.Eventually(t, 30*time.Second, func() bool { return waitingStarts(t, srv) == 1 },
		"the gone client's start is still in the queue (fathom_start_queue_waiting = %d)", waitingStarts(t, srv))
	if err := n.Cancel(ctx, "gone-0", "make room"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-next:
		if err != nil {
			t.Fatalf("the start queued after the gone client: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the start queued after the gone client did not get the slot")
	}
	if _, err := n.State(ctx, "gone-1"); !errors.Is(err, fathom.ErrNotFound) {
		t.Fatalf("the gone client's session: %v, want ErrNotFound (nothing started for it)", err)
	}
	if w := waitingStarts(t, srv); w != 0 {
		t.Fatalf("fathom_start_queue_waiting = %d after the queue emptied", w)
	}
}
