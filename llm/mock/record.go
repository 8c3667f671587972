package mock

import (
	"bytes"
	"io"
	"net/http"
	"slices"
)

// RecordedRequest is one model request the server received (Config.Record).
type RecordedRequest struct {
	// Path is the request's path ("/v1/chat/completions", "/v1/messages").
	Path string
	// Body is the request body as sent (at most MaxRequestBytes+1 bytes).
	Body []byte
}

// record keeps the body of each request h serves, the newest Config.Record of them, and
// hands h an unread copy.
func (s *Server) record(h http.HandlerFunc) http.HandlerFunc {
	if s.cfg.Record <= 0 {
		return h
	}
	return func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, MaxRequestBytes+1))
		if err == nil {
			s.recMu.Lock()
			if len(s.recorded) >= s.cfg.Record {
				s.recorded = slices.Delete(s.recorded, 0, len(s.recorded)-s.cfg.Record+1)
			}
			s.recorded = append(s.recorded, RecordedRequest{Path: r.URL.Path, Body: body})
			s.recMu.Unlock()
		}
		r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body), r.Body))
		h(w, r)
	}
}

// Recorded returns the model requests kept so far (Config.Record), oldest first. The
// caller may keep the slice: later requests do not change it.
func (s *Server) Recorded() []RecordedRequest {
	s.recMu.Lock()
	defer s.recMu.Unlock()
	return slices.Clone(s.recorded)
}
