package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/fathom-agents/fathom/gateway"
	"github.com/fathom-agents/fathom/internal/node"
)

// runNode runs a cluster member with the HTTP gateway until interrupted.
func runNode(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("node", "[flags]", stderr)
	var nf nodeFlags
	nf.register(fs, ".fathom", "info")
	listen := fs.String("listen", envOr("FATHOM_LISTEN", "127.0.0.1:8080"), "HTTP address of the gateway, :0 for any free port (env FATHOM_LISTEN)")
	token := fs.String("token", os.Getenv("FATHOM_TOKEN"), "bearer token required on /v1 routes (env FATHOM_TOKEN; empty = no auth)")
	shutdownTimeout := fs.Duration("shutdown-timeout", 20*time.Second, "how long a graceful shutdown may take")
	if _, err := parseFlags(fs, args); err != nil {
		return err
	}
	log, err := nf.logs.logger(stderr)
	if err != nil {
		return err
	}
	cfg, err := nf.config(log, stderr)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("listen %s: %w", *listen, err)
	}
	n, err := node.Start(ctx, cfg)
	if err != nil {
		ln.Close()
		return err
	}
	h, err := gateway.New(gateway.Config{Token: *token, Sessions: n, Logger: log.With("component", "gateway"), Ready: func() error {
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		_, err := n.Journal().LastSeq(rctx, "_readyz")
		return err
	}})
	if err != nil {
		ln.Close()
		return err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	fmt.Fprintf(stdout, "fathom node listening on http://%s (cluster member %s)\n", ln.Addr(), n.Address())
	if n.UsesDemoModel() {
		fmt.Fprintln(stderr, "fathom: no model API key is set: using the built-in demo model")
	}
	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-served:
	}
	log.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), *shutdownTimeout)
	defer cancel()
	errs := []error{srv.Shutdown(sctx), n.Stop(sctx)}
	if serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
		errs = append(errs, serveErr)
	}
	return errors.Join(errs...)
}
