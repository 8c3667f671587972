package bolt

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/fathom-agents/fathom/persistence"
)

// bucketQuarantine lists the sessions a repair quarantined: stream id → why, and the
// file that still holds their records.
var bucketQuarantine = []byte("quarantine")

// CheckReport is the outcome of Check: what the whole-file check found.
type CheckReport struct {
	// Path is the journal file.
	Path string
	// Format is the format the file is stamped with (1 when none).
	Format int
	// Streams is how many streams were checked.
	Streams int
	// Damaged holds the first damaged record of each damaged stream (session and seq).
	Damaged []*persistence.RecordError
	// Pages is bbolt's page check's finding (nil: none).
	Pages error
	// Quarantined lists the sessions earlier repairs quarantined (id → why).
	Quarantined map[string]string
}

// OK reports whether the check found nothing wrong.
func (r CheckReport) OK() bool { return len(r.Damaged) == 0 && r.Pages == nil }

// Check verifies the whole file at path read-only, whatever its size: bbolt's page check
// and every record (the open check of Open, without its size limit). It fails only when
// the file cannot be opened at all (missing, locked by a writer, not a bbolt file, of a
// newer format); what it finds is in the report.
func Check(path string, opts Options) (CheckReport, error) {
	if opts.Timeout <= 0 {
		opts.Timeout = 2 * time.Second
	}
	fi, err := os.Stat(path)
	if err != nil {
		return CheckReport{}, fmt.Errorf("journal %s: %w", path, err)
	}
	db, err := openChecked(path, fi.Size(), opts, false)
	if err != nil {
		return CheckReport{}, err
	}
	defer db.Close()
	rep := CheckReport{Path: path, Quarantined: map[string]string{}}
	err = db.View(func(tx *bbolt.Tx) error {
		if rep.Format, err = fileFormat(tx); err != nil {
			return err
		}
		if tx.Bucket(bucketStreams) == nil || tx.Bucket(bucketEvents) == nil || tx.Bucket(bucketSnapshots) == nil {
			return fmt.Errorf("journal %s: %w: not a Fathom journal (its buckets are missing)", path, persistence.ErrCorrupt)
		}
		rep.Streams = len(streamNames(tx))
		if err := verifyRecords(tx, nil, func(e *persistence.RecordError) { rep.Damaged = append(rep.Damaged, e) }); err != nil {
			return err
		}
		rep.Pages = checkPages(tx, path)
		if q := tx.Bucket(bucketQuarantine); q != nil {
			return q.ForEach(func(k, v []byte) error { rep.Quarantined[string(k)] = string(v); return nil })
		}
		return nil
	})
	if err != nil {
		return CheckReport{}, err
	}
	return rep, nil
}

// RepairReport is the outcome of Repair.
type RepairReport struct {
	CheckReport
	// Quarantine lists the streams this repair left out of the journal (their first
	// damaged record each).
	Quarantine []*persistence.RecordError
	// Kept is how many streams the repaired journal holds.
	Kept int
	// Backup is the original file, kept unchanged beside the journal: it still holds
	// the quarantined sessions' records. Empty when nothing needed repair.
	Backup string
}

