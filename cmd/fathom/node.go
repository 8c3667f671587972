package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	fathomapi "github.com/fathom-agents/fathom"
	"github.com/fathom-agents/fathom/gateway"
)

// isLoopback reports whether addr is a loopback address (not the unspecified one,
// which listens on every interface).
func isLoopback(addr net.Addr) bool {
	tcp, ok := addr.(*net.TCPAddr)
	return ok && tcp.IP.IsLoopback()
}

// noSessions stands in for the node while the gateway's flags are validated.
type noSessions struct{}

func (noSessions) Session(string) gateway.SessionGrain { return nil }

// runNode runs a cluster member with the gateway (HTTP + WebSocket on one port) until
// interrupted, then drains it.
func runNode(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "drain" {
		return runNodeDrain(ctx, args[1:], stdout, stderr) // node_drain.go
	}
	fs := newFlagSet("node", "[flags]", stderr)
	var nf nodeFlags
	nf.register(fs, ".fathom", "info")
	listen := fs.String("listen", envOr("FATHOM_LISTEN", "127.0.0.1:8080"), "HTTP address of the gateway, :0 for any free port (env FATHOM_LISTEN)")
	token := fs.String("token", os.Getenv("FATHOM_TOKEN"), "bearer token allowing every operation on /v1 routes (env FATHOM_TOKEN; with no token and no read token: no auth)")
	readToken := fs.String("read-token", os.Getenv("FATHOM_READ_TOKEN"), "bearer token allowing only reads: state, timeline, state_at, subscribe, events (env FATHOM_READ_TOKEN)")
	origins := fs.String("allowed-origins", os.Getenv("FATHOM_ALLOWED_ORIGINS"), "comma-separated browser origins (scheme://host[:port], or *) that may open WebSockets and call the HTTP routes (CORS) besides the gateway's own host (env FATHOM_ALLOWED_ORIGINS)")
	shutdownTimeout := fs.Duration("shutdown-timeout", 20*time.Second, "how long a graceful shutdown may take; a Consul member first drains within it (its running calls get --drain-timeout or this less 5s, whichever is shorter)")
	insecure := fs.Bool("insecure", os.Getenv("FATHOM_INSECURE") == "true" || os.Getenv("FATHOM_INSECURE") == "1",
		"serve without --token, --read-token, a JWT issuer or api_keys on an address that is not loopback: every route open to the network (env FATHOM_INSECURE=true)")
	var idf identityFlags
	idf.register(fs)
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
	authn, err := idf.authenticator(ctx, nf.file)
	if err != nil {
		return err
	}
	consoleOIDC, err := idf.consoleOIDC(nf.file)
	if err != nil {
		return err
	}
	gcfg := gateway.Config{Token: *token, ReadToken: *readToken, Authenticator: authn, ConsoleOIDC: consoleOIDC, Logger: log.With("component", "gateway")}
	for _, o := range strings.Split(*origins, ",") {
		if o = strings.TrimSpace(o); o != "" {
			gcfg.AllowedOrigins = append(gcfg.AllowedOrigins, o)
		}
	}
	gcfg.Sessions = noSessions{} // validated here; the node's own once it runs
	if err := gcfg.Validate(); err != nil {
		return usageError("%v", err)
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("listen %s: %w", *listen, err)
	}
	noAuth := *token == "" && *readToken == "" && authn == nil
	if noAuth && !*insecure && !isLoopback(ln.Addr()) {
		ln.Close()
		return usageError("no --token, --read-token, JWT issuer (--oidc-issuer, --jwks-url, --jwt-key-file) or api_keys while listening on %s, which is reachable from other machines: every route would be served unauthenticated. "+
			"Set --token (env FATHOM_TOKEN), listen on a loopback address, or pass --insecure to run without authentication anyway", ln.Addr())
	}
	n, err := fathomapi.Start(ctx, cfg)
	if err != nil {
		ln.Close()
		return nf.startError(err)
	}
	h, err := n.Gateway(ctx, gcfg)
	if err != nil {
		ln.Close()
		sctx, cancel := context.WithTimeout(context.Background(), *shutdownTimeout)
		defer cancel()
		return errors.Join(err, n.Close(sctx))
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	fmt.Fprintf(stdout, "fathom node listening on http://%s (cluster member %s)\n", ln.Addr(), n.Address())
	if noAuth {
		log.Warn("no --token, --read-token, JWT issuer or api_keys: the gateway accepts every request without authentication")
	}
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
	// The gateway first: it drains WebSockets (1001 after their queued frames) and ends
	// event streams, which http.Server.Shutdown would not wait for; then the listener,
	// then the node.
	errs := []error{h.Shutdown(sctx), srv.Shutdown(sctx), n.Close(sctx)}
	if serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
		errs = append(errs, serveErr)
	}
	return errors.Join(errs...)
}
