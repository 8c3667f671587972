package postgres_test

// Benchmarks of the PostgreSQL journal against bare pgx doing the same work, in the same
// run, on the same server (BENCHMARKS.md has the ratios and the command). Each pair uses
// identically shaped tables and payloads: the ratio isolates the journal's overhead
// (conflict check, head row, API), not the server.

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/protobuf/proto"

	"github.com/fathom-agents/fathom/internal/testenv"
	"github.com/fathom-agents/fathom/messages"
	"github.com/fathom-agents/fathom/persistence"
	"github.com/fathom-agents/fathom/persistence/postgres"
)

// payload is a realistic event: a completed step with a few hundred bytes of output.
func payload(b testing.TB) []byte {
	ev := &messages.Event{SessionId: "bench", Payload: &messages.Event_StepCompleted{StepCompleted: &messages.StepCompleted{
		StepId: "step-2", Output: strings.Repeat("The deliverable of this step. ", 12),
	}}}
	data, err := proto.Marshal(ev)
	if err != nil {
		b.Fatal(err)
	}
	return data
}

type benchEnv struct {
	j    *postgres.Journal
	pool *pgxpool.Pool
	data []byte
}

func setupBench(b *testing.B) *benchEnv {
	b.Helper()
	j := open(b, testenv.PostgresDSN(b))
	b.Cleanup(func() { _ = j.Close() })
	_, err := j.Pool().Exec(context.Background(), `CREATE TABLE bench_events (
		stream_id text COLLATE "C" NOT NULL, seq bigint NOT NULL CHECK (seq > 0), type text NOT NULL,
		data bytea NOT NULL, at timestamptz NOT NULL, PRIMARY KEY (stream_id, seq))`)
	if err != nil {
		b.Fatal(err)
	}
	return &benchEnv{j: j, pool: j.Pool(), data: payload(b)}
}

var streamN atomic.Int64

func newStream() string { return fmt.Sprintf("bench-%d-%d", time.Now().UnixNano(), streamN.Add(1)) }

// BenchmarkAppend appends one event per operation to one stream, each its own commit.
func BenchmarkAppend(b *testing.B) {
	e := setupBench(b)
	ctx, s := context.Background(), newStream()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := e.j.Append(ctx, s, uint64(i), []persistence.Record{{Type: "step_completed", Data: e.data}}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBaselinePgxInsert is a bare pgx single-row INSERT (autocommit) into a table of
// the same shape: the floor for BenchmarkAppend.
func BenchmarkBaselinePgxInsert(b *testing.B) {
	e := setupBench(b)
	ctx, s := context.Background(), newStream()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := e.pool.Exec(ctx, `INSERT INTO bench_events (stream_id, seq, type, data, at) VALUES ($1, $2, $3, $4, $5)`,
			s, int64(i+1), "step_completed", e.data, time.Now()); err != nil {
			b.Fatal(err)
		}
	}
}

// parallel8 runs op from 8 goroutines (whatever GOMAXPROCS is), each with its own stream.
func parallel8(b *testing.B, op func(stream string, i int) error) {
	procs := testingProcs()
	b.SetParallelism((8 + procs - 1) / procs)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		s := newStream()
		for i := 0; pb.Next(); i++ {
			if err := op(s, i); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkAppendParallel8 is BenchmarkAppend with 8 concurrent sessions.
func BenchmarkAppendParallel8(b *testing.B) {
	e := setupBench(b)
	ctx := context.Background()
	parallel8(b, func(s string, i int) error {
		_, err := e.j.Append(ctx, s, uint64(i), []persistence.Record{{Type: "step_completed", Data: e.data}})
		return err
	})
}

// BenchmarkBaselinePgxInsertParallel8 is the bare pgx insert with 8 concurrent writers.
func BenchmarkBaselinePgxInsertParallel8(b *testing.B) {
	e := setupBench(b)
	ctx := context.Background()
	parallel8(b, func(s string, i int) error {
		_, err := e.pool.Exec(ctx, `INSERT INTO bench_events (stream_id, seq, type, data, at) VALUES ($1, $2, $3, $4, $5)`,
			s, int64(i+1), "step_completed", e.data, time.Now())
		return err
	})
}

const replayEvents = 1000

// seedReplay stores replayEvents events in a journal stream, one append each (one row
// per event: the journal's worst case, the same row count as the baseline), and the same
// rows in bench_events.
func seedReplay(b *testing.B, e *benchEnv) string {
	b.Helper()
	ctx, s := context.Background(), newStream()
	for last := uint64(0); last < replayEvents; {
		l, err := e.j.Append(ctx, s, last, []persistence.Record{{Type: "step_completed", Data: e.data}})
		if err != nil {
			b.Fatal(err)
		}
		last = l
	}
	if _, err := e.pool.Exec(ctx, `INSERT INTO bench_events SELECT * FROM fathom_events WHERE stream_id = $1`, s); err != nil {
		b.Fatal(err)
	}
	return s
}

// BenchmarkReplay loads and decodes a 1000-event stream per operation.
func BenchmarkReplay(b *testing.B) {
	e := setupBench(b)
	s := seedReplay(b, e)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		n := 0
		err := e.j.Load(ctx, s, 0, func(r persistence.Record) error {
			var ev messages.Event
			n++
			return proto.Unmarshal(r.Data, &ev)
		})
		if err != nil || n != replayEvents {
			b.Fatalf("replayed %d events: %v", n, err)
		}
	}
}

// BenchmarkBaselinePgxScan is a bare pgx query over the same rows, scanning and decoding
// each: the floor for BenchmarkReplay.
func BenchmarkBaselinePgxScan(b *testing.B) {
	e := setupBench(b)
	s := seedReplay(b, e)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rows, err := e.pool.Query(ctx, `SELECT seq, type, data, at FROM bench_events WHERE stream_id = $1 ORDER BY seq`, s)
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		for rows.Next() {
			var r persistence.Record
			var seq int64
			if err := rows.Scan(&seq, &r.Type, &r.Data, &r.At); err != nil {
				b.Fatal(err)
			}
			var ev messages.Event
			if err := proto.Unmarshal(r.Data, &ev); err != nil {
				b.Fatal(err)
			}
			n++
		}
		if rows.Err() != nil || n != replayEvents {
			b.Fatalf("scanned %d rows: %v", n, rows.Err())
		}
	}
}
