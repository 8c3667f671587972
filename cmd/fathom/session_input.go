package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/cluster"

	fathomapi "github.com/fathom-agents/fathom"
	"github.com/fathom-agents/fathom/actors/session/core"
	"github.com/fathom-agents/fathom/actors/session/replay"
	"github.com/fathom-agents/fathom/gateway"
	"github.com/fathom-agents/fathom/live/feed"
	"github.com/fathom-agents/fathom/messages"
)

// exitAwaitingHuman is the exit code of a command that stopped following a session
// because it waits for a human (hitl_requested): answer with `fathom session input`.
const exitAwaitingHuman = 3

// sessionWriteSubcommands are the subcommands of `fathom session` that change a session.
var sessionWriteSubcommands = map[string]string{
	"input":  "[--request-id R] [--addr NODE --token T] [flags] ID STEP_ID JSON",
	"fork":   "--at STEP | --at-seq SEQ [--new-id ID] [--addr NODE --token T] [flags] ID",
	"cancel": "[--reason TEXT] [--by NAME] [--addr NODE --token T] [flags] ID",
	"send":   "[--addr NODE --token T] [flags] ID TEXT",
}

// runSessionWrite answers a human-input request (input), forks a session (fork),
// cancels one (cancel) or sends a completed one a follow-up message (send):
// through a node's gateway with --addr, else on an in-process node over the data dir
// (or PostgreSQL), which then runs the session on, printing its events until it ends
// (exit 0, or 1 when it failed) or waits for a human again (exit 3).
func runSessionWrite(ctx context.Context, sub string, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("session "+sub, sessionWriteSubcommands[sub], stderr)
	var nf nodeFlags
	nf.register(fs, ".fathom", "warn")
	jsonOut := fs.Bool("json", false, "print JSON")
	addr := fs.String("addr", os.Getenv("FATHOM_ADDR"), "send it to a node's gateway (host:port or URL) instead of running an in-process node (env FATHOM_ADDR)")
	token := fs.String("token", os.Getenv("FATHOM_TOKEN"), "bearer token for --addr (env FATHOM_TOKEN)")
	commandID := fs.String("command-id", "", "makes a retry safe: the same id is applied once (default: generated)")
	requestID, at, newID, atSeq := new(string), new(int64), new(string), new(uint64)
	*at = -1
	reason, by := new(string), new(string)
	switch sub {
	case "input":
		fs.StringVar(requestID, "request-id", "", "the request to answer, when the step has several open (an ask_human call's idempotency key)")
	case "cancel":
		fs.StringVar(reason, "reason", "", "why the session is cancelled (recorded in session_cancelled)")
		fs.StringVar(by, "by", "cli", "who cancels it (recorded in session_cancelled)")
	case "send":
	default:
		fs.Int64Var(at, "at", -1, "fork right after step number N ended (as session state --at N: N as the plan numbers the steps; 0 = after planning). Not \"after N steps\": with parallel steps --at 3 can be earlier than --at 2")
		fs.Uint64Var(atSeq, "at-seq", 0, "instead of --at: the source event to fork after, in any turn (a turn's plan_created, a step's end, or a turn's session_completed)")
		fs.StringVar(newID, "new-id", "", "the new session's id (default: generated)")
	}
	timeout := fs.Duration("timeout", 30*time.Minute, "in-process: stop following after this long (the session resumes on the next start)")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	nf.replay = replayFlags(fs, "json", "timeout", "command-id", "request-id", "reason", "by", "at", "at-seq", "new-id", "addr", "token")
	req := &gateway.Request{Op: sub, CommandID: *commandID}
	switch sub {
	case "input":
		if len(pos) != 3 {
			return usageError("session input needs ID STEP_ID JSON, e.g. fathom session input s-1 step-2 '{\"approved\":true}'")
		}
		req.SessionID, req.StepID, req.RequestID = pos[0], pos[1], *requestID
		req.Input = inputJSON(pos[2])
	case "cancel":
		if len(pos) != 1 {
			return usageError("session cancel needs exactly one session ID")
		}
		req.SessionID, req.Reason, req.By = pos[0], *reason, *by
	case "send":
		if len(pos) != 2 || strings.TrimSpace(pos[1]) == "" {
			return usageError("session send needs ID TEXT, e.g. fathom session send s-1 'and in French?'")
		}
		req.SessionID, req.Content = pos[0], pos[1]
	case "fork":
		if len(pos) != 1 {
			return usageError("session fork needs exactly one session ID")
		}
		req.SessionID, req.NewSessionID = pos[0], *newID
		switch {
		case *atSeq > 0 && *at >= 0:
			return usageError("session fork takes --at STEP or --at-seq SEQ, not both")
		case *atSeq > 0:
			req.Seq = atSeq
		case *at < 0 || *at > math.MaxUint32:
			return usageError("session fork needs --at STEP (0 = after planning, N = right after step number N ended) or --at-seq SEQ")
		default:
			idx := uint32(*at)
			req.StepIndex = &idx
		}
	}
	if req.CommandID == "" {
		req.CommandID = gateway.NewID("cmd")
	} else {
		nf.commandIDGiven = true
	}
	if *addr != "" {
		route := sub
		if sub == "send" {
			route = "messages"
		}
		path := "/v1/sessions/" + url.PathEscape(req.SessionID) + "/" + route
		req.Op, req.SessionID = "", ""
		return remotePost(ctx, *addr, *token, path, req, stdout)
	}
	return sessionWriteLocal(ctx, nf, req, *jsonOut, *timeout, stdout, stderr)
}

