package gateway

import (
	"bufio"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// accessWriter records what a handler answered, for the access log. It keeps the
// interfaces the gateway's handlers use: Hijack (the WebSocket upgrade), Flush (event
// streams) and Unwrap (http.ResponseController).
type accessWriter struct {
	http.ResponseWriter
	status int
	bytes  int64
	err    *apiError // the error answered (writeError), for the log
}

func (w *accessWriter) recordError(e *apiError) { w.err = e }

func (w *accessWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *accessWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(p)
	w.bytes += int64(n)
	return n, err
}

// Unwrap lets http.ResponseController reach the server's writer.
func (w *accessWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Flush implements http.Flusher.
func (w *accessWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Hijack implements http.Hijacker for the WebSocket upgrade.
func (w *accessWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	h, ok := w.ResponseWriter.(http.Hijacker)
	if !ok {
		return nil, nil, errors.New("gateway: the response writer cannot be hijacked")
	}
	w.status = http.StatusSwitchingProtocols
	return h.Hijack()
}

// quietPaths are probed often by machines (health checks, scrapes): logged at debug.
var quietPaths = map[string]bool{"/healthz": true, "/readyz": true, "/metrics": true}

// accessLog serves r through next and logs one line when it is answered: method, path,
// status, bytes, duration, the client's address and the request id (never the token or
// the body). The request id is the client's RequestIDHeader when valid, else a new one;
// every response carries it. An error answered with a plain message logs its detail
// (the internal cause) on that line, at warning level (probes stay at debug).
func (h *Handler) accessLog(next http.Handler, w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	rid := r.Header.Get(RequestIDHeader)
	if !validRequestID(rid) {
		rid = NewID("req")
	}
	w.Header().Set(RequestIDHeader, rid)
	aw := &accessWriter{ResponseWriter: w}
	next.ServeHTTP(aw, r)
	level := slog.LevelInfo
	if quietPaths[r.URL.Path] {
		level = slog.LevelDebug
	}
	attrs := []any{"method", r.Method, "path", r.URL.Path, "status", aw.status, "bytes", aw.bytes,
		"duration_ms", time.Since(start).Milliseconds(), "remote", r.RemoteAddr, "request_id", rid}
	if e := aw.err; e != nil {
		attrs = append(attrs, "code", e.code)
		if e.detail != nil {
			if level == slog.LevelInfo { // probes stay quiet: a failing /readyz is polled often
				level = slog.LevelWarn
			}
			attrs = append(attrs, "error", e.detail.Error())
		}
	}
	h.cfg.Logger.Log(r.Context(), level, "http request", attrs...)
}
