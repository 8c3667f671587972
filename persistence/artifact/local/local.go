// Package local is an artifact.Store in a directory: the embedded default
// (DATA_DIR/artifacts). Each artifact is a plain file at its key (its tenant's prefix
// and its path), so the workspace can be browsed with ls; its metadata (content type,
// size, sha256) is a small JSON file beside it in a hidden ".meta" directory:
//
//	DIR/tenants/{tenant}/{session_id}/{type}/{filename}          the content
//	DIR/tenants/{tenant}/{session_id}/{type}/.meta/{filename}    {"content_type":..., "size":..., "sha256":...}
//	DIR/.tmp/                                                    files being written
//
// Artifacts written before tenancy are at DIR/{session_id}/{type}/{filename}: reads and
// lists fall back to them, deletes remove them (artifact.Store). Deleting a session's
// last artifact of a type removes the type's directory, and its last artifact at all
// the session's directory.
//
// Writes go to a temporary file that is synced and renamed over the target (content
// first, then metadata), so readers never see partial content. If a crash falls between
// the two renames the metadata is stale; reads and lists notice (its size or digest no
// longer match) and recompute the digest from the content. Every file operation goes
// through an os.Root opened on DIR, so no path, even a symlink planted in the directory,
// reaches outside it. Writers of one path in this process are serialised.
package local

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/fathom-agents/fathom/persistence/artifact"
)

var _ artifact.Store = (*Store)(nil)

const (
	metaDir   = ".meta"
	tmpDir    = ".tmp"
	dirPerm   = 0o750
	filePerm  = 0o640
	lockCount = 64
	// staleTemp is how old a leftover temporary file must be before Open removes it
	// (younger ones may belong to another process writing now).
	staleTemp = time.Hour
)

// Config configures a local store.
type Config struct {
	// MaxSize is the largest content Write accepts, in bytes (default
	// artifact.DefaultMaxSize).
	MaxSize int64
}

// DefaultConfig returns the defaults: a 10 MiB limit.
func DefaultConfig() Config { return Config{MaxSize: artifact.DefaultMaxSize} }

// Validate checks the configuration.
func (c Config) Validate() error {
	if c.MaxSize <= 0 {
		return fmt.Errorf("local artifact store: MaxSize must be positive, got %d", c.MaxSize)
	}
	return nil
}

// Store is a directory of artifacts. It is safe for concurrent use.
type Store struct {
	cfg    Config
	root   *os.Root
	closed atomic.Bool
	locks  [lockCount]sync.Mutex
	// dirs orders writes, which create a session's directories and put files in them
	// (shared), before deletes, which remove the directories they emptied (exclusive).
	dirs sync.RWMutex
}

