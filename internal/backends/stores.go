// Package backends opens a node's stores — the journal and the artifact store — from
// their configuration. The node (internal/node) opens them at start; the CLI's offline
// commands (fathom session timeline/state/artifacts) open them to read without starting
// a node.
package backends

import (
	"context"
	"errors"
	"path/filepath"

	"github.com/fathom-agents/fathom/persistence"
	"github.com/fathom-agents/fathom/persistence/artifact"
	"github.com/fathom-agents/fathom/persistence/artifact/s3"
)

// JournalFile is the embedded journal's file name inside the data directory.
const JournalFile = "journal.db"

// ArtifactsDir is the local artifact store's directory inside the data directory.
const ArtifactsDir = "artifacts"

// ErrNoJournal is returned when neither a data directory nor a PostgreSQL DSN is given.
var ErrNoJournal = errors.New("no journal: set a data directory or a PostgreSQL DSN")

// OpenJournal opens the journal cfg names (JournalName: cfg.Name, else PostgreSQL when
// cfg.DSN is set, applying migrations, else the embedded one in cfg.DataDir, created if
// missing), through Journals.
func OpenJournal(ctx context.Context, cfg JournalConfig) (persistence.SessionStore, error) {
	cfg.ReadOnly = false
	return Journals.Open(ctx, JournalName(cfg), cfg)
}

// OpenJournalReadOnly opens the journal cfg names for reading: PostgreSQL, or the
// embedded journal in cfg.DataDir with a shared lock. It never creates the data dir or
// the journal file: when either is missing the error wraps os.ErrNotExist. The memory
// journal cannot be read from outside its node (ErrMemoryReadOnly).
func OpenJournalReadOnly(ctx context.Context, cfg JournalConfig) (persistence.SessionStore, error) {
	cfg.ReadOnly = true
	return Journals.Open(ctx, JournalName(cfg), cfg)
}

// ArtifactConfig selects the artifact store behind write_artifact, read_artifact and
// list_artifacts: Store when set, else the backend Name (ArtifactStores), by default
// (ArtifactStoreName) an S3 bucket when S3.Endpoint is set, else the directory
// DataDir/artifacts. With none of them (no data dir) the artifact tools are left out.
type ArtifactConfig struct {
	// Name is the artifact store's backend ("filesystem", "s3"; flag --artifact-store,
	// env FATHOM_ARTIFACT_STORE); "" means ArtifactStoreName's default.
	Name string
	// S3 configures an S3-compatible store (flags --s3-*, env FATHOM_S3_*).
	S3 s3.Config
	// MaxSize bounds one artifact's content in bytes (0 = artifact.DefaultMaxSize).
	MaxSize int64
	// Store, when set, is used as is (tests, embedding). The node closes it on Stop.
	Store artifact.Store
}

// OpenArtifacts opens the artifact store cfg selects (cfg.Name, else the S3 store when
// cfg.S3.Endpoint is set, else the local store in dataDir/artifacts); with none it
// returns nil and no error (cfg.Store is not looked at). name is the backend's, where
// describes the store for logs, never with credentials.
func OpenArtifacts(dataDir string, cfg ArtifactConfig) (store artifact.Store, name, where string, err error) {
	sc := ArtifactStoreConfig{S3: cfg.S3, MaxSize: cfg.MaxSize}
	if dataDir != "" {
		sc.Dir = filepath.Join(dataDir, ArtifactsDir)
	}
	name = ArtifactStores.Choose(cfg.Name, sc)
	if name == "" {
		return nil, "", "", nil
	}
	s, err := ArtifactStores.Open(context.Background(), name, sc)
	if err != nil {
		return nil, "", "", err
	}
	return s, name, ArtifactStores.Where(name, sc), nil
}
