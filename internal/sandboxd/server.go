package sandboxd

import (
	"context"
	"crypto/subtle"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"github.com/fathom-agents/fathom/messages/fsp"
)

// Server is an FSP v1 sandbox: an http.Handler that upgrades authenticated requests to
// WebSocket connections and runs their executions. Create it with New, serve it on
// fsp.Path, stop it with Close.
type Server struct {
	cfg Config
	// shellProbed: choosing bubblewrap ran the shell's probe, and it passed.
	shellProbed bool
	log         *slog.Logger
	iso         *isolator
	runtimes    map[fsp.Language]runtime
	upgrader    websocket.Upgrader

	// slots holds the free execution slots (0..MaxConcurrent-1); a slot is also the
	// execution's uid offset.
	slots chan int

	mu      sync.Mutex
	running int
	queued  int
	conns   map[*conn]struct{}
	closed  bool
	connsWG sync.WaitGroup
}

// New checks cfg, resolves the interpreters and the isolation mode, and probes them:
// unless cfg.Isolation is IsolationRlimits, bubblewrap must be found and a probe
// execution under it must succeed, else New fails with an error wrapping
// ErrBwrapUnavailable that says how to install it; each language is kept only when its
// probe program runs.
func New(cfg Config, log *slog.Logger) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("sandbox config: %w", err)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	helper := cfg.HelperPath
	if helper == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("find the helper executable: %w", err)
		}
		helper = exe
	}
	runtimes, err := findRuntimes(cfg.Interpreters)
	if err != nil {
		return nil, fmt.Errorf("sandbox languages: %w", err)
	}
	s := &Server{
		cfg:      cfg,
		log:      log,
		runtimes: runtimes,
		slots:    make(chan int, cfg.MaxConcurrent),
		conns:    map[*conn]struct{}{},
		iso:      &isolator{cfg: cfg, mode: IsolationRlimits, helper: helper, root: os.Geteuid() == 0, uidBase: cfg.UIDBase},
		upgrader: websocket.Upgrader{
			HandshakeTimeout: 10 * time.Second,
			ReadBufferSize:   16 << 10,
			WriteBufferSize:  16 << 10,
			// Clients are services with bearer tokens, not browsers.
			CheckOrigin: func(*http.Request) bool { return true },
		},
	}
	if s.iso.uidBase == 0 {
		s.iso.uidBase = autoUIDBase(cfg.MaxConcurrent)
	}
	for i := range cfg.MaxConcurrent {
		s.slots <- i
	}
	if err := s.chooseIsolation(); err != nil {
		return nil, err
	}
	if s.iso.mode == IsolationRlimits && s.iso.root {
		if err := becomeSubreaper(); err != nil {
			return nil, err
		}
	}
	s.probeLanguages()
	if len(s.runtimes) == 0 {
		return nil, fmt.Errorf("no language works in this sandbox: does the helper %s call sandboxd.RunHelperIfRequested first thing (see Config.HelperPath)?", helper)
	}
	log.Info("sandbox ready", "isolation", s.iso.mode, "languages", s.Languages(),
		"max_concurrent", cfg.MaxConcurrent, "max_queued", cfg.MaxQueued, "slot_uids", s.iso.root, "uid_base", s.iso.uidBase)
	return s, nil
}

// chooseIsolation settles the isolation mode (probing bubblewrap once).
func (s *Server) chooseIsolation() error {
	if s.cfg.Isolation == IsolationRlimits {
		return nil
	}
	bw := s.cfg.BwrapPath
	if bw == "" {
		bw = "bwrap"
	}
	path, err := exec.LookPath(bw)
	if err == nil {
		interps := make([]string, 0, len(s.runtimes))
		for _, rt := range s.runtimes {
			interps = append(interps, rt.interp)
		}
		s.iso.bwrap, s.iso.mode, s.iso.mounts = path, IsolationBwrap, hostMounts(interps)
		err = s.probe(fsp.LangShell, 0)
	}
	if err == nil {
		s.shellProbed = true
		return nil
	}
	s.iso.mode = IsolationRlimits
	return &BwrapError{Isolation: s.cfg.Isolation, Err: err}
}

