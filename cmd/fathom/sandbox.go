package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/fathom-agents/fathom/internal/sandboxd"
	"github.com/fathom-agents/fathom/messages/fsp"
)

// The fathom binary is its own sandbox helper: `fathom sandbox` re-executes it in a hidden
// mode that applies an execution's rlimits and uid before exec'ing the interpreter (see
// package sandboxd). That mode must run before anything else, hence init.
func init() {
	sandboxd.RunHelperIfRequested()
}

const sandboxSynopsis = `[flags]

Serves the Fathom Sandbox Protocol v1 (docs/fsp-v1.md) on ws://ADDR/ws: every execution
(python, javascript, shell; elixir when installed) runs in a fresh process under bubblewrap
(no network, no host files but the read-only interpreters, private /tmp and PIDs) and
rlimits (memory, CPU, file size, processes) and, as root, a uid of its own. Without a
working bubblewrap the start fails (scripts/install-bwrap.sh or apt-get install bubblewrap
installs it) unless --isolation rlimits accepts running without namespaces.
Clients authenticate with "Authorization: Bearer TOKEN" and "X-Protocol-Version: 1".
SIGINT/SIGTERM stop it, killing every running execution.`

// runSandbox serves FSP v1 until interrupted.
func runSandbox(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	def := sandboxd.DefaultConfig()
	fs := newFlagSet("sandbox", sandboxSynopsis, stderr)
	var envErrs []error
	envInt := func(key string, def int) int {
		v, ok := os.LookupEnv(key)
		if !ok || v == "" {
			return def
		}
		n, err := strconv.Atoi(v)
		if err != nil {
			envErrs = append(envErrs, fmt.Errorf("%s=%q: want an integer", key, v))
			return def
		}
		return n
	}
	var logs logFlags
	logs.register(fs, "info")
	listen := fs.String("listen", envOr("FATHOM_SANDBOX_LISTEN", "127.0.0.1:8090"), "address to serve on, :0 for any free port (env FATHOM_SANDBOX_LISTEN)")
	token := fs.String("token", os.Getenv("FATHOM_SANDBOX_TOKEN"), "bearer token clients must present; required (env FATHOM_SANDBOX_TOKEN)")
	isolation := fs.String("isolation", envOr("FATHOM_SANDBOX_ISOLATION", string(def.Isolation)), "auto or bwrap (bubblewrap, required: the start fails without it) or rlimits (no namespaces: the host's network and files; only when asked) (env FATHOM_SANDBOX_ISOLATION)")
	bwrap := fs.String("bwrap", os.Getenv("FATHOM_SANDBOX_BWRAP"), "bubblewrap binary (default: bwrap on PATH; env FATHOM_SANDBOX_BWRAP)")
	maxConcurrent := fs.Int("max-concurrent", envInt("FATHOM_SANDBOX_MAX_CONCURRENT", def.MaxConcurrent), "executions running at once; more wait in the queue (env FATHOM_SANDBOX_MAX_CONCURRENT)")
	maxQueued := fs.Int("max-queued", envInt("FATHOM_SANDBOX_MAX_QUEUED", def.MaxQueued), "executions waiting for a slot; past that, SANDBOX_OVERLOADED (env FATHOM_SANDBOX_MAX_QUEUED)")
	maxTimeout := fs.Duration("max-timeout", def.MaxTimeout, "largest limits.timeout_ms accepted")
	maxMemory := fs.Int64("max-memory-mb", def.MaxMemoryMB, "largest limits.memory_mb accepted")
	maxOutput := fs.Int64("max-output-bytes", def.MaxOutputBytes, "largest limits.max_output_bytes accepted")
	maxCode := fs.Int("max-code-bytes", def.MaxCodeBytes, "largest code accepted")
	maxProcs := fs.Uint64("max-processes", def.MaxProcesses, "RLIMIT_NPROC of an execution (enforced per execution when running as root)")
	uidBase := fs.Int("uid-base", def.UIDBase, "first of the per-slot uids executions run as when root; 0 derives one from the pid (each server on a host needs its own range)")
	shutdownTimeout := fs.Duration("shutdown-timeout", 10*time.Second, "how long a graceful shutdown may take")
	if _, err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := errors.Join(envErrs...); err != nil {
		return usageError("%v", err)
	}
	if *token == "" {
		return usageError("--token (or FATHOM_SANDBOX_TOKEN) is required")
	}
	log, err := logs.logger(stderr)
	if err != nil {
		return err
	}
	cfg := def
	cfg.Token = *token
	cfg.Isolation = sandboxd.Isolation(*isolation)
	cfg.BwrapPath = *bwrap
	cfg.MaxConcurrent, cfg.MaxQueued = *maxConcurrent, *maxQueued
	cfg.MaxTimeout, cfg.MaxMemoryMB, cfg.MaxOutputBytes, cfg.MaxCodeBytes = *maxTimeout, *maxMemory, *maxOutput, *maxCode
	cfg.MaxProcesses, cfg.UIDBase = *maxProcs, *uidBase
	if err := cfg.Validate(); err != nil {
		return usageError("%v", err)
	}
	sb, err := sandboxd.New(cfg, log.With("component", "sandbox"))
	if err != nil {
		return fmt.Errorf("start sandbox: %w", err)
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("listen %s: %w", *listen, err)
	}
	mux := http.NewServeMux()
	mux.Handle(fsp.Path, sb)
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	fmt.Fprintf(stdout, "fathom sandbox listening on ws://%s%s (isolation %s, languages %v)\n", ln.Addr(), fsp.Path, sb.Isolation(), sb.Languages())
	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-served:
	}
	log.Info("sandbox shutting down: killing running executions")
	sctx, cancel := context.WithTimeout(context.Background(), *shutdownTimeout)
	defer cancel()
	// Close first: hijacked WebSocket connections are not the HTTP server's to wait for.
	errs := []error{sb.Close(sctx), srv.Shutdown(sctx)}
	if serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
		errs = append(errs, serveErr)
	}
	return errors.Join(errs...)
}
