// Package s3 is an artifact.Store in an S3-compatible bucket (AWS S3, MinIO, ...)
// through minio-go. The object key is the artifact's key (artifact.Ref.Key),
// "tenants/{tenant}/{session_id}/{type}/{filename}"; objects written before tenancy, at
// "{session_id}/{type}/{filename}", are still read, listed and deleted (artifact.Store).
// The content type is the object's Content-Type and the sha256 digest is user metadata
// (x-amz-meta-sha256). The bucket is created on first use (concurrent creators and an
// existing bucket are both fine). Every call to the server runs under the configured
// timeout.
//
// A PUT replaces an object atomically, so readers see the old or the new content. Write
// reports Overwrote from a HEAD made just before the PUT: with concurrent writers of one
// path it is best effort.
package s3

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/fathom-agents/fathom/persistence/artifact"
)

var _ artifact.Store = (*Store)(nil)

// DefaultBucket is the bucket used when Config.Bucket is empty.
const DefaultBucket = "fathom-artifacts"

// metaSHA256 is the user metadata key of the content's digest (x-amz-meta-sha256).
const metaSHA256 = "Sha256"

// Config configures an S3 store.
type Config struct {
	// Endpoint is the server's host:port (no scheme), e.g. "127.0.0.1:9000" or
	// "s3.amazonaws.com".
	Endpoint string
	// Bucket holds the artifacts (default DefaultBucket); it is created on first use.
	Bucket string
	// AccessKey and SecretKey are the credentials (static, signature v4).
	AccessKey, SecretKey string
	// Secure selects HTTPS.
	Secure bool
	// Region of the bucket; "" lets the client discover it (MinIO: us-east-1).
	Region string
	// Timeout bounds every call to the server (default 30s).
	Timeout time.Duration
	// MaxSize is the largest content Write accepts, in bytes (default
	// artifact.DefaultMaxSize).
	MaxSize int64
}

// DefaultConfig returns the defaults: bucket fathom-artifacts, 30s timeout, 10 MiB limit.
func DefaultConfig() Config {
	return Config{Bucket: DefaultBucket, Timeout: 30 * time.Second, MaxSize: artifact.DefaultMaxSize}
}

// Validate checks the configuration.
func (c Config) Validate() error {
	switch {
	case c.Endpoint == "":
		return errors.New("s3 artifact store: no endpoint")
	case strings.Contains(c.Endpoint, "://") || strings.Contains(c.Endpoint, "/"):
		return fmt.Errorf("s3 artifact store: endpoint %q must be host:port without a scheme or path (for HTTPS set Secure, --s3-secure)", c.Endpoint)
	case c.Bucket == "":
		return errors.New("s3 artifact store: no bucket")
	case c.Timeout <= 0:
		return fmt.Errorf("s3 artifact store: Timeout must be positive, got %s", c.Timeout)
	case c.MaxSize <= 0:
		return fmt.Errorf("s3 artifact store: MaxSize must be positive, got %d", c.MaxSize)
	}
	return nil
}

// String describes the store without its secret.
func (c Config) String() string {
	scheme := "http"
	if c.Secure {
		scheme = "https"
	}
	return fmt.Sprintf("s3 %s://%s/%s", scheme, c.Endpoint, c.Bucket)
}

// Store is a bucket of artifacts. It is safe for concurrent use.
type Store struct {
	cfg       Config
	client    *minio.Client
	transport *http.Transport
	closed    atomic.Bool

	bucketMu sync.Mutex
	bucketOK bool
}

