package s3_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/fathom-agents/fathom/internal/testenv"
	"github.com/fathom-agents/fathom/persistence/artifact"
	"github.com/fathom-agents/fathom/persistence/artifact/artifacttest"
	"github.com/fathom-agents/fathom/persistence/artifact/s3"
)

// bucket returns a fresh bucket name (created by the store on first use) and removes the
// bucket and its objects when the test ends.
func bucket(t *testing.T, m testenv.MinIO) string {
	t.Helper()
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	name := "t-" + hex.EncodeToString(b)
	t.Cleanup(func() {
		c, err := minio.New(m.Endpoint, &minio.Options{Creds: credentials.NewStaticV4(m.AccessKey, m.SecretKey, "")})
		if err != nil {
			t.Logf("cleanup: %v", err)
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for o := range c.ListObjects(ctx, name, minio.ListObjectsOptions{Recursive: true}) {
			if o.Err == nil {
				_ = c.RemoveObject(ctx, name, o.Key, minio.RemoveObjectOptions{})
			}
		}
		_ = c.RemoveBucket(ctx, name)
	})
	return name
}

func open(t *testing.T, m testenv.MinIO, bucketName string, maxSize int64) *s3.Store {
	t.Helper()
	s, err := s3.Open(s3.Config{Endpoint: m.Endpoint, AccessKey: m.AccessKey, SecretKey: m.SecretKey, Bucket: bucketName, MaxSize: maxSize, Timeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestConformance(t *testing.T) {
	m := testenv.MinIOServer(t)
	artifacttest.Run(t, func(t *testing.T, maxSize int64) artifact.Store {
		return open(t, m, bucket(t, m), maxSize)
	})
}

// TestLegacyArtifacts: objects written before tenancy, at {session_id}/{type}/{filename}
// with no tenant prefix, stay readable for their session and go with its delete.
func TestLegacyArtifacts(t *testing.T) {
	m := testenv.MinIOServer(t)
	name := bucket(t, m)
	s := open(t, m, name, 0)
	defer s.Close()
	c, err := minio.New(m.Endpoint, &minio.Options{Creds: credentials.NewStaticV4(m.AccessKey, m.SecretKey, "")})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.MakeBucket(ctx, name, minio.MakeBucketOptions{}); err != nil {
		t.Fatal(err)
	}
	artifacttest.RunLegacy(t, s, func(t *testing.T, key string, content []byte) {
		if _, err := c.PutObject(ctx, name, key, bytes.NewReader(content), int64(len(content)), minio.PutObjectOptions{ContentType: "text/plain"}); err != nil {
			t.Fatal(err)
		}
	})
	for o := range c.ListObjects(ctx, name, minio.ListObjectsOptions{Recursive: true}) {
		t.Errorf("object left after the session's delete: %s %v", o.Key, o.Err)
	}
}

// TestBucketCreatedOnceByRacingStores: stores (as on several nodes) racing to create the
// same bucket all succeed, and see each other's artifacts.
func TestBucketCreatedOnceByRacingStores(t *testing.T) {
	m := testenv.MinIOServer(t)
	name := bucket(t, m)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	stores := make([]*s3.Store, 4)
	for i := range stores {
		stores[i] = open(t, m, name, 0)
		defer stores[i].Close()
		wg.Add(1)
		go func() {
			defer wg.Done()
			ref := artifact.Ref{Tenant: "acme", SessionID: "s1", Type: artifact.TypeLogs, Filename: string(rune('a'+i)) + ".log"}
			if _, err := stores[i].Write(context.Background(), ref, []byte("x"), "text/plain"); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	infos, err := stores[0].List(context.Background(), "acme", "s1", artifact.TypeLogs)
	if err != nil || len(infos) != 4 {
		t.Fatalf("list: %v %v", infos, err)
	}
}

// TestUnreachable: a server that is not there fails fast with a plain error (not
// ErrNotFound), within the timeout.
func TestUnreachable(t *testing.T) {
	s, err := s3.Open(s3.Config{Endpoint: "127.0.0.1:1", AccessKey: "k", SecretKey: "secret", Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	start := time.Now()
	_, err = s.Write(context.Background(), artifact.Ref{Tenant: "acme", SessionID: "s1", Type: artifact.TypeData, Filename: "x"}, []byte("x"), "")
	if err == nil || errors.Is(err, artifact.ErrNotFound) || time.Since(start) > 10*time.Second {
		t.Fatalf("write to a dead server: %v after %s", err, time.Since(start))
	}
	if _, _, err := s.Read(context.Background(), "acme", "s1/data/x"); err == nil || errors.Is(err, artifact.ErrNotFound) {
		t.Fatalf("read from a dead server: %v", err)
	}
}

func TestConfig(t *testing.T) {
	for _, c := range []s3.Config{
		{},
		{Endpoint: "http://127.0.0.1:9000"},
		{Endpoint: "127.0.0.1:9000", Timeout: -1},
	} {
		if _, err := s3.Open(c); err == nil {
			t.Errorf("Open(%+v) accepted a bad config", c)
		}
	}
	c := s3.DefaultConfig()
	c.Endpoint, c.SecretKey = "127.0.0.1:9000", "hunter2"
	if s := c.String(); strings.Contains(s, "hunter2") || !strings.Contains(s, "fathom-artifacts") {
		t.Fatalf("String() = %q", s)
	}
}
