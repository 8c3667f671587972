// Package bolt is Fathom's embedded journal: one bbolt file, no server. It is the default
// store of `fathom run` and of a single node started without a PostgreSQL DSN.
//
// Layout: bucket "streams" maps a stream id to its metadata (last seq, created/updated
// times); bucket "events" holds one nested bucket per stream whose keys are big-endian
// sequence numbers; bucket "snapshots" likewise. Appends go through one writer goroutine
// that commits every append waiting at that moment in a single transaction (group
// commit without an artificial delay), so concurrent sessions share an fsync instead of
// queueing for one each.
//
// Opening never writes to a file it cannot read: a garbage or truncated file fails with
// an error wrapping persistence.ErrCorrupt and is left exactly as it was. Before the
// first write, Open runs the open check on a read-only handle: bbolt's consistency check
// (tx.Check: page references, freelist, key order) and every record's CRC-32C checksum
// (record.go, check.go), so damage anywhere in the file is refused, naming the session
// and seq, instead of written into. Files over Options.CheckMaxBytes are checked in the
// background instead, with writes refused (ErrChecking) until the check passes. A file
// stamped with a newer format than persistence.Format is refused with a
// *persistence.FormatError. Check and Repair (repair.go) are `fathom journal check
// [--repair]`. Options.ReadOnly opens an existing file for reading only: a missing file
// is an error wrapping os.ErrNotExist, never created.
package bolt

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	bbolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/fathom-agents/fathom/persistence"
)

var (
	bucketStreams   = []byte("streams")
	bucketEvents    = []byte("events")
	bucketSnapshots = []byte("snapshots")
)

// maxBatch bounds how many appends one group commit carries.
const maxBatch = 256

// loadChunk is how many records Load copies out per read transaction; fn runs outside
// any transaction so it may call back into the journal.
const loadChunk = 256

// DefaultCheckMaxBytes is the largest file Open checks in full before it returns when
// Options.CheckMaxBytes is zero (about 1.5 s with the file in the page cache: 88 MB took
// 0.47 s on a 2-core machine). Larger files are checked in the background, so a start
// stays bounded in time.
const DefaultCheckMaxBytes = 256 << 20

// ErrReadOnly is returned by writes to a journal opened with Options.ReadOnly.
var ErrReadOnly = errors.New("journal: opened read-only")

// Options tune the embedded journal.
type Options struct {
	// Timeout is how long Open waits for the file lock held by another process.
	// Zero means 2s.
	Timeout time.Duration
	// NoSync skips fsync on commit: faster, but a machine crash can lose acknowledged
	// appends. For tests and benchmarks only.
	NoSync bool
	// ReadOnly opens an existing file for reading only (shared lock): a missing file is
	// an error wrapping os.ErrNotExist and is not created; Append and SaveSnapshot fail
	// with ErrReadOnly.
	ReadOnly bool
	// CheckMaxBytes bounds the files Open checks in full (pages and records) before it
	// returns: a larger one is checked in the background, refusing writes with
	// ErrChecking until the check passes (a read-only open skips it: each read verifies
	// its records), and a log line says so. Zero means DefaultCheckMaxBytes; negative
	// skips the whole-file check always (reads still verify their records).
	CheckMaxBytes int64
	// Logger receives the notes about a background or skipped check. Nil means
	// slog.Default().
	Logger *slog.Logger
	// Facts reads the session index's facts (user, goal, cost) from each indexed append's
	// records (persistence/indexfacts.Of). Nil keeps none.
	Facts persistence.FactsFunc
}

// Journal is the bbolt implementation of persistence.Journal.
type Journal struct {
	db       *bbolt.DB
	path     string
	readOnly bool

	reqs    chan *appendReq
	stop    chan struct{}
	done    chan struct{}
	checked chan struct{}         // closed when the open check has ended
	gate    atomic.Pointer[error] // non-nil refuses writes: the open check runs or failed

	mu     sync.RWMutex // guards closed; held shared by in-flight calls
	closed bool

	leases  leaseTable            // the session index's leases (index.go)
	facts   persistence.FactsFunc // Options.Facts
	observe atomic.Pointer[persistence.AppendObserver]
}

