package janitor_test

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/fathom-agents/fathom/actors/janitor"
	"github.com/fathom-agents/fathom/internal/testenv"
	"github.com/fathom-agents/fathom/persistence"
	"github.com/fathom-agents/fathom/persistence/bolt"
	"github.com/fathom-agents/fathom/persistence/memjournal"
	"github.com/fathom-agents/fathom/persistence/postgres"
)

// store is a journal that keeps the session index and deletes sessions.
type store interface {
	persistence.Journal
	persistence.SessionIndex
	persistence.SessionDeleter
}

// TestJanitorDeletesOnlyExpiredTerminalSessions, on the embedded and in-memory journals and on
// PostgreSQL: a terminal session whose last event is older than the retention is
// deleted; a newer terminal one and a running one (however old) are kept.
func TestJanitorDeletesOnlyExpiredTerminalSessions(t *testing.T) {
	t.Run("bolt", func(t *testing.T) {
		j, err := bolt.Open(filepath.Join(t.TempDir(), "journal.db"), bolt.Options{NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = j.Close() })
		run(t, j)
	})
	t.Run("memory", func(t *testing.T) {
		j := memjournal.New(memjournal.Options{})
		t.Cleanup(func() { _ = j.Close() })
		run(t, j)
	})
	t.Run("postgres", func(t *testing.T) {
		dsn := testenv.PostgresDSN(t)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		j, err := postgres.Open(ctx, dsn, postgres.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = j.Close() })
		run(t, j)
	})
}

func run(t *testing.T, j store) {
	ctx := context.Background()
	prefix := "jan-" + time.Now().Format("150405.000000") + "-"
	old, running, recent := prefix+"old", prefix+"running", prefix+"recent"
	appendAs := func(id, status string) {
		t.Helper()
		rec := []persistence.Record{{Type: "e", Data: []byte("x")}}
		if _, err := j.AppendIndexed(ctx, id, 0, rec, persistence.IndexEntry{SessionID: id, Status: status}); err != nil {
			t.Fatal(err)
		}
	}
	appendAs(old, persistence.StatusCompleted)
	appendAs(running, persistence.StatusRunning)
	mid := time.Now()
	for !time.Now().After(mid) { // the clock must move past mid before recent's append
	}
	appendAs(recent, persistence.StatusFailed)

	const retention = time.Hour
	system := actor.NewActorSystem()
	deleted := make(chan string, 8)
	cfg := janitor.Config{
		Index: j, Retention: retention, Interval: 20 * time.Millisecond,
		Now: func() time.Time { return mid.Add(retention) }, // old is past the retention, recent is not
		Delete: func(ctx context.Context, id string) error {
			err := j.DeleteSession(ctx, id, "retention")
			if err == nil {
				deleted <- id
			}
			return err
		},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	pid, err := janitor.Spawn(system.Root, "janitor", cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = system.Root.StopFuture(pid).Wait() }()
	select {
	case id := <-deleted:
		if id != old {
			t.Fatalf("deleted %s first, want %s", id, old)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the janitor deleted nothing in 20s")
	}
	if seq, err := j.LastSeq(ctx, old); err != nil || seq != 0 {
		t.Fatalf("%s still has events: %d %v", old, seq, err)
	}
	// Later sweeps keep the others (the store is this test's alone): give them the time of
	// a few sweeps to do wrong.
	select {
	case id := <-deleted:
		t.Fatalf("the janitor deleted %s too", id)
	case <-time.After(5 * cfg.Interval):
	}
	for _, id := range []string{running, recent} {
		if seq, err := j.LastSeq(ctx, id); err != nil || seq != 1 {
			t.Fatalf("%s lost its events: %d %v", id, seq, err)
		}
	}
}

// TestConfigIsValidated: no index, no delete, or no retention is refused.
func TestConfigIsValidated(t *testing.T) {
	for _, c := range []janitor.Config{
		{Delete: func(context.Context, string) error { return nil }, Retention: time.Hour},
		{Retention: time.Hour},
		{Delete: func(context.Context, string) error { return nil }},
	} {
		if err := c.Validate(); err == nil {
			t.Errorf("config %+v accepted", c)
		}
	}
}
