package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/cluster"

	"github.com/fathom-agents/fathom/gateway"
	"github.com/fathom-agents/fathom/messages"
)

// runRun starts an in-process node on embedded defaults, starts one session and streams
// its events until it completes (exit 0), fails (exit 1) or waits for a human (exit 3:
// the session is saved; answer with fathom session input).
func runRun(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("run", "[flags] GOAL", stderr)
	var nf nodeFlags
	nf.register(fs, ".fathom", "warn")
	jsonOut := fs.Bool("json", false, "print one JSON object per event (type, seq, session_id, at, fields) instead of text")
	timeout := fs.Duration("timeout", 30*time.Minute, "give up (exit 1) when the session has not finished after this long")
	sessionID := fs.String("session-id", "", "id of the new session (default: generated)")
	user := fs.String("user", os.Getenv("FATHOM_USER"), "the session's user_id: whose long-term memories it reads and writes (env FATHOM_USER)")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return withUsageLine(fs, usageError("a goal is required, e.g. fathom run \"Write a haiku about event sourcing\""))
	}
	goal := strings.Join(pos, " ")
	nf.replay = replayFlags(fs, "json", "timeout", "session-id", "user")
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	n, log, err := startLocalNode(ctx, &nf, "run", stderr)
	if err != nil {
		return err
	}
	defer stopLocalNode(n, log)
	id := *sessionID
	if id == "" {
		id = gateway.NewID("s")
	}
	p := newPrinter(stdout, *jsonOut)
	p.answerFlags = nf.replay
	p.ephemeral = nf.store.ephemeral()
	sub := n.FollowDeltas(id, 0, 0)
	defer sub.Close()
	resp, err := n.Session(id).Start(&messages.StartRequest{CommandId: gateway.NewID("cmd"), Goal: goal, UserId: *user}, cluster.WithTimeout(30*time.Second))
	if err != nil {
		return &exitError{code: 1, msg: grainErrorMessage(err)}
	}
	if !*jsonOut {
		fmt.Fprintf(stdout, "session %s (events in %s)\n", resp.GetSessionId(), nf.store.where())
	}
	return followSession(ctx, sub, id, p)
}

// grainErrorMessage renders a grain error for people.
func grainErrorMessage(err error) string {
	var ge *cluster.GrainErrorResponse
	if errors.As(err, &ge) {
		return fmt.Sprintf("%s: %s", strings.ToLower(ge.Reason), ge.Message)
	}
	return err.Error()
}