// Journal is a persistence.SessionStore: every capability a node needs.
var _ persistence.SessionStore = (*Journal)(nil)

type appendReq struct {
	ctx      context.Context
	stream   string
	expected uint64
	recs     []persistence.Record
	entry    *persistence.IndexEntry // the session index row to write with it (index.go)
	last     uint64
	err      error
	done     chan struct{}
}

// Open opens (creating if missing, unless opts.ReadOnly) the journal file at path. A
// file that fails its integrity check is refused with an error wrapping
// persistence.ErrCorrupt that names it (and, for a damaged record, a
// *persistence.RecordError naming the session and seq), and is left untouched. A file
// written by a newer format is refused with a *persistence.FormatError.
func Open(path string, opts Options) (*Journal, error) {
	if opts.Timeout <= 0 {
		opts.Timeout = 2 * time.Second
	}
	if opts.CheckMaxBytes == 0 {
		opts.CheckMaxBytes = DefaultCheckMaxBytes
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.ReadOnly {
		return openReadOnly(path, opts)
	}
	deferred, err := precheck(path, opts)
	if err != nil {
		return nil, err
	}
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: opts.Timeout, NoSync: opts.NoSync, FreelistType: bbolt.FreelistMapType})
	if err != nil {
		return nil, openError(path, err)
	}
	j := newJournal(db, path, false)
	j.facts = opts.Facts
	if deferred {
		gate := fmt.Errorf("journal %s: %w", path, ErrChecking)
		j.gate.Store(&gate)
		opts.Logger.Warn("journal larger than the open-check limit: checking it in the background; writes are refused until the check passes",
			"file", path, "check_max_bytes", opts.CheckMaxBytes)
		go j.checkInBackground(opts.Logger)
	} else {
		close(j.checked)
		if err := initFile(db, path); err != nil {
			_ = db.Close()
			return nil, err
		}
	}
	go j.writer()
	return j, nil
}

func newJournal(db *bbolt.DB, path string, readOnly bool) *Journal {
	return &Journal{db: db, path: path, readOnly: readOnly, reqs: make(chan *appendReq, maxBatch),
		stop: make(chan struct{}), done: make(chan struct{}), checked: make(chan struct{})}
}

// checkInBackground runs the open check of a file too large to check before Open
// returns: bbolt's page check and every record's. Writes are refused (ErrChecking) until
// it passes; when it fails they stay refused with its error. Close stops it between
// records.
func (j *Journal) checkInBackground(log *slog.Logger) {
	defer close(j.checked)
	start := time.Now()
	err := j.db.View(func(tx *bbolt.Tx) error { return checkAll(tx, j.path, j.stop) })
	if errors.Is(err, errStopped) {
		return
	}
	if err == nil {
		err = initFile(j.db, j.path)
	}
	if err != nil {
		j.gate.Store(&err)
		log.Error("journal check failed: writes refused until `fathom journal check --repair`", "file", j.path, "err", err)
		return
	}
	j.gate.Store(nil)
	log.Info("journal check passed: writes enabled", "file", j.path, "took", time.Since(start))
}

// writable returns nil when writes may go ahead: the open check passed.
func (j *Journal) writable() error {
	if p := j.gate.Load(); p != nil {
		return *p
	}
	return nil
}

// openReadOnly opens an existing journal with a shared lock and checks it like Open
// (a file larger than Options.CheckMaxBytes is not checked as a whole: each read still
// verifies its records).
func openReadOnly(path string, opts Options) (j *Journal, err error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("journal %s: %w", path, err)
	}
	if fi.IsDir() {
		return nil, fmt.Errorf("journal %s: is a directory", path)
	}
	full := opts.CheckMaxBytes >= 0 && fi.Size() <= opts.CheckMaxBytes
	if !full && opts.CheckMaxBytes >= 0 {
		opts.Logger.Warn("journal larger than the open-check limit: not checking it as a whole (each read verifies its records; run `fathom journal check` to check it all)",
			"file", path, "bytes", fi.Size(), "check_max_bytes", opts.CheckMaxBytes)
	}
	db, err := openChecked(path, fi.Size(), opts, full)
	if err != nil {
		return nil, err
	}
	if err := db.View(func(tx *bbolt.Tx) error {
		for _, b := range [][]byte{bucketStreams, bucketEvents, bucketSnapshots} {
			if tx.Bucket(b) == nil {
				return fmt.Errorf("journal %s: %w: no %q bucket (not a Fathom journal?)", path, persistence.ErrCorrupt, b)
			}
		}
		return nil
	}); err != nil {
		_ = db.Close()
		return nil, err
	}
	j = newJournal(db, path, true)
	close(j.checked)
	go j.writer()
	return j, nil
}

