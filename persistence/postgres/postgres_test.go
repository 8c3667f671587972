package postgres_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/fathom-agents/fathom/internal/testenv"
	"github.com/fathom-agents/fathom/persistence"
	"github.com/fathom-agents/fathom/persistence/journaltest"
	"github.com/fathom-agents/fathom/persistence/postgres"
)

func open(t testing.TB, dsn string) *postgres.Journal {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	j, err := postgres.Open(ctx, dsn, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return j
}

func TestConformance(t *testing.T) {
	dsn := testenv.PostgresDSN(t)
	journaltest.Run(t, func(t *testing.T) persistence.Journal { return open(t, dsn) })
}

func TestMigrateIsIdempotentAndConcurrent(t *testing.T) {
	dsn := testenv.PostgresDSN(t)
	errs := make(chan error, 4)
	for i := 0; i < 4; i++ {
		go func() { errs <- postgres.MigrateDSN(context.Background(), dsn) }()
	}
	for i := 0; i < 4; i++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	j := open(t, dsn)
	defer j.Close()
	var n int
	if err := j.Pool().QueryRow(context.Background(), "SELECT count(*) FROM fathom_schema_migrations").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n < 1 {
		t.Fatalf("%d migrations recorded", n)
	}
}

func TestUnreachableServerFailsClearlyWithoutPassword(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = postgres.Open(ctx, "postgres://fathom:s3cretpw@"+addr+"/db?sslmode=disable", postgres.Options{ConnectTimeout: time.Second})
	if err == nil || !strings.Contains(err.Error(), "postgres: connect to "+addr) {
		t.Fatalf("Open = %v", err)
	}
	if strings.Contains(err.Error(), "s3cretpw") {
		t.Fatalf("error leaks the password: %v", err)
	}
	if _, err := postgres.Open(ctx, "postgres://u:s3cretpw@host:notaport/db", postgres.Options{}); err == nil || strings.Contains(err.Error(), "s3cretpw") {
		t.Fatalf("bad DSN: %v", err)
	}
}

func TestClosedJournal(t *testing.T) {
	j := open(t, testenv.PostgresDSN(t))
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := j.Append(context.Background(), "s", 0, []persistence.Record{{Type: "x"}}); !errors.Is(err, persistence.ErrClosed) {
		t.Fatalf("append after close: %v", err)
	}
}