// Open opens (creating it if needed) the artifact directory dir.
func Open(dir string, cfg Config) (*Store, error) {
	if cfg.MaxSize == 0 {
		cfg.MaxSize = artifact.DefaultMaxSize
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, dirPerm); err != nil {
		return nil, fmt.Errorf("create artifact dir %s: %w", dir, err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("open artifact dir %s: %w", dir, err)
	}
	s := &Store{cfg: cfg, root: root}
	if err := root.MkdirAll(tmpDir, dirPerm); err != nil {
		_ = root.Close()
		return nil, fmt.Errorf("create %s in artifact dir %s: %w", tmpDir, dir, err)
	}
	s.removeStaleTemps()
	return s, nil
}

// Dir is the store's directory.
func (s *Store) Dir() string { return s.root.Name() }

// MaxSize is the largest content Write accepts.
func (s *Store) MaxSize() int64 { return s.cfg.MaxSize }

// meta is the JSON sidecar of one artifact.
type meta struct {
	ContentType string `json:"content_type"`
	Size        int64  `json:"size"`
	SHA256      string `json:"sha256"`
}

// Write implements artifact.Store.
func (s *Store) Write(ctx context.Context, ref artifact.Ref, content []byte, contentType string) (artifact.Info, error) {
	if err := s.check(ctx, "write artifact"); err != nil {
		return artifact.Info{}, err
	}
	if err := ref.Validate(); err != nil {
		return artifact.Info{}, err
	}
	if err := artifact.CheckSize(int64(len(content)), s.cfg.MaxSize); err != nil {
		return artifact.Info{}, err
	}
	ct, err := artifact.NormalizeContentType(contentType)
	if err != nil {
		return artifact.Info{}, err
	}
	sum := sha256.Sum256(content)
	m := meta{ContentType: ct, Size: int64(len(content)), SHA256: hex.EncodeToString(sum[:])}
	mb, err := json.Marshal(m)
	if err != nil {
		return artifact.Info{}, fmt.Errorf("write artifact %s: %w", ref.Path(), err)
	}
	p, key := ref.Path(), ref.Key()
	dir := path.Dir(key)
	mu := s.lock(p)
	mu.Lock()
	defer mu.Unlock()
	s.dirs.RLock()
	defer s.dirs.RUnlock()
	if err := s.root.MkdirAll(path.Join(dir, metaDir), dirPerm); err != nil {
		return artifact.Info{}, fmt.Errorf("write artifact %s: %w", key, err)
	}
	overwrote := false
	for _, k := range []string{key, ref.LegacyKey()} {
		_, statErr := s.root.Lstat(k)
		overwrote = overwrote || statErr == nil
		if statErr != nil && !errors.Is(statErr, fs.ErrNotExist) && !errors.Is(statErr, syscall.ENOTDIR) {
			return artifact.Info{}, fmt.Errorf("write artifact %s: %w", key, statErr)
		}
	}
	if err := ctx.Err(); err != nil { // the last point where nothing has changed yet
		return artifact.Info{}, fmt.Errorf("write artifact %s: %w", key, err)
	}
	if err := s.replace(key, content); err != nil {
		return artifact.Info{}, fmt.Errorf("write artifact %s: %w", key, err)
	}
	if err := s.replace(metaPath(key), mb); err != nil {
		return artifact.Info{}, fmt.Errorf("write artifact %s metadata: %w", key, err)
	}
	if err := s.syncDir(dir); err != nil {
		return artifact.Info{}, fmt.Errorf("write artifact %s: %w", key, err)
	}
	fi, err := s.root.Stat(key)
	if err != nil {
		return artifact.Info{}, fmt.Errorf("write artifact %s: %w", key, err)
	}
	return artifact.Info{Ref: ref, Path: p, Size: m.Size, ContentType: ct, SHA256: m.SHA256, ModTime: fi.ModTime(), Overwrote: overwrote}, nil
}

// replace atomically replaces name with data: a synced temporary file renamed over it.
func (s *Store) replace(name string, data []byte) (err error) {
	tmp, err := s.tempName()
	if err != nil {
		return err
	}
	f, err := s.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, filePerm)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = s.root.Remove(tmp)
		}
	}()
	if _, err := f.Write(data); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return s.root.Rename(tmp, name)
}

func (s *Store) tempName() (string, error) {
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("temporary name: %w", err)
	}
	return path.Join(tmpDir, hex.EncodeToString(b)), nil
}

// syncDir makes the renames in dir (and its metadata directory) durable.
func (s *Store) syncDir(dir string) error {
	for _, d := range []string{dir, path.Join(dir, metaDir)} {
		f, err := s.root.Open(d)
		if err != nil {
			return err
		}
		err = f.Sync()
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("sync %s: %w", d, err)
		}
	}
	return nil
}

