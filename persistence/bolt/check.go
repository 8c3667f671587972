package bolt

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
	"strings"

	bbolt "go.etcd.io/bbolt"

	"github.com/fathom-agents/fathom/persistence"
)

// The journal's own metadata is bucket "fathom": key "format" holds the format
// (persistence.Format) of the newest binary that opened the file for writing, as a
// big-endian uint32. A file without it is format 1.
var (
	bucketFathom = []byte("fathom")
	keyFormat    = []byte("format")
)

// ErrChecking is returned by writes to a journal whose integrity check still runs in the
// background (a file larger than Options.CheckMaxBytes): reads are served, writes wait
// for the check to pass. Retry later.
var ErrChecking = errors.New("journal: integrity check in progress; writes are refused until it passes")

// errStopped ends a check cut short by Close.
var errStopped = errors.New("journal: check stopped")

// fileFormat returns the format stamped in tx (1 when none).
func fileFormat(tx *bbolt.Tx) (int, error) {
	b := tx.Bucket(bucketFathom)
	if b == nil {
		return 1, nil
	}
	v := b.Get(keyFormat)
	if v == nil {
		return 1, nil
	}
	if len(v) != 4 {
		return 0, fmt.Errorf("%w: format stamp of %d bytes", persistence.ErrCorrupt, len(v))
	}
	return int(binary.BigEndian.Uint32(v)), nil
}

// checkFormat refuses a file written by a newer format than this binary reads.
func checkFormat(tx *bbolt.Tx, path string) error {
	f, err := fileFormat(tx)
	if err != nil {
		return fmt.Errorf("journal %s: %w", path, err)
	}
	if f > persistence.Format {
		return &persistence.FormatError{Journal: path, Found: f, Known: persistence.Format, What: "format"}
	}
	return nil
}

// StampFormat records format in the closed journal file at path as the binary of that
// format would, raising or lowering the stamp. It exists for upgrade tests and tools that
// build journals of other formats; a node never calls it.
func StampFormat(path string, format uint32) error {
	db, err := bbolt.Open(path, 0o600, nil)
	if err != nil {
		return fmt.Errorf("journal %s: %w", path, err)
	}
	defer db.Close()
	return db.Update(func(tx *bbolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bucketFathom)
		if err != nil {
			return fmt.Errorf("journal %s: stamp format: %w", path, err)
		}
		return b.Put(keyFormat, binary.BigEndian.AppendUint32(nil, format))
	})
}

// initFile creates the buckets a journal needs and stamps it with this binary's format
// (never lowering a stamp).
func initFile(db *bbolt.DB, path string) error {
	return db.Update(func(tx *bbolt.Tx) error {
		for _, b := range [][]byte{bucketStreams, bucketEvents, bucketSnapshots, bucketFathom} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return fmt.Errorf("journal %s: init buckets: %w", path, err)
			}
		}
		if err := checkFormat(tx, path); err != nil {
			return err
		}
		v := make([]byte, 4)
		binary.BigEndian.PutUint32(v, persistence.Format)
		return tx.Bucket(bucketFathom).Put(keyFormat, v)
	})
}

