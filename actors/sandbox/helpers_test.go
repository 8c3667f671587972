package sandbox

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/gorilla/websocket"

	"github.com/fathom-agents/fathom/internal/testenv"
	"github.com/fathom-agents/fathom/messages/fsp"
)

// logBuffer is a concurrency-safe log sink for assertions on logs.
type logBuffer struct{ testenv.Buffer }

func (l *logBuffer) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// testConfig is a configuration for tests: small pool, short waits.
func testConfig(url, token string, log *slog.Logger) Config {
	c := DefaultConfig()
	c.URL, c.APIKey, c.Logger = url, token, log
	c.PoolSize, c.PoolOverflow = 2, 1
	c.CheckoutTimeout = 2 * time.Second
	c.InitialBackoff, c.MaxBackoff = 20*time.Millisecond, 200*time.Millisecond
	c.RestartBackoff = 50 * time.Millisecond
	c.TimeoutGrace = 500 * time.Millisecond
	return c
}

// startPool starts a pool in a fresh actor system, stopped with the test.
func startPool(t testing.TB, cfg Config) (*Pool, *actor.ActorSystem) {
	t.Helper()
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}))
	p, err := Start(system, cfg)
	if err != nil {
		t.Fatalf("start pool: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := p.Stop(ctx); err != nil {
			t.Errorf("stop pool: %v", err)
		}
		system.Shutdown()
	})
	return p, system
}

// rawServer is a tiny hand-written FSP peer for what the real sandbox never does (send
// garbage, answer with chosen frames). It answers ping with pong and hands each decoded
// execute to onExecute, which writes what the test wants.
type rawServer struct {
	*httptest.Server
	token string
}

func newRawServer(t *testing.T, token string, onExecute func(c *websocket.Conn, ex *fsp.Execute)) *rawServer {
	t.Helper()
	up := websocket.Upgrader{}
	rs := &rawServer{token: token}
	rs.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if tok, _ := fsp.BearerToken(r.Header.Get(fsp.HeaderAuthorization)); tok != rs.token {
			http.Error(w, "bad token", http.StatusUnauthorized)
			return
		}
		c, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer c.Close()
		for {
			_, data, err := c.ReadMessage()
			if err != nil {
				return
			}
			m, err := fsp.Decode(data)
			if err != nil {
				t.Errorf("raw server: client sent a bad frame: %v", err)
				return
			}
			switch f := m.(type) {
			case *fsp.Ping:
				writeFrame(c, &fsp.Pong{Header: fsp.NewHeader(fsp.TypePong, "", time.Now())})
			case *fsp.Execute:
				onExecute(c, f)
			}
		}
	}))
	t.Cleanup(rs.Close)
	return rs
}

func (rs *rawServer) wsURL() string { return "ws" + strings.TrimPrefix(rs.URL, "http") + fsp.Path }

func writeFrame(c *websocket.Conn, m fsp.Message) {
	b, err := fsp.Encode(m)
	if err != nil {
		panic(err)
	}
	_ = c.WriteMessage(websocket.TextMessage, b)
}

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
