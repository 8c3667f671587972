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
		{"node", "run a cluster node with the HTTP gateway", runNode},
		{"migrate", "apply the PostgreSQL migrations", runMigrate},
		{"journal", "check the embedded journal: check [--repair] (verify every record; quarantine damaged sessions)", runJournal},
		{"session", "inspect and steer sessions: list | timeline ID | state ID [--at STEP] | watch ID | artifacts ID [--out DIR] | input ID STEP_ID JSON | fork ID --at STEP | send ID TEXT (journal, or a node with --addr)", runSession},
		{"sandbox", "serve the FSP v1 code sandbox over WebSocket", runSandbox},
		{"mock-llm", "serve the scripted OpenAI-compatible model", runMockLLM},
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
			return 2
		default:
			fmt.Fprintf(stderr, "fathom %s: %v\n", c.name, err)
			return 1
		}
	}
	fmt.Fprintf(stderr, "fathom: unknown command %q\n\n", args[0])
	usage(stderr)
	return 2
}

// errUsage marks bad command lines (exit code 2).
var errUsage = errors.New("usage")

func usageError(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errUsage, fmt.Sprintf(format, args...))
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "fathom: a runtime for deep agents on Proto.Actor\n\nUsage: fathom COMMAND [flags] [args]\n\nCommands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-9s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\nRun 'fathom COMMAND -h' for a command's flags.")
}

// newFlagSet returns a flag set that reports errors instead of exiting.
func newFlagSet(name, synopsis string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("fathom "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: fathom %s %s\n\nFlags:\n", name, synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// parseFlags parses args, allowing flags after positional arguments.
func parseFlags(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, fmt.Errorf("%w: %v", errUsage, err)
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