// probeLanguages drops the languages whose probe fails.
func (s *Server) probeLanguages() {
	langs := make([]fsp.Language, 0, len(s.runtimes))
	for lang := range s.runtimes {
		if lang != fsp.LangShell || !s.shellProbed { // the isolation's probe ran the shell's
			langs = append(langs, lang)
		}
	}
	// The probes run at once, each in a slot of its own (no execution runs yet): a
	// start waits for the slowest interpreter, not for the sum of them.
	errs := make([]error, len(langs))
	var wg sync.WaitGroup
	for i, lang := range langs {
		wg.Go(func() { errs[i] = s.probe(lang, i%max(s.cfg.MaxConcurrent, 1)) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			s.log.Warn("language disabled: its probe failed", "language", langs[i], "err", err)
			delete(s.runtimes, langs[i])
		}
	}
}

// probe runs lang's probe program in slot and checks that it prints "ok".
func (s *Server) probe(lang fsp.Language, slot int) error {
	rt, ok := s.runtimes[lang]
	if !ok {
		return fmt.Errorf("no interpreter for %s", lang)
	}
	var mu sync.Mutex
	var out strings.Builder
	o, err := s.iso.run(context.Background(), job{
		rt: rt, code: probeCode[lang], slot: slot, chunk: 4096,
		limits: fsp.Limits{TimeoutMS: 20000, MemoryMB: 256, MaxOutputBytes: 4096},
		output: func(_ fsp.Type, d string) bool { mu.Lock(); out.WriteString(d); mu.Unlock(); return true },
	})
	if err != nil {
		return fmt.Errorf("probe %s: %w", lang, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if o.status != fsp.StatusCompleted || o.exitCode == nil || *o.exitCode != 0 || !strings.Contains(out.String(), "ok") {
		return fmt.Errorf("probe %s: status %s, output %q", lang, o.status, out.String())
	}
	return nil
}

// Isolation returns the isolation in use: IsolationBwrap or IsolationRlimits.
func (s *Server) Isolation() Isolation { return s.iso.mode }

// Languages returns the languages this sandbox runs, sorted.
func (s *Server) Languages() []fsp.Language {
	out := make([]fsp.Language, 0, len(s.runtimes))
	for l := range s.runtimes {
		out = append(out, l)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// Load returns the executions running and waiting for a slot, server-wide.
func (s *Server) Load() fsp.Load {
	s.mu.Lock()
	defer s.mu.Unlock()
	return fsp.Load{ActiveExecutions: s.running, QueueDepth: s.queued}
}

// admit reserves room for one more execution, or reports the sandbox at capacity.
func (s *Server) admit() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.running+s.queued >= s.cfg.MaxConcurrent+s.cfg.MaxQueued {
		return false
	}
	s.queued++
	return true
}

// acquire waits for a free slot for an admitted execution; it returns false (and gives
// the admission back) when ctx ends first.
func (s *Server) acquire(ctx context.Context) (int, bool) {
	select {
	case slot := <-s.slots:
		s.mu.Lock()
		s.queued--
		s.running++
		s.mu.Unlock()
		return slot, true
	case <-ctx.Done():
		s.mu.Lock()
		s.queued--
		s.mu.Unlock()
		return 0, false
	}
}

func (s *Server) release(slot int) {
	s.mu.Lock()
	s.running--
	s.mu.Unlock()
	s.slots <- slot
}

// ServeHTTP authenticates the upgrade request (Authorization: Bearer, 401 otherwise),
// checks X-Protocol-Version (absent means 1; a list must include 1; 400 otherwise) and
// serves the connection until it closes.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set(fsp.HeaderProtocolVersion, fsp.VersionHeaderValue)
	tok, ok := fsp.BearerToken(r.Header.Get(fsp.HeaderAuthorization))
	if !ok || subtle.ConstantTimeCompare([]byte(tok), []byte(s.cfg.Token)) != 1 {
		s.log.Warn("sandbox connection refused: bad token", "remote", r.RemoteAddr)
		w.Header().Set("WWW-Authenticate", `Bearer realm="fathom-sandbox"`)
		http.Error(w, "missing or invalid bearer token", http.StatusUnauthorized)
		return
	}
	if v := r.Header.Get(fsp.HeaderProtocolVersion); v != "" && !acceptsVersion(v) {
		s.log.Warn("sandbox connection refused: unsupported protocol version", "remote", r.RemoteAddr, "version", v)
		http.Error(w, fmt.Sprintf("unsupported protocol version %q: this sandbox speaks FSP v%d", v, fsp.Version), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		http.Error(w, "sandbox shutting down", http.StatusServiceUnavailable)
		return
	}
	ws, err := s.upgrader.Upgrade(w, r, http.Header{fsp.HeaderProtocolVersion: {fsp.VersionHeaderValue}}) // writes its own error response
	if err != nil {
		s.log.Warn("sandbox websocket upgrade failed", "remote", r.RemoteAddr, "err", err)
		return
	}
	c := newConn(s, ws, s.log.With("remote", r.RemoteAddr))
	if !s.track(c) {
		_ = ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseGoingAway, "sandbox shutting down"), time.Now().Add(time.Second))
		_ = ws.Close()
		return
	}
	defer s.untrack(c)
	c.serve()
}

// acceptsVersion reports whether an X-Protocol-Version value (one version or a
// comma-separated list) includes ours.
func acceptsVersion(v string) bool {
	for _, p := range strings.Split(v, ",") {
		if strings.TrimSpace(p) == fsp.VersionHeaderValue {
			return true
		}
	}
	return false
}

func (s *Server) track(c *conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.conns[c] = struct{}{}
	s.connsWG.Add(1)
	return true
}

func (s *Server) untrack(c *conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
	s.connsWG.Done()
}

// Close refuses new connections and executions, closes every connection (which kills its
// running executions) and waits until all of them are gone or ctx ends. It is
// idempotent.
func (s *Server) Close(ctx context.Context) error {
	s.mu.Lock()
	s.closed = true
	conns := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		c.close(errShutdown)
	}
	done := make(chan struct{})
	go func() { s.connsWG.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("close sandbox: %w", ctx.Err())
	}
}