// precheck opens an existing non-empty file read-only and verifies it (openChecked), so
// a corrupt file is reported without the read-write open ever touching it. deferred
// says the file is larger than opts.CheckMaxBytes: Open checks it in the background.
func precheck(path string, opts Options) (deferred bool, err error) {
	fi, statErr := os.Stat(path)
	if statErr != nil || fi.Size() == 0 {
		return false, nil // missing or empty: bbolt initialises it
	}
	if fi.IsDir() {
		return false, fmt.Errorf("journal %s: is a directory", path)
	}
	full := opts.CheckMaxBytes >= 0 && fi.Size() <= opts.CheckMaxBytes
	db, err := openChecked(path, fi.Size(), opts, full)
	if err != nil {
		return false, err
	}
	if !full && opts.CheckMaxBytes >= 0 {
		// The background check needs the buckets a Fathom journal has; a file without
		// them holds no records, so check it now.
		var missing bool
		_ = db.View(func(tx *bbolt.Tx) error {
			missing = tx.Bucket(bucketStreams) == nil || tx.Bucket(bucketEvents) == nil || tx.Bucket(bucketSnapshots) == nil
			return nil
		})
		if missing {
			_ = db.Close()
			opts.CheckMaxBytes = fi.Size()
			return precheck(path, opts)
		}
		deferred = true
	}
	return deferred, db.Close()
}

// openChecked opens the file of size bytes read-only and verifies that it is a bbolt
// file whose recorded size fits in the file and whose format this binary reads, and,
// when full, that every page passes bbolt's consistency check and every record its own
// (checkAll). It returns the open read-only handle.
func openChecked(path string, size int64, opts Options, full bool) (db *bbolt.DB, err error) {
	defer func() {
		if r := recover(); r != nil {
			if db != nil {
				_ = db.Close()
			}
			// bbolt asserts on a page it reads that is not what its parent says: the
			// open check met the damage before (or while) the consistency check walked
			// to it, and says so as the check does.
			db, err = nil, fmt.Errorf("journal %s: %w: consistency check stopped at a damaged page: %v (%s)", path, persistence.ErrCorrupt, r, untouchedRemedy)
		}
	}()
	db, err = bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true, Timeout: opts.Timeout})
	if err != nil {
		return nil, openError(path, err)
	}
	err = db.View(func(tx *bbolt.Tx) error {
		if tx.Size() > size {
			return fmt.Errorf("journal %s: %w: file is %d bytes but its data needs %d (truncated?)", path, persistence.ErrCorrupt, size, tx.Size())
		}
		if err := checkFormat(tx, path); err != nil {
			return err
		}
		if !full {
			return nil
		}
		return checkAll(tx, path, nil)
	})
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	return db, nil
}

// maxCheckErrors bounds the inconsistencies quoted in the error.
const maxCheckErrors = 3

// checkPages runs bbolt's consistency check and reads its whole report (its goroutine
// ends when the channel is drained).
func checkPages(tx *bbolt.Tx, path string) error {
	var problems []string
	n := 0
	for err := range tx.Check() {
		n++
		if len(problems) < maxCheckErrors {
			problems = append(problems, err.Error())
		}
	}
	if n == 0 {
		return nil
	}
	return fmt.Errorf("journal %s: %w: consistency check found %d problem(s): %s (%s)",
		path, persistence.ErrCorrupt, n, strings.Join(problems, "; "), untouchedRemedy)
}

// untouchedRemedy ends the consistency check's errors: what the open did to the file and
// what the operator can do.
const untouchedRemedy = "the file was not modified; restore it from a backup or move it aside"