// streamNames returns every stream id the file knows: metadata keys and the names of the
// event and snapshot buckets (a bucket without metadata is damage too).
func streamNames(tx *bbolt.Tx) []string {
	seen := map[string]bool{}
	for _, parent := range [][]byte{bucketStreams, bucketEvents, bucketSnapshots} {
		b := tx.Bucket(parent)
		if b == nil {
			continue
		}
		c := b.Cursor()
		for k, _ := c.First(); k != nil; k, _ = c.Next() {
			seen[string(k)] = true
		}
	}
	names := make([]string, 0, len(seen))
	for n := range seen {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// verifyRecords reads every record of every stream in tx and checks it: the stream's
// metadata and every event and snapshot pass their checksums (or are format 1 records
// where the stream allows them), and the events are exactly seqs 1..head. It calls found
// with the first damaged record of each damaged stream. A page too damaged to walk
// (bbolt panics on it) is reported the same way. It returns errStopped when stop closes.
func verifyRecords(tx *bbolt.Tx, stop <-chan struct{}, found func(*persistence.RecordError)) error {
	n := 0
	tick := func() error {
		n++
		if n%1024 == 0 {
			select {
			case <-stop:
				return errStopped
			default:
			}
		}
		return nil
	}
	for _, name := range streamNames(tx) {
		if err := verifyStream(tx, name, tick, found); err != nil {
			return err
		}
	}
	return nil
}

// verifyStream checks one stream (verifyRecords).
func verifyStream(tx *bbolt.Tx, stream string, tick func() error, found func(*persistence.RecordError)) (err error) {
	bad := func(e error) {
		var re *persistence.RecordError
		if !errors.As(e, &re) {
			re = &persistence.RecordError{Stream: stream, Reason: e.Error()}
		}
		found(re)
	}
	defer func() {
		if r := recover(); r != nil {
			found(&persistence.RecordError{Stream: stream, Reason: fmt.Sprintf("page too damaged to read: %v", r)})
			err = nil
		}
	}()
	m, exists, err := getMeta(tx, stream)
	if err != nil {
		bad(err)
		return nil
	}
	if !exists {
		found(&persistence.RecordError{Stream: stream, Reason: "records without stream metadata"})
		return nil
	}
	if evs := tx.Bucket(bucketEvents).Bucket([]byte(stream)); evs != nil {
		want := uint64(1)
		c := evs.Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			if err := tick(); err != nil {
				return err
			}
			rec, err := decodeRecord(stream, k, v, m.strict(seqOf(k)), false)
			if err != nil {
				bad(err)
				return nil
			}
			if rec.Seq != want || rec.Seq > m.last {
				found(&persistence.RecordError{Stream: stream, Seq: want, Reason: fmt.Sprintf("expected seq %d (stream head %d), found seq %d", want, m.last, rec.Seq)})
				return nil
			}
			want++
		}
		if want-1 != m.last {
			found(&persistence.RecordError{Stream: stream, Seq: want, Reason: fmt.Sprintf("stream head is %d but the events end at %d", m.last, want-1)})
			return nil
		}
	} else if m.last != 0 {
		found(&persistence.RecordError{Stream: stream, Seq: 1, Reason: fmt.Sprintf("stream head is %d but it has no events", m.last)})
		return nil
	}
	if snaps := tx.Bucket(bucketSnapshots).Bucket([]byte(stream)); snaps != nil {
		c := snaps.Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			if err := tick(); err != nil {
				return err
			}
			if _, err := decodeRecord(stream, k, v, m.strict(seqOf(k)), true); err != nil {
				bad(err)
				return nil
			}
		}
	}
	return nil
}

func seqOf(k []byte) uint64 {
	if len(k) != 8 {
		return 0
	}
	return binary.BigEndian.Uint64(k)
}

// maxQuoted bounds the damaged records an error quotes.
const maxQuoted = 3

// integrityError is the error of a failed check: it wraps the first damaged record
// (a *persistence.RecordError naming session and seq) and persistence.ErrCorrupt.
func integrityError(path string, damaged []*persistence.RecordError, pageProblems error) error {
	if len(damaged) == 0 {
		return pageProblems
	}
	var more []string
	for i, d := range damaged[1:] {
		if i == maxQuoted {
			more = append(more, fmt.Sprintf("and %d more", len(damaged)-1-maxQuoted))
			break
		}
		more = append(more, fmt.Sprintf("session %s seq %d: %s", d.Stream, d.Seq, d.Reason))
	}
	extra := ""
	if len(more) > 0 {
		extra = "; also " + strings.Join(more, "; ")
	}
	if pageProblems != nil {
		extra += "; " + pageProblems.Error()
	}
	return fmt.Errorf("journal %s: %w%s (the file was not modified; run `fathom journal check --repair` to quarantine the damaged sessions and keep the rest)",
		path, damaged[0], extra)
}

// checkAll runs bbolt's page check and verifyRecords in tx and returns the error of
// whatever failed (nil when all passed).
func checkAll(tx *bbolt.Tx, path string, stop <-chan struct{}) error {
	var damaged []*persistence.RecordError
	if err := verifyRecords(tx, stop, func(e *persistence.RecordError) { damaged = append(damaged, e) }); err != nil {
		return err
	}
	return integrityError(path, damaged, checkPages(tx, path))
}
