package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/fathom-agents/fathom/persistence/postgres"
)

// runMigrate applies the SQL migrations to PostgreSQL (nodes also do it at start).
func runMigrate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("migrate", "--postgres DSN", stderr)
	dsn := fs.String("postgres", os.Getenv("FATHOM_POSTGRES_DSN"), "PostgreSQL DSN (env FATHOM_POSTGRES_DSN)")
	if _, err := parseFlags(fs, args); err != nil {
		return err
	}
	if *dsn == "" {
		return usageError("--postgres DSN (or FATHOM_POSTGRES_DSN) is required")
	}
	if err := postgres.MigrateDSN(ctx, *dsn); err != nil {
		return err
	}
	fmt.Fprintln(stdout, "migrations applied")
	return nil
}
