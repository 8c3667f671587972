// Package migrations holds Fathom's PostgreSQL schema as numbered SQL files
// (NNNN_name.sql), embedded into the binary. persistence/postgres applies the ones not
// yet recorded in fathom_schema_migrations, in order, each in its own transaction, under
// an advisory lock so nodes starting together do not race. Applied files never change:
// schema changes are new files.
package migrations

import "embed"

// FS holds the migration files.
//
//go:embed *.sql
var FS embed.FS
