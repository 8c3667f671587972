package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/url"
	"os"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/fathom-agents/fathom/actors/session/replay"
	"github.com/fathom-agents/fathom/internal/backends"
	"github.com/fathom-agents/fathom/messages"
	"github.com/fathom-agents/fathom/persistence"
)

// sessionSubcommands are the subcommands of `fathom session` and their synopses.
var sessionSubcommands = map[string]string{
	"list":      "[--status S] [--user U] [--goal TEXT] [--since T] [--until T] [--limit N] [--addr NODE --token T [--cursor C]] [flags]",
	"timeline":  "[flags] ID",
	"state":     "[--at STEP | --at-seq SEQ] [--addr NODE --token T] [flags] ID",
	"watch":     "[--from SEQ] [--addr NODE --token T] [--json] [flags] ID",
	"artifacts": "[--json] [--out DIR] [--addr NODE --token T] [flags] ID",
}

// sessionSubcommandNames lists every subcommand of `fathom session`, in the order help
// shows them.
func sessionSubcommandNames() []string {
	return []string{"list", "timeline", "state", "watch", "artifacts", "input", "fork", "send", "cancel", "delete"}
}

// sessionSynopsis is the synopsis of session subcommand sub ("" for none).
func sessionSynopsis(sub string) string {
	if sub == "delete" {
		return sessionDeleteUsage
	}
	if s := sessionSubcommands[sub]; s != "" {
		return s
	}
	return sessionWriteSubcommands[sub]
}

// sessionReadFlags are the flags of the reading session subcommands; each subcommand
// registers only the ones it uses.
type sessionReadFlags struct {
	store       storeFlags
	json        bool
	at          int64
	atSeq, from uint64
	addr, token string
	list        listFlags
}

func (f *sessionReadFlags) register(fs *flag.FlagSet, sub string) {
	f.store.register(fs, ".fathom")
	f.at = -1
	switch sub {
	case "list", "timeline", "watch":
		fs.BoolVar(&f.json, "json", false, "print JSON")
	}
	switch sub {
	case "state":
		fs.Int64Var(&f.at, "at", -1, "the state right after step number N ended (N as the timeline and the plan number the steps, in the current plan; 0 = after planning; default: now). Not \"after N steps\": with parallel steps, step 3 may end before step 2, and --at 3 is then earlier than --at 2")
		fs.Uint64Var(&f.atSeq, "at-seq", 0, "fold the events only through this seq (0 = all; journal only)")
	case "watch":
		fs.Uint64Var(&f.from, "from", 0, "print events after this seq")
	}
	if sub == "list" {
		f.list.register(fs)
	}
	fs.StringVar(&f.addr, "addr", os.Getenv("FATHOM_ADDR"), "ask a node's gateway (host:port or URL) instead of reading the journal (env FATHOM_ADDR)")
	fs.StringVar(&f.token, "token", os.Getenv("FATHOM_TOKEN"), "bearer token for --addr (env FATHOM_TOKEN)")
}

// runSession inspects sessions: straight from the journal (no node needed), or, with
// --addr, through a node's gateway; input and fork change them (runSessionWrite).
// Reading never creates a data dir or a journal.
func runSession(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "delete" {
		return runSessionDelete(ctx, args[1:], stdout, stderr)
	}
	if len(args) > 0 && sessionWriteSubcommands[args[0]] != "" {
		return runSessionWrite(ctx, args[0], args[1:], stdout, stderr)
	}
	if len(args) == 0 || sessionSubcommands[args[0]] == "" {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
			fmt.Fprintln(stdout, "Usage: fathom session SUBCOMMAND [flags] [args]\n\nSubcommands:")
			for _, sub := range sessionSubcommandNames() {
				fmt.Fprintf(stdout, "  %-10s %s\n", sub, sessionSynopsis(sub))
			}
			fmt.Fprintln(stdout, "\nRun 'fathom session SUBCOMMAND -h' for its flags.")
			return nil
		}
		return usageError("want a subcommand: %s", strings.Join(sessionSubcommandNames(), ", "))
	}
	sub := args[0]
	if sub == "artifacts" {
		return runSessionArtifacts(ctx, args[1:], stdout, stderr)
	}
	fs := newFlagSet("session "+sub, sessionSubcommands[sub], stderr)
	var f sessionReadFlags
	f.register(fs, sub)
	pos, err := parseFlags(fs, args[1:])
	if err != nil {
		return err
	}
	if sub != "list" && len(pos) != 1 {
		return usageError("session %s needs exactly one session ID", sub)
	}
	if err := f.list.check(sub); err != nil {
		return err
	}
	if f.at >= 0 && f.atSeq > 0 {
		return usageError("--at (a step) and --at-seq (a seq) exclude each other")
	}
	if f.at > math.MaxUint32 {
		return usageError("--at %d is not a step index", f.at)
	}
	if f.addr != "" && sub == "list" {
		return sessionListRemote(ctx, f.addr, f.token, f.list, stdout, f.json)
	}
	if f.addr != "" {
		return sessionRemote(ctx, sub, pos, f.addr, f.token, f.at, f.atSeq, f.from, f.json, stdout)
	}
	if sub == "watch" {
		return watchJournal(ctx, func() (persistence.Journal, error) { return openJournalReadOnly(ctx, f.store) }, pos[0], f.from, newPrinter(stdout, f.json))
	}
	j, err := openJournalReadOnly(ctx, f.store)
	if errors.Is(err, os.ErrNotExist) {
		return noJournal(sub, pos, f.json, stdout, err)
	}
	if err != nil {
		return err
	}
	defer j.Close()
	switch sub {
	case "list":
		return sessionList(ctx, j, f.list, stdout, f.json)
	case "timeline":
		return sessionTimeline(ctx, j, pos[0], stdout, f.json)
	default:
		if f.at >= 0 {
			return sessionStateAtStep(ctx, j, pos[0], uint32(f.at), stdout)
		}
		return sessionState(ctx, j, pos[0], f.atSeq, stdout)
	}
}