func openError(path string, err error) error {
	switch {
	case errors.Is(err, bolterrors.ErrTimeout):
		return fmt.Errorf("journal %s is locked by another process (is another fathom using this data dir?): %w", path, err)
	case errors.Is(err, bolterrors.ErrInvalid), errors.Is(err, bolterrors.ErrVersionMismatch),
		errors.Is(err, bolterrors.ErrChecksum), errors.Is(err, bolterrors.ErrInvalidMapping):
		return fmt.Errorf("journal %s: %w: %v (the file was not modified)", path, persistence.ErrCorrupt, err)
	case errors.Is(err, os.ErrPermission):
		return fmt.Errorf("journal %s: %w", path, err)
	}
	if strings.Contains(err.Error(), "file size too small") || strings.Contains(err.Error(), "invalid") {
		return fmt.Errorf("journal %s: %w: %v (the file was not modified)", path, persistence.ErrCorrupt, err)
	}
	return fmt.Errorf("journal %s: %w", path, err)
}

// Path is the journal's file.
func (j *Journal) Path() string { return j.path }

func (j *Journal) enter() error {
	j.mu.RLock()
	if j.closed {
		j.mu.RUnlock()
		return persistence.ErrClosed
	}
	return nil
}

func (j *Journal) leave() { j.mu.RUnlock() }

// Append implements persistence.Journal.
func (j *Journal) Append(ctx context.Context, stream string, expectedSeq uint64, recs []persistence.Record) (uint64, error) {
	return j.append(ctx, stream, expectedSeq, recs, nil)
}