// inputJSON is the answer as given on the command line: JSON as is, anything else as a
// JSON string.
func inputJSON(arg string) json.RawMessage {
	if t := strings.TrimSpace(arg); t != "" && json.Valid([]byte(t)) {
		return json.RawMessage(t)
	}
	b, _ := json.Marshal(arg) // a string always marshals
	return b
}

// sessionWriteLocal runs req on an in-process node and follows the session it changed.
func sessionWriteLocal(ctx context.Context, nf nodeFlags, req *gateway.Request, jsonOut bool, timeout time.Duration, stdout, stderr io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if req.Op == "cancel" && !nf.commandIDGiven { // a retried command id may be a duplicate the grain acknowledges
		if err := refuseEarly(ctx, nf.store, req.Op, req.SessionID); err != nil {
			return err
		}
	}
	n, log, err := startLocalNode(ctx, &nf, "session "+req.Op, stderr)
	if err != nil {
		return err
	}
	defer stopLocalNode(n, log)
	p := newPrinter(stdout, jsonOut)
	p.answerFlags = nf.replay
	call := cluster.WithTimeout(30 * time.Second)
	switch req.Op {
	case "input":
		st, err := n.Session(req.SessionID).GetState(&messages.GetStateRequest{}, call)
		if err != nil {
			return &exitError{code: 1, msg: grainErrorMessage(err)}
		}
		p.resume(st.GetState()) // the printer joins after the plan and the start
		sub := n.FollowDeltas(req.SessionID, st.GetState().GetSeq(), 0)
		defer sub.Close()
		_, err = n.Session(req.SessionID).ProvideInput(&messages.ProvideInputRequest{
			CommandId: req.CommandID, StepId: req.StepID, RequestId: req.RequestID, Input: string(req.Input),
		}, call)
		if err != nil {
			return &exitError{code: 1, msg: grainErrorMessage(err)}
		}
		return followSession(ctx, sub, req.SessionID, p)
	case "send":
		// The follow-up's turn is printed from its message_received to its end.
		st, err := n.Session(req.SessionID).GetState(&messages.GetStateRequest{}, call)
		if err != nil {
			return &exitError{code: 1, msg: grainErrorMessage(err)}
		}
		sub := n.FollowDeltas(req.SessionID, st.GetState().GetSeq(), 0)
		defer sub.Close()
		if _, err := n.Session(req.SessionID).Send(&messages.SendRequest{CommandId: req.CommandID, Content: req.Content}, call); err != nil {
			return &exitError{code: 1, msg: grainErrorMessage(err)}
		}
		return followSession(ctx, sub, req.SessionID, p)
	case "cancel":
		resp, err := n.Session(req.SessionID).Cancel(&messages.CancelRequest{CommandId: req.CommandID, Reason: req.Reason, By: req.By}, call)
		if err != nil {
			return &exitError{code: 1, msg: grainErrorMessage(err)}
		}
		if jsonOut {
			return json.NewEncoder(stdout).Encode(map[string]any{"seq": resp.GetSeq(), "duplicate": resp.GetDuplicate(), "command_id": req.CommandID})
		}
		fmt.Fprintf(stdout, "session %s cancelled (seq %d)\n", req.SessionID, resp.GetSeq())
		return nil
	default:
		id := req.NewSessionID
		if id == "" {
			id = gateway.NewID("s")
		}
		sub := n.FollowDeltas(id, 0, 0)
		defer sub.Close()
		fr := &messages.ForkRequest{CommandId: req.CommandID, SourceSessionId: req.SessionID}
		where := ""
		if req.Seq != nil {
			fr.Seq, where = *req.Seq, fmt.Sprintf("its seq %d", *req.Seq)
		} else {
			fr.StepIndex, where = *req.StepIndex, fmt.Sprintf("step %d", *req.StepIndex)
		}
		resp, err := n.Session(id).Fork(fr, call)
		if err != nil {
			return &exitError{code: 1, msg: grainErrorMessage(err)}
		}
		if !jsonOut {
			fmt.Fprintf(stdout, "session %s: a fork of %s after %s\n", resp.GetSessionId(), req.SessionID, where)
		}
		if st, err := n.Session(id).GetState(&messages.GetStateRequest{}, call); err == nil &&
			st.GetState().GetStatus() == messages.SessionStatus_SESSION_STATUS_COMPLETED && st.GetState().GetSeq() == resp.GetSeq() {
			// Forked at a turn's end: nothing runs until a follow-up message. (A fork that
			// already ran to its end since has events after resp's seq: they are printed.)
			if jsonOut {
				return json.NewEncoder(stdout).Encode(map[string]any{"session_id": id, "status": st.GetState().GetStatus().String(), "seq": resp.GetSeq()})
			}
			fmt.Fprintf(stdout, "the fork is completed (forked at the end of a turn): continue it with fathom session send %s TEXT\n", id)
			return nil
		}
		p.skipUntilFork = true
		return followSession(ctx, sub, id, p)
	}
}

