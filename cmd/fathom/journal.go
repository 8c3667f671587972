package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"sort"

	"github.com/fathom-agents/fathom/internal/backends"
	"github.com/fathom-agents/fathom/persistence/bolt"
)

// runJournal runs `fathom journal SUB`: for now `check [--repair]`.
func runJournal(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "check" {
		return usageError("usage: fathom journal check [--repair] [--data-dir DIR]")
	}
	return runJournalCheck(ctx, args[1:], stdout, stderr)
}

// runJournalCheck verifies the whole embedded journal (pages and every record's
// checksum, whatever the file's size) and, with --repair, quarantines the damaged
// sessions and keeps the rest (bolt.Repair). Exit 0 when the journal is sound (or was
// repaired), 1 when damage was found and not repaired.
func runJournalCheck(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("journal check", "[--repair] [--data-dir DIR]", stderr)
	var store storeFlags
	store.register(fs, ".fathom")
	repair := fs.Bool("repair", false, "quarantine the damaged sessions (the original file is kept beside the journal) and keep the rest")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageError("journal check takes no arguments, got %q", pos)
	}
	if store.postgres != "" || (store.journal != "" && store.journal != "bolt") {
		return usageError("journal check verifies the embedded journal (--data-dir); PostgreSQL records are verified on every read")
	}
	path := filepath.Join(store.dataDir, backends.JournalFile)
	if !*repair {
		rep, err := bolt.Check(path, bolt.Options{})
		if err != nil {
			return err
		}
		printCheck(stdout, rep)
		if !rep.OK() {
			return &exitError{code: 1, msg: fmt.Sprintf("journal %s is damaged: run `fathom journal check --repair` to quarantine the damaged sessions and keep the rest", path)}
		}
		return nil
	}
	rep, err := bolt.Repair(path, bolt.Options{})
	if err != nil {
		return err
	}
	printCheck(stdout, rep.CheckReport)
	if rep.Backup == "" {
		fmt.Fprintln(stdout, "nothing to repair")
		return nil
	}
	for _, d := range rep.Quarantine {
		fmt.Fprintf(stdout, "quarantined session %s (seq %d: %s)\n", d.Stream, d.Seq, d.Reason)
	}
	fmt.Fprintf(stdout, "repaired: kept %d stream(s), quarantined %d; the original file is %s\n", rep.Kept, len(rep.Quarantine), rep.Backup)
	return nil
}

func printCheck(w io.Writer, rep bolt.CheckReport) {
	fmt.Fprintf(w, "journal %s: format %d, %d stream(s)\n", rep.Path, rep.Format, rep.Streams)
	for _, d := range rep.Damaged {
		fmt.Fprintf(w, "damaged: session %s seq %d: %s\n", d.Stream, d.Seq, d.Reason)
	}
	if rep.Pages != nil {
		fmt.Fprintf(w, "damaged pages: %v\n", rep.Pages)
	}
	ids := make([]string, 0, len(rep.Quarantined))
	for id := range rep.Quarantined {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		fmt.Fprintf(w, "quarantined earlier: session %s: %s\n", id, rep.Quarantined[id])
	}
	if rep.OK() {
		fmt.Fprintln(w, "ok")
	}
}