// noJournal answers a reading subcommand when the data dir has no journal (err): list
// prints no session, the others report the session as not found.
func noJournal(sub string, pos []string, jsonOut bool, w io.Writer, err error) error {
	if sub == "list" {
		if !jsonOut {
			fmt.Fprintln(w, "SESSION  STATUS  EVENTS  CREATED  UPDATED  COST  GOAL")
		}
		return nil
	}
	return &exitError{code: 1, msg: fmt.Sprintf("session %q not found: %v", pos[0], err)}
}

// sessionRemote runs a session subcommand against a node's gateway.
func sessionRemote(ctx context.Context, sub string, pos []string, addr, token string, at int64, atSeq, from uint64, jsonOut bool, w io.Writer) error {
	switch sub {
	case "watch":
		return watchRemote(ctx, addr, token, pos[0], from, newPrinter(w, jsonOut))
	case "timeline":
		return timelineRemote(ctx, addr, token, pos[0], jsonOut, w)
	case "state":
		if atSeq > 0 {
			return usageError("--at-seq reads the journal; with --addr use --at STEP")
		}
		path := "/v1/sessions/" + url.PathEscape(pos[0]) + "/state"
		if at >= 0 {
			path += fmt.Sprintf("?at=%d", at)
		}
		return remoteGet(ctx, addr, token, path, w)
	default:
		return usageError("session %s reads the journal; it has no --addr form", sub)
	}
}

// openJournalReadOnly opens the journal for reading; a missing data dir or journal file
// is an error wrapping os.ErrNotExist, and nothing is created.
func openJournalReadOnly(ctx context.Context, store storeFlags) (persistence.SessionStore, error) {
	if err := store.checkJournal(); err != nil {
		return nil, err
	}
	cfg := store.journalConfig()
	cfg.Logger = slog.Default()
	return backends.OpenJournalReadOnly(ctx, cfg)
}

func sessionTimeline(ctx context.Context, j persistence.Journal, id string, w io.Writer, jsonOut bool) error {
	t := newTimelinePrinter(w, jsonOut)
	if err := replay.Events(ctx, j, id, 0, t.row); err != nil {
		return err
	}
	return t.done(id)
}

// timelinePrinter prints `session timeline`: one row per event (or its JSON), the same
// from the journal and from a node's gateway.
type timelinePrinter struct {
	w    io.Writer
	p    *printer
	json bool
	n    int
}

func newTimelinePrinter(w io.Writer, jsonOut bool) *timelinePrinter {
	return &timelinePrinter{w: w, p: newPrinter(w, jsonOut), json: jsonOut}
}

func (t *timelinePrinter) row(ev *messages.Event) error {
	t.n++
	if t.json {
		return t.p.print(ev)
	}
	text := t.p.text(ev)
	if text == "" {
		text = "\n"
	}
	_, err := fmt.Fprintf(t.w, "%4d  %s  %-18s %s", ev.GetSeq(), ev.At().Format("15:04:05.000"), ev.Type(), text)
	return err
}

// done reports a session with no event as not found.
func (t *timelinePrinter) done(id string) error {
	if t.n == 0 {
		return &exitError{code: 1, msg: fmt.Sprintf("session %q not found", id)}
	}
	return nil
}

func sessionStateAtStep(ctx context.Context, j persistence.Journal, id string, n uint32, w io.Writer) error {
	s, err := replay.StateAtStep(ctx, j, id, n)
	if err != nil {
		return &exitError{code: 1, msg: err.Error()}
	}
	return printState(s, w)
}

func sessionState(ctx context.Context, j persistence.Journal, id string, at uint64, w io.Writer) error {
	s, _, err := replay.Load(ctx, j, id, at)
	if err != nil {
		return err
	}
	if s.GetSeq() == 0 {
		return &exitError{code: 1, msg: fmt.Sprintf("session %q not found", id)}
	}
	return printState(s, w)
}

func printState(s *messages.SessionState, w io.Writer) error {
	b, err := protojson.MarshalOptions{UseProtoNames: true, Multiline: true, Indent: "  "}.Marshal(s)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}