// Read implements artifact.Store.
func (s *Store) Read(ctx context.Context, tenant, p string) ([]byte, artifact.Info, error) {
	if err := s.check(ctx, "read artifact"); err != nil {
		return nil, artifact.Info{}, err
	}
	ref, err := parse(tenant, p)
	if err != nil {
		return nil, artifact.Info{}, err
	}
	key := ref.Key()
	f, err := s.root.Open(key)
	if errors.Is(err, fs.ErrNotExist) { // written before tenancy?
		key = ref.LegacyKey()
		f, err = s.root.Open(key)
	}
	if err != nil {
		return nil, artifact.Info{}, s.notFound("read", p, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, artifact.Info{}, fmt.Errorf("read artifact %s: %w", p, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, artifact.Info{}, fmt.Errorf("read artifact %s: %w", p, artifact.ErrNotFound)
	}
	// Read one byte past the limit: a file that grew behind our back is refused, not
	// loaded whole.
	content, err := io.ReadAll(io.LimitReader(f, s.cfg.MaxSize+1))
	if err != nil {
		return nil, artifact.Info{}, fmt.Errorf("read artifact %s: %w", p, err)
	}
	if err := artifact.CheckSize(int64(len(content)), s.cfg.MaxSize); err != nil {
		return nil, artifact.Info{}, fmt.Errorf("read artifact %s: %w", p, err)
	}
	sum := sha256.Sum256(content)
	info := artifact.Info{Ref: ref, Path: p, Size: int64(len(content)), SHA256: hex.EncodeToString(sum[:]), ModTime: fi.ModTime()}
	info.ContentType = s.readMeta(key).ContentType
	if info.ContentType == "" {
		info.ContentType = artifact.DefaultContentType
	}
	return content, info, nil
}

// parse validates tenant and path and returns the artifact's Ref.
func parse(tenant, p string) (artifact.Ref, error) {
	if err := artifact.ValidateTenant(tenant); err != nil {
		return artifact.Ref{}, err
	}
	ref, err := artifact.ParsePath(p)
	if err != nil {
		return artifact.Ref{}, err
	}
	return ref.WithTenant(tenant), nil
}

// metaPath is the sidecar of the artifact at key.
func metaPath(key string) string { return path.Join(path.Dir(key), metaDir, path.Base(key)) }

// readMeta returns the sidecar of the artifact at key, or a zero meta when it is
// missing or unreadable.
func (s *Store) readMeta(key string) meta {
	var m meta
	b, err := s.root.ReadFile(metaPath(key))
	if err != nil || json.Unmarshal(b, &m) != nil {
		return meta{}
	}
	return m
}

// List implements artifact.Store.
func (s *Store) List(ctx context.Context, tenant, sessionID, typ string) ([]artifact.Info, error) {
	if err := s.check(ctx, "list artifacts"); err != nil {
		return nil, err
	}
	if err := artifact.ValidateTenant(tenant); err != nil {
		return nil, err
	}
	if err := artifact.ValidateSessionID(sessionID); err != nil {
		return nil, err
	}
	types := artifact.Types
	if typ != "" {
		if err := artifact.ValidateType(typ); err != nil {
			return nil, err
		}
		types = []string{typ}
	}
	var out []artifact.Info
	for _, t := range types {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("list artifacts of %s: %w", sessionID, err)
		}
		dir := artifact.Ref{Tenant: tenant, SessionID: sessionID, Type: t}
		infos, err := s.listDir(dir, true)
		if err != nil {
			return nil, fmt.Errorf("list artifacts of %s: %w", sessionID, err)
		}
		legacy, err := s.listDir(dir, false)
		if err != nil {
			return nil, fmt.Errorf("list artifacts of %s: %w", sessionID, err)
		}
		out = append(out, infos...)
		for _, in := range legacy { // written before tenancy, unless rewritten since
			if !slices.ContainsFunc(infos, func(x artifact.Info) bool { return x.Filename == in.Filename }) {
				out = append(out, in)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

// listDir lists the artifacts of one tenant, session and type (dir.Filename is
// ignored): under the tenant's prefix, or (tenanted false) where they were before
// tenancy.
func (s *Store) listDir(dir artifact.Ref, tenanted bool) ([]artifact.Info, error) {
	base := path.Join(dir.SessionID, dir.Type)
	if tenanted {
		base = path.Dir(dir.Key())
	}
	d, err := s.root.Open(base)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	entries, err := d.ReadDir(-1)
	_ = d.Close()
	if err != nil {
		return nil, err
	}
	var out []artifact.Info
	for _, e := range entries {
		if !e.Type().IsRegular() || artifact.ValidateFilename(e.Name()) != nil {
			continue // .meta, anything hidden or not ours
		}
		ref := artifact.Ref{Tenant: dir.Tenant, SessionID: dir.SessionID, Type: dir.Type, Filename: e.Name()}
		info, err := s.stat(ref, path.Join(base, e.Name()))
		if errors.Is(err, fs.ErrNotExist) {
			continue // deleted since ReadDir
		}
		if err != nil {
			return nil, err
		}
		out = append(out, info)
	}
	return out, nil
}

// stat describes one artifact, stored at key, from its file and sidecar, recomputing
// the digest when the sidecar does not describe the file (a crash between the two
// renames of a write).
func (s *Store) stat(ref artifact.Ref, key string) (artifact.Info, error) {
	fi, err := s.root.Stat(key)
	if err != nil {
		return artifact.Info{}, err
	}
	m := s.readMeta(key)
	info := artifact.Info{Ref: ref, Path: ref.Path(), Size: fi.Size(), ContentType: m.ContentType, SHA256: m.SHA256, ModTime: fi.ModTime()}
	if m.Size != fi.Size() || len(m.SHA256) != sha256.Size*2 {
		b, err := s.root.ReadFile(key)
		if err != nil {
			return artifact.Info{}, err
		}
		sum := sha256.Sum256(b)
		info.SHA256, info.Size = hex.EncodeToString(sum[:]), int64(len(b))
	}
	if info.ContentType == "" {
		info.ContentType = artifact.DefaultContentType
	}
	return info, nil
}

// Delete implements artifact.Store: it removes the tenant's artifact at p and the one
// stored there before tenancy, if any.
func (s *Store) Delete(ctx context.Context, tenant, p string) error {
	if err := s.check(ctx, "delete artifact"); err != nil {
		return err
	}
	ref, err := parse(tenant, p)
	if err != nil {
		return err
	}
	mu := s.lock(p)
	mu.Lock()
	defer mu.Unlock()
	found := false
	for _, key := range []string{ref.Key(), ref.LegacyKey()} {
		fi, err := s.root.Lstat(key)
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) || (err == nil && fi.IsDir()) {
			continue
		}
		if err := s.root.Remove(key); err != nil {
			return s.notFound("delete", p, err)
		}
		found = true
		if err := s.root.Remove(metaPath(key)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("delete artifact %s metadata: %w", key, err)
		}
		s.pruneDirs(key)
	}
	if !found {
		return fmt.Errorf("delete artifact %s: %w", p, artifact.ErrNotFound)
	}
	return nil
}

// pruneDirs removes the directories of the artifact at key that its delete left empty
// (the last artifact of a deleted or expired session takes its directories with it, up
// to its tenant's). A directory that is not empty stays: Remove only removes empty ones.
func (s *Store) pruneDirs(key string) {
	s.dirs.Lock()
	defer s.dirs.Unlock()
	dir := path.Dir(key)
	for _, d := range []string{path.Join(dir, metaDir), dir, path.Dir(dir), path.Dir(path.Dir(dir))} {
		if d == "." || d == artifact.TenantsDir {
			return
		}
		if err := s.root.Remove(d); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return
		}
	}
}

// Close implements artifact.Store. It is idempotent.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	return s.root.Close()
}

// check fails op when the store is closed or ctx is done.
func (s *Store) check(ctx context.Context, op string) error {
	if s.closed.Load() {
		return fmt.Errorf("%s: %w", op, artifact.ErrClosed)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return nil
}

// notFound wraps err from opening or removing p, as ErrNotFound when the file is not
// there.
func (s *Store) notFound(op, p string, err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%s artifact %s: %w", op, p, artifact.ErrNotFound)
	}
	return fmt.Errorf("%s artifact %s: %w", op, p, err)
}

func (s *Store) lock(p string) *sync.Mutex {
	h := fnv.New32a()
	_, _ = h.Write([]byte(p))
	return &s.locks[h.Sum32()%lockCount]
}

// removeStaleTemps deletes temporary files left by writes that crashed.
func (s *Store) removeStaleTemps() {
	d, err := s.root.Open(tmpDir)
	if err != nil {
		return
	}
	entries, err := d.ReadDir(-1)
	_ = d.Close()
	if err != nil {
		return
	}
	for _, e := range entries {
		if fi, err := e.Info(); err == nil && time.Since(fi.ModTime()) > staleTemp {
			_ = s.root.Remove(path.Join(tmpDir, e.Name()))
		}
	}
}
