package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/cluster"

	"github.com/fathom-agents/fathom/actors/session"
	"github.com/fathom-agents/fathom/gateway"
	"github.com/fathom-agents/fathom/internal/node"
	"github.com/fathom-agents/fathom/messages"
)

// runRun starts an in-process node on embedded defaults, starts one session and streams
// its events until it completes (exit 0) or fails (exit 1).
func runRun(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("run", "[flags] GOAL", stderr)
	var nf nodeFlags
	nf.register(fs, ".fathom", "warn")
	jsonOut := fs.Bool("json", false, "print one JSON object per event (type, seq, session_id, at, fields) instead of text")
	timeout := fs.Duration("timeout", 30*time.Minute, "give up (exit 1) when the session has not finished after this long")
	sessionID := fs.String("session-id", "", "id of the new session (default: generated)")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		fs.Usage()
		return usageError("a goal is required, e.g. fathom run \"Write a haiku about event sourcing\"")
	}
	goal := strings.Join(pos, " ")
	log, err := nf.logs.logger(stderr)
	if err != nil {
		return err
	}
	cfg, err := nf.config(log, stderr)
	if err != nil {
		return err
	}
	if cfg.Cluster.Provider != "local" {
		return usageError("fathom run is a single in-process node; use fathom node to join a cluster")
	}
	// Embedded defaults: without a sandbox URL, code_execute runs in a local sandbox.
	cfg.Sandbox.Local = cfg.Sandbox.Client.URL == ""
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	n, err := node.Start(ctx, cfg)
	if err != nil {
		return err
	}
	defer func() {
		sctx, scancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer scancel()
		if err := n.Stop(sctx); err != nil {
			log.Warn("node stop", "error", err)
		}
	}()
	if n.UsesDemoModel() {
		fmt.Fprintln(stderr, "fathom: no model API key is set: using the built-in demo model (set OPENAI_API_KEY or, with --llm-api anthropic, ANTHROPIC_API_KEY, and FATHOM_MODEL for a real one)")
	}
	id := *sessionID
	if id == "" {
		id = gateway.NewID("s")
	}
	p := newPrinter(stdout, *jsonOut)
	sub := n.Feed().SubscribeWithDeltas(id, 0, 0)
	defer sub.Close()
	resp, err := n.Session(id).Start(&messages.StartRequest{CommandId: gateway.NewID("cmd"), Goal: goal}, cluster.WithTimeout(30*time.Second))
	if err != nil {
		return &exitError{code: 1, msg: grainErrorMessage(err)}
	}
	if !*jsonOut {
		where := "data dir " + cfg.DataDir
		if cfg.PostgresDSN != "" {
			where = "PostgreSQL"
		}
		fmt.Fprintf(stdout, "session %s (events in %s)\n", resp.GetSessionId(), where)
	}
	for {
		u, err := sub.NextUpdate(ctx)
		if err != nil {
			if errors.Is(err, context.DeadlineExceeded) {
				return &exitError{code: 1, msg: fmt.Sprintf("session %s did not finish within %s; it resumes on the next start (see fathom session state %s)", id, *timeout, id)}
			}
			if errors.Is(err, context.Canceled) {
				return &exitError{code: 130, msg: fmt.Sprintf("interrupted; session %s is saved and can be inspected with fathom session timeline %s", id, id)}
			}
			return err
		}
		if u.IsDelta {
			if err := p.delta(u.Delta); err != nil {
				return err
			}
			continue
		}
		ev, err := session.DecodeRecord(u.Record)
		if err != nil {
			return err
		}
		if err := p.print(ev); err != nil {
			return err
		}
		switch ev.GetPayload().(type) {
		case *messages.Event_SessionCompleted:
			return nil
		case *messages.Event_SessionFailed:
			return &exitError{code: 1, msg: "session failed: " + ev.GetSessionFailed().GetError()}
		}
	}
}

// grainErrorMessage renders a grain error for people.
func grainErrorMessage(err error) string {
	var ge *cluster.GrainErrorResponse
	if errors.As(err, &ge) {
		return fmt.Sprintf("%s: %s", strings.ToLower(ge.Reason), ge.Message)
	}
	return err.Error()
}