// Open makes a client for the server; it does not contact it (the bucket is checked and
// created on first use).
func Open(cfg Config) (*Store, error) {
	d := DefaultConfig()
	if cfg.Bucket == "" {
		cfg.Bucket = d.Bucket
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = d.Timeout
	}
	if cfg.MaxSize == 0 {
		cfg.MaxSize = d.MaxSize
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	tr, err := minio.DefaultTransport(cfg.Secure)
	if err != nil {
		return nil, fmt.Errorf("s3 artifact store: transport: %w", err)
	}
	tr.DialContext = (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	tr.ResponseHeaderTimeout = cfg.Timeout
	client, err := minio.New(cfg.Endpoint, &minio.Options{
		Creds:     credentials.NewStaticV4(cfg.AccessKey, cfg.SecretKey, ""),
		Secure:    cfg.Secure,
		Region:    cfg.Region,
		Transport: tr,
	})
	if err != nil {
		return nil, fmt.Errorf("s3 artifact store %s: %w", cfg, err)
	}
	return &Store{cfg: cfg, client: client, transport: tr}, nil
}

// Bucket is the store's bucket.
func (s *Store) Bucket() string { return s.cfg.Bucket }

// MaxSize is the largest content Write accepts.
func (s *Store) MaxSize() int64 { return s.cfg.MaxSize }

// ensureBucket creates the bucket unless this store already saw it. Concurrent callers
// (in this process or elsewhere) all succeed: "already exists" counts as success.
func (s *Store) ensureBucket(ctx context.Context) error {
	s.bucketMu.Lock()
	defer s.bucketMu.Unlock()
	if s.bucketOK {
		return nil
	}
	ok, err := s.client.BucketExists(ctx, s.cfg.Bucket)
	if err != nil {
		return fmt.Errorf("check bucket %s: %w", s.cfg.Bucket, err)
	}
	if !ok {
		err := s.client.MakeBucket(ctx, s.cfg.Bucket, minio.MakeBucketOptions{Region: s.cfg.Region})
		if code := minio.ToErrorResponse(err).Code; err != nil && code != "BucketAlreadyOwnedByYou" && code != "BucketAlreadyExists" {
			return fmt.Errorf("create bucket %s: %w", s.cfg.Bucket, err)
		}
	}
	s.bucketOK = true
	return nil
}

// Write implements artifact.Store.
func (s *Store) Write(ctx context.Context, ref artifact.Ref, content []byte, contentType string) (artifact.Info, error) {
	ctx, cancel, err := s.begin(ctx, "write artifact")
	if err != nil {
		return artifact.Info{}, err
	}
	defer cancel()
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
	p, key := ref.Path(), ref.Key()
	if err := s.ensureBucket(ctx); err != nil {
		return artifact.Info{}, fmt.Errorf("write artifact %s: %w", key, err)
	}
	overwrote := false
	for _, k := range []string{key, ref.LegacyKey()} {
		_, err := s.client.StatObject(ctx, s.cfg.Bucket, k, minio.StatObjectOptions{})
		if err != nil && !isNotFound(err) {
			return artifact.Info{}, fmt.Errorf("write artifact %s: %w", key, err)
		}
		if overwrote = err == nil; overwrote {
			break
		}
	}
	sum := sha256.Sum256(content)
	digest := hex.EncodeToString(sum[:])
	up, err := s.client.PutObject(ctx, s.cfg.Bucket, key, bytes.NewReader(content), int64(len(content)), minio.PutObjectOptions{
		ContentType:  ct,
		UserMetadata: map[string]string{metaSHA256: digest},
	})
	if err != nil {
		return artifact.Info{}, fmt.Errorf("write artifact %s: %w", key, err)
	}
	mod := up.LastModified
	if mod.IsZero() {
		mod = time.Now()
	}
	return artifact.Info{Ref: ref, Path: p, Size: int64(len(content)), ContentType: ct, SHA256: digest, ModTime: mod, Overwrote: overwrote}, nil
}

// Read implements artifact.Store.
func (s *Store) Read(ctx context.Context, tenant, p string) ([]byte, artifact.Info, error) {
	ctx, cancel, err := s.begin(ctx, "read artifact")
	if err != nil {
		return nil, artifact.Info{}, err
	}
	defer cancel()
	ref, err := parse(tenant, p)
	if err != nil {
		return nil, artifact.Info{}, err
	}
	content, info, err := s.read(ctx, ref, ref.Key())
	if isNotFound(err) { // written before tenancy?
		content, info, err = s.read(ctx, ref, ref.LegacyKey())
	}
	if err != nil {
		return nil, artifact.Info{}, s.wrap("read", p, err)
	}
	return content, info, nil
}

// read reads ref's object at key. Errors are the server's (for isNotFound), or a
// *artifact.SizeError.
func (s *Store) read(ctx context.Context, ref artifact.Ref, key string) ([]byte, artifact.Info, error) {
	obj, err := s.client.GetObject(ctx, s.cfg.Bucket, key, minio.GetObjectOptions{})
	if err != nil {
		return nil, artifact.Info{}, err
	}
	defer obj.Close()
	oi, err := obj.Stat()
	if err != nil {
		return nil, artifact.Info{}, err
	}
	if err := artifact.CheckSize(oi.Size, s.cfg.MaxSize); err != nil {
		return nil, artifact.Info{}, err
	}
	content, err := io.ReadAll(io.LimitReader(obj, s.cfg.MaxSize+1))
	if err != nil {
		return nil, artifact.Info{}, err
	}
	if err := artifact.CheckSize(int64(len(content)), s.cfg.MaxSize); err != nil {
		return nil, artifact.Info{}, err
	}
	sum := sha256.Sum256(content)
	return content, artifact.Info{Ref: ref, Path: ref.Path(), Size: int64(len(content)), ContentType: contentTypeOr(oi.ContentType),
		SHA256: hex.EncodeToString(sum[:]), ModTime: oi.LastModified}, nil
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

// List implements artifact.Store.
func (s *Store) List(ctx context.Context, tenant, sessionID, typ string) ([]artifact.Info, error) {
	ctx, cancel, err := s.begin(ctx, "list artifacts")
	if err != nil {
		return nil, err
	}
	defer cancel() // also stops the listing goroutines when we return early
	if err := artifact.ValidateTenant(tenant); err != nil {
		return nil, err
	}
	if err := artifact.ValidateSessionID(sessionID); err != nil {
		return nil, err
	}
	prefix := sessionID + "/"
	if typ != "" {
		if err := artifact.ValidateType(typ); err != nil {
			return nil, err
		}
		prefix += typ + "/"
	}
	tenantPrefix := artifact.TenantsDir + "/" + tenant + "/"
	out, err := s.list(ctx, tenant, tenantPrefix, prefix, true)
	if err != nil {
		return nil, fmt.Errorf("list artifacts of %s: %w", sessionID, err)
	}
	var legacy []artifact.Info
	if sessionID != artifact.TenantsDir {
		legacy, err = s.list(ctx, tenant, "", prefix, true)
	} else { // its bare prefix holds every tenant's keys: list only each type's own level
		for _, t := range artifact.Types {
			if typ != "" && t != typ {
				continue
			}
			var infos []artifact.Info
			if infos, err = s.list(ctx, tenant, "", sessionID+"/"+t+"/", false); err != nil {
				break
			}
			legacy = append(legacy, infos...)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("list artifacts of %s: %w", sessionID, err)
	}
	for _, in := range legacy { // written before tenancy, unless rewritten since
		if !slices.ContainsFunc(out, func(x artifact.Info) bool { return x.Path == in.Path }) {
			out = append(out, in)
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("list artifacts of %s: %w", sessionID, err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

// list lists the artifacts of tenant whose path starts with prefix, stored under
// keyPrefix (the tenant's, or "" for those written before tenancy): every key under it,
// or (recursive false) only those at its level.
func (s *Store) list(ctx context.Context, tenant, keyPrefix, prefix string, recursive bool) ([]artifact.Info, error) {
	var out []artifact.Info
	for oi := range s.client.ListObjects(ctx, s.cfg.Bucket, minio.ListObjectsOptions{Prefix: keyPrefix + prefix, Recursive: recursive, WithMetadata: true}) {
		if oi.Err != nil {
			if code := minio.ToErrorResponse(oi.Err).Code; code == "NoSuchBucket" {
				return nil, nil // nothing written yet
			}
			return nil, oi.Err
		}
		ref, err := artifact.ParsePath(strings.TrimPrefix(oi.Key, keyPrefix))
		if err != nil {
			continue // not an artifact (written by something else)
		}
		ref.Tenant = tenant
		info := artifact.Info{Ref: ref, Path: ref.Path(), Size: oi.Size, ModTime: oi.LastModified,
			SHA256: lookup(oi.UserMetadataStripped, metaSHA256), ContentType: lookup(oi.UserMetadata, "Content-Type")}
		if info.SHA256 == "" || info.ContentType == "" { // not MinIO: metadata only from a HEAD
			st, err := s.client.StatObject(ctx, s.cfg.Bucket, oi.Key, minio.StatObjectOptions{})
			if isNotFound(err) {
				continue // deleted since listed
			}
			if err != nil {
				return nil, err
			}
			info.SHA256, info.ContentType, info.Size = lookup(st.UserMetadata, metaSHA256), st.ContentType, st.Size
		}
		info.ContentType = contentTypeOr(info.ContentType)
		out = append(out, info)
	}
	return out, nil
}

// Delete implements artifact.Store: it removes the tenant's object at p and the one
// written there before tenancy, if any.
func (s *Store) Delete(ctx context.Context, tenant, p string) error {
	ctx, cancel, err := s.begin(ctx, "delete artifact")
	if err != nil {
		return err
	}
	defer cancel()
	ref, err := parse(tenant, p)
	if err != nil {
		return err
	}
	found := false
	for _, key := range []string{ref.Key(), ref.LegacyKey()} {
		if _, err := s.client.StatObject(ctx, s.cfg.Bucket, key, minio.StatObjectOptions{}); err != nil {
			if isNotFound(err) {
				continue
			}
			return s.wrap("delete", p, err)
		}
		if err := s.client.RemoveObject(ctx, s.cfg.Bucket, key, minio.RemoveObjectOptions{}); err != nil {
			return s.wrap("delete", p, err)
		}
		found = true
	}
	if !found {
		return fmt.Errorf("delete artifact %s: %w", p, artifact.ErrNotFound)
	}
	return nil
}

// Close implements artifact.Store: it drops idle connections. It is idempotent.
func (s *Store) Close() error {
	if !s.closed.Swap(true) {
		s.transport.CloseIdleConnections()
	}
	return nil
}

// begin checks the store and ctx and bounds the call by the configured timeout.
func (s *Store) begin(ctx context.Context, op string) (context.Context, context.CancelFunc, error) {
	if s.closed.Load() {
		return nil, nil, fmt.Errorf("%s: %w", op, artifact.ErrClosed)
	}
	if err := ctx.Err(); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", op, err)
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	return ctx, cancel, nil
}

// wrap wraps a server error of op on p, as ErrNotFound for a missing object or bucket.
func (s *Store) wrap(op, p string, err error) error {
	if isNotFound(err) {
		return fmt.Errorf("%s artifact %s: %w", op, p, artifact.ErrNotFound)
	}
	return fmt.Errorf("%s artifact %s: %w", op, p, err)
}

func isNotFound(err error) bool {
	if err == nil {
		return false
	}
	switch minio.ToErrorResponse(err).Code {
	case "NoSuchKey", "NoSuchBucket", "NotFound":
		return true
	}
	return false
}

// lookup finds key in m case-insensitively.
func lookup(m map[string]string, key string) string {
	for k, v := range m {
		if strings.EqualFold(k, key) {
			return v
		}
	}
	return ""
}

func contentTypeOr(ct string) string {
	if ct == "" {
		return artifact.DefaultContentType
	}
	return ct
}