// startLocalNode starts the in-process node of run and the session write commands: a
// single local member on the data dir (or PostgreSQL), with a local sandbox unless one
// is configured.
func startLocalNode(ctx context.Context, nf *nodeFlags, cmd string, stderr io.Writer) (*fathomapi.Node, *slog.Logger, error) {
	log, err := nf.logs.logger(stderr)
	if err != nil {
		return nil, nil, err
	}
	cfg, err := nf.config(log, stderr)
	if err != nil {
		return nil, nil, err
	}
	if cfg.Cluster.Provider != "local" {
		return nil, nil, usageError("fathom %s runs a single in-process node; use fathom node to join a cluster", cmd)
	}
	if callsModel(cmd) {
		if err := checkModelEndpoint(ctx, cfg.LLM); err != nil {
			return nil, nil, err
		}
	}
	// Embedded defaults: without a sandbox URL, code_execute runs in a local sandbox. A
	// delete runs no tool (only ended sessions are deleted): it starts none, which saves
	// the sandbox's isolation and language probes.
	cfg.Sandbox.Local = cfg.Sandbox.Client.URL == "" && cmd != "session delete" && !strings.HasPrefix(cmd, "memory ")
	n, err := fathomapi.Start(ctx, cfg)
	if err != nil {
		return nil, nil, nf.startError(err)
	}
	if n.UsesDemoModel() && callsModel(cmd) {
		fmt.Fprintln(stderr, "fathom: no model API key is set: using the built-in demo model (set OPENAI_API_KEY or, with --llm-api anthropic, ANTHROPIC_API_KEY, and FATHOM_MODEL for a real one)")
	}
	return n, log, nil
}

