package main

import (
	"flag"
	"fmt"
	"os"
	"strconv"

	fathomapi "github.com/fathom-agents/fathom"
	"github.com/fathom-agents/fathom/internal/backends"
	"github.com/fathom-agents/fathom/persistence/artifact"
	"github.com/fathom-agents/fathom/persistence/artifact/s3"
)

// artifactFlags select the artifact store: by name (--artifact-store), by default S3
// when --s3-endpoint is set, else the data dir. The secret key's flag has no default
// shown: it is read from the environment when the flag is not given, so -h never prints
// it.
type artifactFlags struct {
	store                                  string
	endpoint, bucket, accessKey, secretKey string
	secure                                 bool
	maxBytes                               uint64
}

func (f *artifactFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.store, "artifact-store", os.Getenv("FATHOM_ARTIFACT_STORE"), "artifact store: "+backends.ArtifactStores.Help()+" (default: s3 when --s3-endpoint is set, else filesystem; env FATHOM_ARTIFACT_STORE)")
	fs.StringVar(&f.endpoint, "s3-endpoint", os.Getenv("FATHOM_S3_ENDPOINT"), "S3-compatible endpoint host:port for artifacts; empty keeps them in DATA_DIR/artifacts (env FATHOM_S3_ENDPOINT)")
	fs.StringVar(&f.bucket, "s3-bucket", envOr("FATHOM_S3_BUCKET", s3.DefaultBucket), "bucket of the artifacts, created on first use (env FATHOM_S3_BUCKET)")
	fs.StringVar(&f.accessKey, "s3-access-key", os.Getenv("FATHOM_S3_ACCESS_KEY"), "S3 access key (env FATHOM_S3_ACCESS_KEY)")
	fs.StringVar(&f.secretKey, "s3-secret-key", "", "S3 secret key (default: env FATHOM_S3_SECRET_KEY)")
	fs.BoolVar(&f.secure, "s3-secure", os.Getenv("FATHOM_S3_SECURE") == "true" || os.Getenv("FATHOM_S3_SECURE") == "1", "use HTTPS for S3 (env FATHOM_S3_SECURE=true)")
	fs.Uint64Var(&f.maxBytes, "artifact-max-bytes", envUint64("FATHOM_ARTIFACT_MAX_BYTES", uint64(artifact.DefaultMaxSize)), "largest artifact a session may write, in bytes (env FATHOM_ARTIFACT_MAX_BYTES)")
}

// config returns the artifact store configuration.
func (f *artifactFlags) config() (fathomapi.Artifacts, error) {
	if f.maxBytes == 0 || f.maxBytes > 1<<40 {
		return fathomapi.Artifacts{}, usageError("--artifact-max-bytes %d: want 1 to 2^40", f.maxBytes)
	}
	if f.store != "" && !backends.ArtifactStores.Has(f.store) {
		return fathomapi.Artifacts{}, usageError("bad --artifact-store %q: want %s", f.store, orList(backends.ArtifactStores.Names()))
	}
	c := fathomapi.Artifacts{Name: f.store, MaxSize: int64(f.maxBytes)}
	if f.endpoint == "" {
		// The named store's own checks (s3 needs an endpoint); the data dir always has one.
		if f.store != "" {
			if _, err := backends.ArtifactStores.Prepare(f.store, backends.ArtifactStoreConfig{Dir: backends.ArtifactsDir}); err != nil {
				return fathomapi.Artifacts{}, usageError("--artifact-store: %v", err)
			}
		}
		return c, nil
	}
	secret := f.secretKey
	if secret == "" {
		secret = os.Getenv("FATHOM_S3_SECRET_KEY")
	}
	c.S3 = s3.DefaultConfig()
	c.S3.Endpoint, c.S3.Bucket, c.S3.AccessKey, c.S3.SecretKey, c.S3.Secure = f.endpoint, f.bucket, f.accessKey, secret, f.secure
	c.S3.MaxSize = c.MaxSize
	if err := c.S3.Validate(); err != nil {
		return fathomapi.Artifacts{}, usageError("%v", err)
	}
	return c, nil
}

func envUint64(key string, def uint64) uint64 {
	if v := os.Getenv(key); v != "" {
		if n, err := strconv.ParseUint(v, 10, 64); err == nil {
			return n
		}
		fmt.Fprintf(os.Stderr, "fathom: ignoring %s=%q: not a number\n", key, v)
	}
	return def
}
