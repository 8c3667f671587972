package gateway

// Patterns returns the patterns registered on the gateway's mux so far (routes and
// mounted adapters), in order: the OpenAPI test checks that each one is documented.
func (h *Handler) Patterns() []string { return append([]string(nil), h.patterns...) }
