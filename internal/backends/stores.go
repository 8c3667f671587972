// Package backends opens a node's stores — the journal and the artifact store — from
// their configuration. The node (internal/node) opens them at start; the CLI's offline
// commands (fathom session timeline/state/artifacts) open them to read without starting
// a node.
package backends

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/fathom-agents/fathom/persistence"
	"github.com/fathom-agents/fathom/persistence/artifact"
	"github.com/fathom-agents/fathom/persistence/artifact/local"
	"github.com/fathom-agents/fathom/persistence/artifact/s3"
	"github.com/fathom-agents/fathom/persistence/bolt"
	"github.com/fathom-agents/fathom/persistence/indexfacts"
	"github.com/fathom-agents/fathom/persistence/postgres"
)

// JournalFile is the embedded journal's file name inside the data directory.
const JournalFile = "journal.db"

// ArtifactsDir is the local artifact store's directory inside the data directory.
const ArtifactsDir = "artifacts"

// ErrNoJournal is returned when neither a data directory nor a PostgreSQL DSN is given.
var ErrNoJournal = errors.New("no journal: set a data directory or a PostgreSQL DSN")

// OpenJournal opens the PostgreSQL journal when dsn is set (applying migrations), else
// the embedded one in dataDir (created if missing).
func OpenJournal(ctx context.Context, dataDir, dsn string, log *slog.Logger) (persistence.Journal, error) {
	if dsn != "" {
		j, err := postgres.Open(ctx, dsn, postgres.Options{Facts: indexfacts.Of})
		if err != nil {
			return nil, fmt.Errorf("open postgres journal: %w", err)
		}
		return j, nil
	}
	if dataDir == "" {
		return nil, ErrNoJournal
	}
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return nil, fmt.Errorf("data dir %s: %w", dataDir, err)
	}
	j, err := bolt.Open(filepath.Join(dataDir, JournalFile), bolt.Options{Logger: log, Facts: indexfacts.Of})
	if err != nil {
		return nil, fmt.Errorf("open journal in %s: %w", dataDir, err)
	}
	return j, nil
}

// OpenJournalReadOnly opens the journal for reading: PostgreSQL when dsn is set, else
// the embedded journal in dataDir with a shared lock. It never creates the data dir or
// the journal file: when either is missing the error wraps os.ErrNotExist.
func OpenJournalReadOnly(ctx context.Context, dataDir, dsn string, log *slog.Logger) (persistence.Journal, error) {
	if dsn != "" {
		return OpenJournal(ctx, dataDir, dsn, log)
	}
	if dataDir == "" {
		return nil, ErrNoJournal
	}
	j, err := bolt.Open(filepath.Join(dataDir, JournalFile), bolt.Options{ReadOnly: true, Logger: log})
	if err != nil {
		return nil, fmt.Errorf("open journal in %s: %w", dataDir, err)
	}
	return j, nil
}

// ArtifactConfig selects the artifact store behind write_artifact, read_artifact and
// list_artifacts: Store when set, else an S3 bucket when S3.Endpoint is set, else the
// directory DataDir/artifacts. With none of them (no data dir) the artifact tools are
// left out.
type ArtifactConfig struct {
	// S3 configures an S3-compatible store (flags --s3-*, env FATHOM_S3_*).
	S3 s3.Config
	// MaxSize bounds one artifact's content in bytes (0 = artifact.DefaultMaxSize).
	MaxSize int64
	// Store, when set, is used as is (tests, embedding). The node closes it on Stop.
	Store artifact.Store
}

// OpenArtifacts opens the S3 store when cfg.S3.Endpoint is set, else the local store in
// dataDir/artifacts; with neither it returns nil and no error (cfg.Store is not looked
// at). where describes the store for logs, never with credentials.
func OpenArtifacts(dataDir string, cfg ArtifactConfig) (store artifact.Store, where string, err error) {
	if cfg.S3.Endpoint != "" {
		s3cfg := cfg.S3
		if s3cfg.MaxSize == 0 {
			s3cfg.MaxSize = cfg.MaxSize
		}
		s, err := s3.Open(s3cfg)
		if err != nil {
			return nil, "", fmt.Errorf("artifact store: %w", err)
		}
		return s, s3cfg.String(), nil
	}
	if dataDir == "" {
		return nil, "", nil
	}
	dir := filepath.Join(dataDir, ArtifactsDir)
	s, err := local.Open(dir, local.Config{MaxSize: cfg.MaxSize})
	if err != nil {
		return nil, "", fmt.Errorf("artifact store: %w", err)
	}
	return s, dir, nil
}
