package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"
)

// runNodeDrain drains a running node through its gateway (POST /v1/node/drain, an admin
// credential): the node's sessions start no call, finish the running ones (up to the
// node's --drain-timeout) and move to the other members; the command returns once the
// node drained and prints what the drain did. Then stop the node's process.
func runNodeDrain(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("node drain", "--addr NODE [flags]", stderr)
	addr := fs.String("addr", os.Getenv("FATHOM_ADDR"), "the node's gateway (host:port or URL) (env FATHOM_ADDR)")
	token := fs.String("token", os.Getenv("FATHOM_TOKEN"), "bearer token with the admin role (env FATHOM_TOKEN)")
	wait := fs.Duration("wait", 5*time.Minute, "give up waiting for the drain's end after this long (the drain goes on)")
	jsonOut := fs.Bool("json", false, "print the node's report as JSON")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return withUsageLine(fs, usageError("unexpected argument %q", pos[0]))
	}
	if *addr == "" {
		return withUsageLine(fs, usageError("--addr is required: the gateway of the node to drain"))
	}
	u, err := nodeURL(*addr)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, *wait)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String()+"/v1/node/drain", nil)
	if err != nil {
		return err
	}
	if *token != "" {
		req.Header.Set("Authorization", "Bearer "+*token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("drain node %s: %w", u.Host, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("read the answer of node %s: %w", u.Host, err)
	}
	if resp.StatusCode != http.StatusOK {
		return &exitError{code: 1, msg: fmt.Sprintf("node %s: %s: %s", u.Host, resp.Status, strings.TrimSpace(string(body)))}
	}
	if *jsonOut {
		_, err = fmt.Fprintf(stdout, "%s\n", strings.TrimSpace(string(body)))
		return err
	}
	var rep struct {
		Node     string   `json:"node"`
		Sessions int      `json:"sessions"`
		Cut      []string `json:"cut"`
		TookMS   int64    `json:"took_ms"`
	}
	if err := json.Unmarshal(body, &rep); err != nil {
		return fmt.Errorf("node %s: bad drain report: %w", u.Host, err)
	}
	fmt.Fprintf(stdout, "node %s drained in %s: %d session(s) handed over", rep.Node, (time.Duration(rep.TookMS) * time.Millisecond).String(), rep.Sessions)
	if len(rep.Cut) > 0 {
		fmt.Fprintf(stdout, "; calls still running at the drain timeout were cut (they run again elsewhere) in %s", strings.Join(rep.Cut, ", "))
	}
	_, err = fmt.Fprintln(stdout)
	return err
}