func (j *Journal) append(ctx context.Context, stream string, expectedSeq uint64, recs []persistence.Record, entry *persistence.IndexEntry) (last uint64, err error) {
	if o := j.observe.Load(); o != nil {
		defer func(start time.Time) { (*o)(time.Since(start), len(recs), err) }(time.Now())
	}
	if err := validate(stream, expectedSeq, recs); err != nil {
		return 0, err
	}
	if j.readOnly {
		return 0, fmt.Errorf("append to %s: journal %s: %w", stream, j.path, ErrReadOnly)
	}
	if err := j.writable(); err != nil {
		return 0, fmt.Errorf("append to %s: %w", stream, err)
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if err := j.enter(); err != nil {
		return 0, err
	}
	defer j.leave()
	now := time.Now().UTC()
	cp := make([]persistence.Record, len(recs))
	for i, r := range recs {
		if r.At.IsZero() {
			r.At = now
		}
		cp[i] = r
	}
	req := &appendReq{ctx: ctx, stream: stream, expected: expectedSeq, recs: cp, entry: entry, done: make(chan struct{})}
	select {
	case j.reqs <- req:
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	// Once queued the writer always answers (it drains on stop), so wait for it: the
	// outcome of an append must never be unknown to its caller unless ctx ends first.
	select {
	case <-req.done:
		return req.last, req.err
	case <-ctx.Done():
		return 0, fmt.Errorf("append to %s: outcome unknown: %w", stream, ctx.Err())
	}
}

func validate(stream string, expectedSeq uint64, recs []persistence.Record) error {
	if err := persistence.ValidateAppend(stream, expectedSeq, recs); err != nil {
		return err
	}
	for i, r := range recs {
		if len(r.Type) > math.MaxUint16 {
			return fmt.Errorf("%w: record %d type too long", persistence.ErrInvalid, i)
		}
	}
	return nil
}

// writer is the single goroutine that commits appends, batching whatever is queued.
func (j *Journal) writer() {
	defer close(j.done)
	batch := make([]*appendReq, 0, maxBatch)
	for {
		var first *appendReq
		select {
		case first = <-j.reqs:
		case <-j.stop:
			return
		}
		batch = append(batch[:0], first)
	drain:
		for len(batch) < maxBatch {
			select {
			case r := <-j.reqs:
				batch = append(batch, r)
			default:
				break drain
			}
		}
		j.commit(batch)
		for _, r := range batch {
			close(r.done)
		}
	}
}

// commit writes batch in one transaction. Conflicts are decided per request before it
// writes anything; if the transaction itself fails, each request is retried alone so one
// bad append cannot fail its neighbours.
func (j *Journal) commit(batch []*appendReq) {
	live := batch[:0:0]
	for _, r := range batch {
		if err := r.ctx.Err(); err != nil {
			r.err = err // never written: the caller gave up before we started
			continue
		}
		live = append(live, r)
	}
	if len(live) == 0 {
		return
	}
	err := j.db.Update(func(tx *bbolt.Tx) error {
		for _, r := range live {
			r.last, r.err = appendTx(tx, r)
			if r.err != nil && !errors.Is(r.err, persistence.ErrConflict) {
				return r.err
			}
		}
		return nil
	})
	if err == nil || len(live) == 1 {
		if err != nil {
			live[0].last, live[0].err = 0, fmt.Errorf("append to %s: %w", live[0].stream, err)
		}
		return
	}
	for _, r := range live {
		r.err = j.db.Update(func(tx *bbolt.Tx) error {
			var err error
			r.last, err = appendTx(tx, r)
			return err
		})
		if r.err != nil && !errors.Is(r.err, persistence.ErrConflict) {
			r.err = fmt.Errorf("append to %s: %w", r.stream, r.err)
		}
	}
}

func appendTx(tx *bbolt.Tx, r *appendReq) (uint64, error) {
	streams := tx.Bucket(bucketStreams)
	meta, exists, err := decodeMeta(r.stream, streams.Get([]byte(r.stream)))
	if err != nil {
		return 0, err
	}
	if meta.last != r.expected {
		return 0, fmt.Errorf("append to %s after seq %d: stream is at %d: %w", r.stream, r.expected, meta.last, persistence.ErrConflict)
	}
	evs, err := tx.Bucket(bucketEvents).CreateBucketIfNotExists([]byte(r.stream))
	if err != nil {
		return 0, err
	}
	evs.FillPercent = 1.0 // keys only ever grow: pack pages full
	if meta.strictFrom == 0 {
		meta.strictFrom = meta.last + 1 // a new stream (1), or a format 1 one's first format 2 append
	}
	seq := meta.last
	for _, rec := range r.recs {
		seq++
		k := seqKey(seq)
		if err := evs.Put(k, encodeRecord(r.stream, k, rec)); err != nil {
			return 0, err
		}
	}
	if !exists {
		meta.created = r.recs[0].At
	}
	meta.last, meta.updated = seq, r.recs[len(r.recs)-1].At
	if err := streams.Put([]byte(r.stream), encodeMeta(r.stream, meta)); err != nil {
		return 0, err
	}
	if r.entry != nil {
		if err := putIndex(tx, *r.entry, seq, meta.updated, meta.created); err != nil {
			return 0, err
		}
	}
	return seq, nil
}

// Load implements persistence.Journal.
func (j *Journal) Load(ctx context.Context, stream string, afterSeq uint64, fn func(persistence.Record) error) error {
	next := afterSeq + 1
	if afterSeq == math.MaxUint64 {
		return nil
	}
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		chunk, err := j.readChunk(stream, next)
		if err != nil {
			return err
		}
		for _, r := range chunk {
			if err := fn(r); err != nil {
				return err
			}
		}
		if len(chunk) < loadChunk {
			return nil
		}
		next = chunk[len(chunk)-1].Seq + 1
	}
}

func (j *Journal) readChunk(stream string, from uint64) ([]persistence.Record, error) {
	if err := j.enter(); err != nil {
		return nil, err
	}
	defer j.leave()
	var out []persistence.Record
	err := j.db.View(func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucketEvents).Bucket([]byte(stream))
		if b == nil {
			return nil
		}
		m, _, err := getMeta(tx, stream)
		if err != nil {
			return fmt.Errorf("load %s: %w", stream, err)
		}
		c := b.Cursor()
		for k, v := c.Seek(seqKey(from)); k != nil && len(out) < loadChunk; k, v = c.Next() {
			rec, err := decodeRecord(stream, k, v, m.strict(binary.BigEndian.Uint64(k)), false)
			if err != nil {
				return fmt.Errorf("load %s: %w", stream, err)
			}
			out = append(out, rec)
		}
		return nil
	})
	return out, err
}

// LastSeq implements persistence.Journal.
func (j *Journal) LastSeq(ctx context.Context, stream string) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if err := j.enter(); err != nil {
		return 0, err
	}
	defer j.leave()
	var last uint64
	err := j.db.View(func(tx *bbolt.Tx) error {
		m, _, err := getMeta(tx, stream)
		last = m.last
		return err
	})
	return last, err
}

