// Command fathom is the one Fathom binary: run a session on embedded defaults, run a
// cluster node, migrate PostgreSQL, inspect stored sessions, serve the demo model.
//
// Run `fathom help` for the subcommands and `fathom CMD -h` for their flags.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(Run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// command is one subcommand.
type command struct {
	name, summary string
	run           func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

func commands() []command {
	return []command{
		{"run", "run one session on embedded defaults and stream its events", runRun},
		{"node", "run a cluster node with the HTTP gateway; drain --addr NODE: drain a running node", runNode},
		{"migrate", "apply the PostgreSQL migrations", runMigrate},
		{"journal", "check the embedded journal: check [--repair] (verify every record; quarantine damaged sessions)", runJournal},
		{"session", "inspect and steer sessions (the journal, or a node with --addr):", runSession},
		{"memory", "list, search and delete users' long-term memories: list|search|delete --user U (the data dir or PostgreSQL, or a node with --addr)", runMemory},
		{"sandbox", "serve the FSP v1 code sandbox over WebSocket", runSandbox},
		{"mock-llm", "serve the scripted OpenAI-compatible model", runMockLLM},
		{"apikey", "make a static API key: new --tenant T --name N [--role R]... (prints the key once and its api_keys entry)", runAPIKey},
		{"tokens", "count the tokens of a file or stdin: [--model M] [FILE|-]", runTokens},
		{"version", "print the version", runVersion},
	}
}

// exitError carries a specific exit code (e.g. 1 for a failed session) without being
// printed again.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

// Run executes the subcommand in args and returns the process exit code: 0 on success,
// 1 on failure, 2 on a usage error.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		usage(stdout)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	for _, c := range commands() {
		if c.name != args[0] {
			continue
		}
		err := c.run(ctx, args[1:], stdout, stderr)
		var ee *exitError
		switch {
		case err == nil:
			return 0
		case errors.Is(err, flag.ErrHelp):
			return 0
		case errors.As(err, &ee):
			if ee.msg != "" {
				fmt.Fprintf(stderr, "fathom %s: %s\n", c.name, ee.msg)
			}
			return ee.code
		case errors.Is(err, errUsage):
			fmt.Fprintf(stderr, "fathom %s: %v\n", c.name, err)
			fmt.Fprintln(stderr, usageHint(err, args))
			return 2
		default:
			fmt.Fprintf(stderr, "fathom %s: %v\n", c.name, err)
			return 1
		}
	}
	fmt.Fprintf(stderr, "fathom: unknown command %q\nRun 'fathom help' for the commands.\n", args[0])
	return 2
}

// errUsage marks bad command lines (exit code 2).
var errUsage = errors.New("usage")

func usageError(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errUsage, fmt.Sprintf(format, args...))
}

// usageLineError is a usage error that carries its command's one-line synopsis, which
// Run prints after the error instead of the whole flag list.
type usageLineError struct {
	err  error
	line string
}

func (e *usageLineError) Error() string { return e.err.Error() }
func (e *usageLineError) Unwrap() error { return e.err }

// withUsageLine attaches fs's one-line synopsis to the usage error err.
func withUsageLine(fs *flag.FlagSet, err error) error {
	var b strings.Builder
	out := fs.Output()
	fs.SetOutput(&b)
	fs.Usage()
	fs.SetOutput(out)
	line, _, _ := strings.Cut(b.String(), "\n")
	return &usageLineError{err: err, line: line}
}

// usageHint is the one line printed under a usage error: the command's synopsis when
// the error carries it, and where its flags are listed.
func usageHint(err error, args []string) string {
	cmd := args[0]
	if cmd == "session" && len(args) > 1 && sessionSynopsis(args[1]) != "" {
		cmd += " " + args[1]
	}
	var le *usageLineError
	if errors.As(err, &le) && le.line != "" {
		return fmt.Sprintf("%s   (fathom %s -h lists the flags)", le.line, cmd)
	}
	return fmt.Sprintf("Run 'fathom %s -h' for its usage and flags.", cmd)
}

// usage prints every command, each session subcommand on a line of its own.
func usage(w io.Writer) {
	fmt.Fprintln(w, "fathom: a runtime for deep agents on Proto.Actor\n\nUsage: fathom COMMAND [flags] [args]\n\nCommands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-9s %s\n", c.name, c.summary)
		if c.name == "session" {
			for _, sub := range sessionSubcommandNames() {
				fmt.Fprintf(w, "    %-10s %s\n", sub, sessionSynopsis(sub))
			}
		}
	}
	fmt.Fprintln(w, "\nRun 'fathom COMMAND -h' (or 'fathom session SUBCOMMAND -h') for a command's flags.")
}

// newFlagSet returns a flag set that reports errors instead of exiting. Its Usage (and
// -h) prints the synopsis and every flag to fs.Output(); parse errors print only the
// error and the synopsis (parseFlags, Run).
func newFlagSet(name, synopsis string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("fathom "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: fathom %s %s\n\nFlags:\n", name, synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// parseFlags parses args, allowing flags after positional arguments. -h prints the
// flags; any other flag error is a usage error carrying the one-line synopsis.
func parseFlags(fs *flag.FlagSet, args []string) ([]string, error) {
	out := fs.Output()
	fs.SetOutput(io.Discard) // the flag package would print the error and every flag
	defer fs.SetOutput(out)
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			fs.SetOutput(out)
			if errors.Is(err, flag.ErrHelp) {
				fs.Usage()
				return nil, err
			}
			return nil, withUsageLine(fs, fmt.Errorf("%w: %v", errUsage, err))
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
