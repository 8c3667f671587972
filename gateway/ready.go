package gateway

import (
	"errors"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
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

// Readiness is the body of GET /readyz asked with Accept: application/json.
type Readiness struct {
	// Status is "ready".
	Status string `json:"status"`
	// Version is the node's build version; JournalFormat the journal format it writes.
	Version       string `json:"version,omitempty"`
	JournalFormat int    `json:"journal_format,omitempty"`
}

// readyz answers GET /readyz: 200 "ready" (a Readiness as JSON when the request
// accepts application/json), or 503 saying what is not ready, in detail only to a
// caller with a token (for others the detail goes to the log). Either way the headers
// Fathom-Version and Fathom-Journal-Format tell the node's build.
func (h *Handler) readyz(w http.ResponseWriter, r *http.Request) {
	if h.cfg.Version != "" {
		w.Header().Set("Fathom-Version", h.cfg.Version)
	}
	if h.cfg.JournalFormat != 0 {
		w.Header().Set("Fathom-Journal-Format", strconv.Itoa(h.cfg.JournalFormat))
	}
	if h.isClosed() {
		writeError(w, errorf(CodeUnavailable, "the gateway is shutting down"))
		return
	}
	if h.cfg.Ready != nil {
		if err := h.cfg.Ready(); err != nil {
			if errors.Is(err, ErrDraining) {
				writeError(w, errorf(CodeUnavailable, "%v", ErrDraining))
				return
			}
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
	if acceptsJSON(r) {
		writeJSON(w, http.StatusOK, Readiness{Status: "ready", Version: h.cfg.Version, JournalFormat: h.cfg.JournalFormat})
		return
	}
	_, _ = io.WriteString(w, "ready\n")
}

// acceptsJSON reports whether r's Accept header names application/json.
func acceptsJSON(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept"), ",") {
		if mt, _, err := mime.ParseMediaType(strings.TrimSpace(part)); err == nil && mt == "application/json" {
			return true
		}
	}
	return false
}