// callsModel reports whether in-process command cmd may call the model: cancel and
// delete never do (no endpoint check, no demo-model notice).
func callsModel(cmd string) bool {
	return cmd != "session cancel" && cmd != "session delete" && !strings.HasPrefix(cmd, "memory ")
}

// refuseEarly answers from the journal, before a node starts, a cancel or delete the
// session grain would refuse: an unknown session, a cancel of an ended session, a delete
// of one that has not ended. It returns nil when the command may go on (also when the
// journal cannot be read here: the node then decides).
func refuseEarly(ctx context.Context, store storeFlags, op, id string) error {
	j, err := openJournalReadOnly(ctx, store)
	if errors.Is(err, os.ErrNotExist) {
		return &exitError{code: 1, msg: fmt.Sprintf("session %q not found", id)}
	}
	if err != nil {
		return nil
	}
	defer j.Close()
	s, _, err := replay.Load(ctx, j, id, 0)
	switch {
	case err != nil:
		return nil
	case s.GetSeq() == 0:
		return &exitError{code: 1, msg: fmt.Sprintf("session %q not found", id)}
	case op == "cancel" && core.Terminal(s):
		return &exitError{code: 1, msg: fmt.Sprintf("failed_precondition: session %s has ended (%s): nothing to cancel", id, s.GetStatus())}
	case op == "delete" && !core.Terminal(s):
		return &exitError{code: 1, msg: fmt.Sprintf("%v (cancel it first: fathom session cancel %s)", gateway.ErrSessionNotTerminal, id)}
	}
	return nil
}

func stopLocalNode(n *fathomapi.Node, log *slog.Logger) {
	sctx, scancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer scancel()
	if err := n.Close(sctx); err != nil {
		log.Warn("node stop", "error", err)
	}
}

// followSession prints the session's events from sub until it ends (nil, or exit 1
// when it failed) or waits for a human (exit 3). A deadline or Ctrl-C leaves it saved.
func followSession(ctx context.Context, sub *feed.Subscription, id string, p *printer) error {
	for {
		u, err := sub.NextUpdate(ctx)
		if err != nil {
			if errors.Is(err, context.DeadlineExceeded) {
				return &exitError{code: 1, msg: fmt.Sprintf("session %s did not finish in time; it resumes on the next start (see fathom session state %s)", id, id)}
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
		ev := u.Event
		if p.skipUntilFork { // a fork's copied past: print from its session_forked on
			if ev.GetSessionForked() == nil {
				_ = p.text(ev) // not shown, but the plan it carries numbers the steps
				continue
			}
			p.skipUntilFork = false
		}
		if err := p.print(ev); err != nil {
			return err
		}
		switch e := ev.GetPayload().(type) {
		case *messages.Event_SessionCompleted:
			return nil
		case *messages.Event_SessionFailed:
			return &exitError{code: 1, msg: "session failed: " + e.SessionFailed.GetError()}
		case *messages.Event_SessionCancelled:
			return &exitError{code: 1, msg: "session cancelled: " + e.SessionCancelled.GetReason()}
		case *messages.Event_HitlRequested:
			if p.ephemeral {
				return &exitError{code: exitAwaitingHuman, msg: fmt.Sprintf("session %s waits for a human (request %s of step %s), but the memory journal keeps nothing after fathom exits: the session is lost; run it on a durable journal (--journal bolt or postgres) to answer it later",
					id, e.HitlRequested.GetRequestId(), e.HitlRequested.GetStepId())}
			}
			return &exitError{code: exitAwaitingHuman, msg: fmt.Sprintf("session %s waits for a human (request %s of step %s); it is saved: answer with fathom session input%s %s %s JSON",
				id, e.HitlRequested.GetRequestId(), e.HitlRequested.GetStepId(), p.answerFlags, id, e.HitlRequested.GetStepId())}
		}
	}
}

// remotePost sends body as JSON to path on the node and copies the JSON answer to w.
func remotePost(ctx context.Context, addr, token, path string, body any, w io.Writer) error {
	return remoteCall(ctx, http.MethodPost, addr, token, path, body, w)
}