// SaveSnapshot implements persistence.Journal.
func (j *Journal) SaveSnapshot(ctx context.Context, stream string, snap persistence.Snapshot) error {
	if stream == "" {
		return fmt.Errorf("%w: empty stream id", persistence.ErrInvalid)
	}
	if j.readOnly {
		return fmt.Errorf("save snapshot of %s: journal %s: %w", stream, j.path, ErrReadOnly)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := j.enter(); err != nil {
		return err
	}
	defer j.leave()
	if snap.At.IsZero() {
		snap.At = time.Now().UTC()
	}
	if err := j.writable(); err != nil {
		return fmt.Errorf("save snapshot of %s: %w", stream, err)
	}
	return j.db.Update(func(tx *bbolt.Tx) error {
		b, err := tx.Bucket(bucketSnapshots).CreateBucketIfNotExists([]byte(stream))
		if err != nil {
			return err
		}
		k := seqKey(snap.Seq)
		return b.Put(k, encodeRecord(stream, k, persistence.Record{Type: "snapshot", Data: snap.Data, At: snap.At}))
	})
}

// LoadSnapshot implements persistence.Journal.
func (j *Journal) LoadSnapshot(ctx context.Context, stream string, maxSeq uint64) (persistence.Snapshot, bool, error) {
	if err := ctx.Err(); err != nil {
		return persistence.Snapshot{}, false, err
	}
	if err := j.enter(); err != nil {
		return persistence.Snapshot{}, false, err
	}
	defer j.leave()
	var snap persistence.Snapshot
	var ok bool
	err := j.db.View(func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucketSnapshots).Bucket([]byte(stream))
		if b == nil {
			return nil
		}
		c := b.Cursor()
		k, v := c.Seek(seqKey(maxSeq))
		switch {
		case k == nil: // every snapshot is older than maxSeq
			k, v = c.Last()
		case binary.BigEndian.Uint64(k) > maxSeq:
			k, v = c.Prev()
		}
		if k == nil {
			return nil
		}
		m, _, err := getMeta(tx, stream)
		if err != nil {
			return fmt.Errorf("snapshot of %s: %w", stream, err)
		}
		rec, err := decodeRecord(stream, k, v, m.strict(binary.BigEndian.Uint64(k)), true)
		if err != nil {
			return fmt.Errorf("snapshot of %s: %w", stream, err)
		}
		snap = persistence.Snapshot{Seq: rec.Seq, Data: rec.Data, At: rec.At}
		ok = true
		return nil
	})
	return snap, ok, err
}

// ListStreams implements persistence.Journal.
func (j *Journal) ListStreams(ctx context.Context, prefix string) ([]persistence.StreamInfo, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := j.enter(); err != nil {
		return nil, err
	}
	defer j.leave()
	var out []persistence.StreamInfo
	err := j.db.View(func(tx *bbolt.Tx) error {
		c := tx.Bucket(bucketStreams).Cursor()
		for k, v := c.Seek([]byte(prefix)); k != nil && strings.HasPrefix(string(k), prefix); k, v = c.Next() {
			m, _, err := decodeMeta(string(k), v)
			if err != nil {
				return fmt.Errorf("list streams: %w", err)
			}
			out = append(out, persistence.StreamInfo{ID: string(k), LastSeq: m.last, CreatedAt: m.created, UpdatedAt: m.updated})
		}
		return nil
	})
	return out, err
}

// Close stops the writer (after it has answered every queued append) and closes the file.
func (j *Journal) Close() error {
	j.mu.Lock()
	if j.closed {
		j.mu.Unlock()
		return persistence.ErrClosed
	}
	j.closed = true
	j.mu.Unlock() // in-flight calls held the read lock, so none is left
	close(j.stop)
	<-j.done
	<-j.checked
	return j.db.Close()
}

var _ persistence.AppendObservable = (*Journal)(nil)

// ObserveAppends implements persistence.AppendObservable.
func (j *Journal) ObserveAppends(o persistence.AppendObserver) {
	if o == nil {
		j.observe.Store(nil)
		return
	}
	j.observe.Store(&o)
}