// Repair checks the journal at path (Check) and, when anything is damaged, rebuilds it:
// every stream whose records all verify is copied, with its snapshots and its session
// index row, into a new file; each damaged stream is quarantined (left out, and listed in
// the new file's "quarantine" bucket); the original is kept as path.damaged-TIMESTAMP
// and the new file takes its place. Bytes are copied as stored (checksums and format 1
// records alike). The file must not be open by another process.
func Repair(path string, opts Options) (RepairReport, error) {
	rep := RepairReport{}
	var err error
	if rep.CheckReport, err = Check(path, opts); err != nil {
		return rep, err
	}
	if rep.OK() {
		return rep, nil
	}
	damaged := map[string]*persistence.RecordError{}
	for _, d := range rep.Damaged {
		damaged[d.Stream] = d
	}
	tmp := path + ".repair"
	_ = os.Remove(tmp)
	if err := rebuild(path, tmp, opts, damaged, &rep); err != nil {
		_ = os.Remove(tmp)
		return rep, fmt.Errorf("repair journal %s: %w", path, err)
	}
	rep.Backup = fmt.Sprintf("%s.damaged-%s", path, time.Now().UTC().Format("20060102T150405Z"))
	if err := os.Rename(path, rep.Backup); err != nil {
		_ = os.Remove(tmp)
		return rep, fmt.Errorf("repair journal %s: keep the original: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return rep, fmt.Errorf("repair journal %s: put the repaired file in place (the original is %s): %w", path, rep.Backup, err)
	}
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
	return rep, nil
}

// rebuild copies the intact streams of the file at from into a new journal at to.
func rebuild(from, to string, opts Options, damaged map[string]*persistence.RecordError, rep *RepairReport) (err error) {
	src, err := bbolt.Open(from, 0o600, &bbolt.Options{ReadOnly: true, Timeout: opts.Timeout})
	if err != nil {
		return openError(from, err)
	}
	defer src.Close()
	dst, err := bbolt.Open(to, 0o600, &bbolt.Options{Timeout: opts.Timeout, NoSync: opts.NoSync})
	if err != nil {
		return err
	}
	defer func() {
		if cerr := dst.Close(); err == nil {
			err = cerr
		}
	}()
	if err := initFile(dst, to); err != nil {
		return err
	}
	var names []string
	if err := src.View(func(tx *bbolt.Tx) error { names = streamNames(tx); return nil }); err != nil {
		return err
	}
	for _, name := range names {
		if d := damaged[name]; d == nil {
			err := src.View(func(stx *bbolt.Tx) error {
				return dst.Update(func(dtx *bbolt.Tx) error { return copyStream(stx, dtx, name) })
			})
			var re *persistence.RecordError
			switch {
			case errors.As(err, &re):
				damaged[name] = re
			case err != nil:
				return err
			default:
				rep.Kept++
				continue
			}
		}
		rep.Quarantine = append(rep.Quarantine, damaged[name])
	}
	backup := filepath.Base(from) + ".damaged-*"
	return src.View(func(stx *bbolt.Tx) error {
		return dst.Update(func(dtx *bbolt.Tx) error {
			q, err := dtx.CreateBucketIfNotExists(bucketQuarantine)
			if err != nil {
				return err
			}
			if old := stx.Bucket(bucketQuarantine); old != nil {
				if err := old.ForEach(func(k, v []byte) error { return q.Put(k, v) }); err != nil {
					return err
				}
			}
			if old := stx.Bucket(bucketUsage); old != nil { // the tenants' daily usage (index.go)
				u, err := dtx.CreateBucketIfNotExists(bucketUsage)
				if err != nil {
					return err
				}
				if err := old.ForEach(func(k, v []byte) error { return u.Put(k, v) }); err != nil {
					return err
				}
			}
			for _, d := range rep.Quarantine {
				why := fmt.Sprintf("%s (quarantined %s; its records are in %s)", d.Error(), time.Now().UTC().Format(time.RFC3339), backup)
				if err := q.Put([]byte(d.Stream), []byte(why)); err != nil {
					return err
				}
			}
			return nil
		})
	})
}

// copyStream copies one verified stream (metadata, events, snapshots, index row) from
// stx to dtx. A page bbolt panics on is reported as a *persistence.RecordError.
func copyStream(stx, dtx *bbolt.Tx, name string) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &persistence.RecordError{Stream: name, Reason: fmt.Sprintf("page too damaged to copy: %v", r)}
		}
	}()
	key := []byte(name)
	if err := dtx.Bucket(bucketStreams).Put(key, stx.Bucket(bucketStreams).Get(key)); err != nil {
		return err
	}
	for _, parent := range [][]byte{bucketEvents, bucketSnapshots} {
		sb := stx.Bucket(parent).Bucket(key)
		if sb == nil {
			continue
		}
		db, err := dtx.Bucket(parent).CreateBucket(key)
		if err != nil {
			return err
		}
		db.FillPercent = 1.0
		if err := sb.ForEach(func(k, v []byte) error { return db.Put(k, v) }); err != nil {
			return err
		}
	}
	if si := stx.Bucket(bucketIndex); si != nil {
		if row := si.Get(key); row != nil {
			di, err := dtx.CreateBucketIfNotExists(bucketIndex)
			if err != nil {
				return err
			}
			return di.Put(key, row)
		}
	}
	return nil
}
