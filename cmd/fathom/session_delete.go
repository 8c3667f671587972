package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"time"

	"github.com/fathom-agents/fathom/gateway"
)

// sessionDeleteUsage is `fathom session delete`'s synopsis.
const sessionDeleteUsage = "[--addr NODE --token T] [--json] [flags] ID"

// runSessionDelete deletes a completed, failed or cancelled session (its journal,
// snapshots, vectors and artifacts): through a node's gateway (DELETE /v1/sessions/{id})
// with --addr, else on an in-process node over the data dir or PostgreSQL. A session
// that has not ended is refused (exit 1) and nothing is deleted.
func runSessionDelete(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("session delete", sessionDeleteUsage, stderr)
	var nf nodeFlags
	nf.register(fs, ".fathom", "warn")
	jsonOut := fs.Bool("json", false, "print the answer as JSON")
	addr := fs.String("addr", os.Getenv("FATHOM_ADDR"), "ask a node's gateway (host:port or URL) instead of running an in-process node (env FATHOM_ADDR)")
	token := fs.String("token", os.Getenv("FATHOM_TOKEN"), "bearer token for --addr (env FATHOM_TOKEN)")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageError("session delete needs exactly one session ID")
	}
	id := pos[0]
	if *addr != "" {
		if *jsonOut {
			return remoteCall(ctx, http.MethodDelete, *addr, *token, "/v1/sessions/"+url.PathEscape(id), nil, stdout)
		}
		if err := remoteCall(ctx, http.MethodDelete, *addr, *token, "/v1/sessions/"+url.PathEscape(id), nil, io.Discard); err != nil {
			return err
		}
		_, err := fmt.Fprintf(stdout, "deleted session %s\n", id)
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := refuseEarly(ctx, nf.store, "delete", id); err != nil {
		return err
	}
	n, log, err := startLocalNode(ctx, &nf, "session delete", stderr)
	if err != nil {
		return err
	}
	defer stopLocalNode(n, log)
	err = n.Delete(ctx, id)
	switch {
	case errors.Is(err, gateway.ErrSessionNotFound):
		return &exitError{code: 1, msg: fmt.Sprintf("session %q not found", id)}
	case errors.Is(err, gateway.ErrSessionNotTerminal):
		return &exitError{code: 1, msg: fmt.Sprintf("%v (cancel it first: fathom session cancel %s)", err, id)}
	case err != nil:
		return err
	}
	if *jsonOut {
		return json.NewEncoder(stdout).Encode(gateway.DeletedSession{SessionID: id, Deleted: true})
	}
	_, err = fmt.Fprintf(stdout, "deleted session %s\n", id)
	return err
}
