package gateway

import (
	"errors"
	"io"
	"net/http"
)

// NotReadyError is what Config.Ready returns for a part of the node that is not ready
// (the cluster member, the journal, the sandbox). GET /readyz answers 503 naming Part to
// every caller ("journal is not ready"); Err, which may hold a store's error text or a
// connection string, is shown only to a caller with a read or write token.
type NotReadyError struct {
	// Part names what is not ready: "cluster", "journal", "sandbox".
	Part string
	// Err says why.
	Err error
}

// Error implements error.
func (e *NotReadyError) Error() string { return e.Part + " is not ready: " + e.Err.Error() }

// Unwrap returns Err.
func (e *NotReadyError) Unwrap() error { return e.Err }

// readyz answers GET /readyz: 200 "ready", or 503 saying what is not ready, in detail
// only to a caller with a token (for others the detail goes to the log).
func (h *Handler) readyz(w http.ResponseWriter, r *http.Request) {
	if h.isClosed() {
		writeError(w, errorf(CodeUnavailable, "the gateway is shutting down"))
		return
	}
	if h.cfg.Ready != nil {
		if err := h.cfg.Ready(); err != nil {
			if _, ok := h.principalOf(r); ok {
				writeError(w, errorf(CodeUnavailable, "%v", err))
				return
			}
			msg := "the node is not ready; retry"
			var nr *NotReadyError
			if errors.As(err, &nr) && nr.Part != "" {
				msg = nr.Part + " is not ready; retry"
			}
			writeError(w, hidden(CodeUnavailable, msg, err))
			return
		}
	}
	_, _ = io.WriteString(w, "ready\n")
}
